package server

import (
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nyaruka/phonenumbers"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seckill-lab/seckill/adapters/codewebhook"
)

// smsGateway plays an SMS gateway behind the webhook sender: it checks
// each request's signature as a real gateway would, and keeps the codes
// it accepted, by phone.
type smsGateway struct {
	secret []byte
	fail   atomic.Bool // answer 500 to everything
	calls  atomic.Int32
	mu     sync.Mutex
	codes  map[string]string
	bodies []map[string]any
	url    string
}

func newSMSGateway(t *testing.T) *smsGateway {
	g := &smsGateway{secret: []byte("sms-gateway-shared-secret"), codes: map[string]string{}}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	g.url = srv.URL + "/sms"
	return g
}

func (g *smsGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	if g.fail.Load() {
		http.Error(w, "gateway down", http.StatusInternalServerError)
		return
	}
	if !hmac.Equal([]byte(r.Header.Get("X-Seckill-Signature")), []byte(codewebhook.Sign(g.secret, body))) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.codes[m["phone"].(string)] = m["code"].(string)
	g.bodies = append(g.bodies, m)
}

func (g *smsGateway) codeFor(phone string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.codes[phone]
}

// withGateway configures the server as production would be: codes go
// only through the webhook, none in the response.
func withGateway(g *smsGateway) func(*Config) {
	return func(c *Config) {
		c.DevCodes = false
		c.CodeSender, c.CodeWebhookURL, c.CodeWebhookSecret = WebhookSender, g.url, string(g.secret)
	}
}

func TestLoginThroughTheWebhookSender(t *testing.T) {
	for _, stack := range []string{"embedded", "real"} {
		t.Run(stack, func(t *testing.T) {
			g := newSMSGateway(t)
			h := startServer(t, stack, withGateway(g))
			status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": "138 1111 2222"})
			if status != 200 || body["sent"] != true {
				t.Fatalf("code: %d %v", status, body)
			}
			if _, leaked := body["code"]; leaked {
				t.Fatalf("the code was returned in the response without dev codes: %v", body)
			}
			code := g.codeFor("+8613811112222")
			if len(code) != 6 {
				t.Fatalf("the gateway got no six-digit code for +8613811112222 (it got %v)", g.bodies)
			}
			exp, err := time.Parse(time.RFC3339, g.bodies[0]["expiresAt"].(string))
			if err != nil || time.Until(exp) < 4*time.Minute || time.Until(exp) > 6*time.Minute {
				t.Errorf("expiresAt %v (%v), want RFC 3339 about 5 minutes ahead", g.bodies[0]["expiresAt"], err)
			}
			status, body = h.do("POST", "/api/auth/login", "", map[string]any{"phone": "+86 138-1111-2222", "code": code, "challenge": body["challenge"]})
			if status != 200 || body["token"] == nil {
				t.Fatalf("login with the gateway's code: %d %v", status, body)
			}
			status, me := h.do("GET", "/api/vouchers/1/order", body["token"].(string), nil)
			if status == 401 {
				t.Fatalf("the login's token is refused: %v", me)
			}
		})
	}
}

func TestAGatewayThatFailsIsBusyAndTheCodeIsWithdrawn(t *testing.T) {
	g := newSMSGateway(t)
	h := startServer(t, "embedded", func(c *Config) {
		withGateway(g)(c)
		c.CodesPerPhone = 1 // so the undelivered code must give its place back
	})
	g.fail.Store(true)
	status, body, header := h.request("POST", "/api/auth/code", "", map[string]any{"phone": "13811112222"}, nil)
	if status != 503 || errorCode(body) != "busy" || header.Get("Retry-After") == "" {
		t.Fatalf("gateway down: %d %v (Retry-After %q), want 503 busy with Retry-After", status, body, header.Get("Retry-After"))
	}
	if n := g.calls.Load(); n < 2 {
		t.Errorf("the gateway was tried %d times, want retries", n)
	}
	if n := testutil.ToFloat64(h.srv.metrics.codesSent.WithLabelValues("failed")); n != 1 {
		t.Errorf("seckill_login_codes_total{result=failed} = %v, want 1", n)
	}
	// The undelivered code was withdrawn: it spent none of the budget.
	g.fail.Store(false)
	status, sent := h.do("POST", "/api/auth/code", "", map[string]any{"phone": "13811112222"})
	if status != 200 {
		t.Fatalf("asking again once the gateway is back (a budget of one code): %d %v", status, sent)
	}
	if status, body := h.do("POST", "/api/auth/login", "", map[string]any{"phone": "13811112222", "code": g.codeFor("+8613811112222"), "challenge": sent["challenge"]}); status != 200 {
		t.Fatalf("login: %d %v", status, body)
	}
}

func TestWithoutASenderNorDevCodesCodesAreRefusedClearly(t *testing.T) {
	h := startServer(t, "embedded", func(c *Config) { c.DevCodes = false })
	status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": "13811112222"})
	if status != 503 || errorCode(body) != "unavailable" || !strings.Contains(fmt.Sprint(body), "no code sender") {
		t.Fatalf("no sender: %d %v, want 503 unavailable naming the missing sender", status, body)
	}
}

// TestACodeCannotBeCycledFromManyAddresses is the attack the outside
// review ran: from a new address for every request (what a /48 of IPv6
// gives), ask codes for the victim's phone and guess at each until it
// burns. The per-address limits never bite. What holds is the length of
// the codes and each code belonging to its challenge: the phone's first 5
// codes in 15 minutes are six digits (one of them the owner's), every
// later one ten, so of the attacker's 50 codes 4 can be guessed at all (20
// judged guesses at six digits, as before), none is, and the owner's code
// still logs them in. (The budget is each address's own since the security
// review: five requests from anywhere no longer lock the owner out.)
func TestACodeCannotBeCycledFromManyAddresses(t *testing.T) {
	for _, stack := range []string{"embedded", "real"} {
		t.Run(stack, func(t *testing.T) {
			g := newSMSGateway(t)
			h := startServer(t, stack, func(c *Config) {
				withGateway(g)(c)
				c.LoginRate, c.CodeRate = 30, 20
				c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			})
			var addr atomic.Int32
			fresh := func() http.Header { // an address never seen before
				n := addr.Add(1)
				return http.Header{"X-Forwarded-For": {fmt.Sprintf("2001:db8:%x:%x::1", n/65536, n%65536)}}
			}
			const phone = "13911112222"
			status, owner, _ := h.request("POST", "/api/auth/code", "", map[string]any{"phone": phone}, fresh())
			ownerCode := g.codeFor("+8613911112222")
			if status != 200 || owner["challenge"] == nil || len(ownerCode) != 6 {
				t.Fatalf("the owner's code: %d %v (gateway got %q)", status, owner, ownerCode)
			}
			var challenges []string
			digits := map[float64]int{}
			for range 50 {
				status, body, _ := h.request("POST", "/api/auth/code", "", map[string]any{"phone": phone}, fresh())
				if status != 200 {
					t.Fatalf("an attacker's code request from a new address: %d %v", status, body)
				}
				challenges = append(challenges, body["challenge"].(string))
				digits[body["codeDigits"].(float64)]++
			}
			if digits[6] != 4 || digits[10] != 46 {
				t.Fatalf("from 50 addresses the attacker's codes by length: %v, want 4 of six digits (the phone's 5 less the owner's), then ten", digits)
			}
			// Every guess from its own address, all at once: 5 on each of the
			// attacker's codes, and 100 under made-up or missing challenges.
			var wg sync.WaitGroup
			var accepted atomic.Int32
			guess := func(body map[string]any) {
				defer wg.Done()
				if status, _, _ := h.request("POST", "/api/auth/login", "", body, fresh()); status == 200 {
					accepted.Add(1)
				}
			}
			for i, ch := range challenges {
				for n := range 5 {
					code := fmt.Sprintf("%06d", (i*5+n)*7919%1_000_000)
					if code == ownerCode {
						code = ownerCode[1:] + ownerCode[:1]
					}
					wg.Add(1)
					go guess(map[string]any{"phone": phone, "code": code, "challenge": ch})
				}
			}
			for n := range 100 {
				wg.Add(1)
				go guess(map[string]any{"phone": phone, "code": fmt.Sprintf("%06d", n), "challenge": fmt.Sprintf("%032x", n)})
			}
			wg.Wait()
			m := h.srv.metrics.logins
			judged := testutil.ToFloat64(m.WithLabelValues("wrong")) + testutil.ToFloat64(m.WithLabelValues("burned"))
			if accepted.Load() != 0 || judged != 250 {
				t.Fatalf("%d guesses accepted, %v judged; want none accepted and 250 judged (50 codes × 5, 20 of them at six digits)", accepted.Load(), judged)
			}
			status, body, _ := h.request("POST", "/api/auth/login", "", map[string]any{"phone": phone, "code": ownerCode, "challenge": owner["challenge"]}, fresh())
			if status != 200 || body["token"] == nil {
				t.Fatalf("the owner's code after the attack: %d %v, want a login", status, body)
			}
		})
	}
}

// TestCodesGoOnlyToMobileNumbersOfTheAllowedRegions: landlines,
// premium-rate and toll-free numbers, and mobiles of other regions, get
// 400 phone_not_allowed and no text (SMS pumping earns on exactly those).
func TestCodesGoOnlyToMobileNumbersOfTheAllowedRegions(t *testing.T) {
	example := func(region string, kind phonenumbers.PhoneNumberType) string {
		n := phonenumbers.GetExampleNumberForType(region, kind)
		if n == nil {
			t.Fatalf("no example %v number for %s", kind, region)
		}
		return phonenumbers.Format(n, phonenumbers.E164)
	}
	g := newSMSGateway(t)
	h := startServer(t, "embedded", withGateway(g))
	for _, refused := range []string{
		example("CN", phonenumbers.FIXED_LINE), example("CN", phonenumbers.PREMIUM_RATE),
		example("CN", phonenumbers.TOLL_FREE), example("GB", phonenumbers.MOBILE), example("US", phonenumbers.FIXED_LINE_OR_MOBILE),
	} {
		if status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": refused}); status != 400 || errorCode(body) != "phone_not_allowed" {
			t.Errorf("%s with SECKILL_PHONE_REGIONS=CN: %d %v, want 400 phone_not_allowed", refused, status, body)
		}
	}
	if n := g.calls.Load(); n != 0 {
		t.Fatalf("the gateway was called %d times for numbers that get no code", n)
	}
	if status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": example("CN", phonenumbers.MOBILE)}); status != 200 {
		t.Fatalf("a CN mobile: %d %v", status, body)
	}
	h = startServer(t, "embedded", func(c *Config) {
		withGateway(g)(c)
		c.PhoneRegions = []string{"CN", "GB"}
	})
	if status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": example("GB", phonenumbers.MOBILE)}); status != 200 {
		t.Fatalf("a GB mobile with SECKILL_PHONE_REGIONS=CN,GB: %d %v", status, body)
	}
	if status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": example("GB", phonenumbers.FIXED_LINE)}); status != 400 || errorCode(body) != "phone_not_allowed" {
		t.Fatalf("a GB landline with SECKILL_PHONE_REGIONS=CN,GB: %d %v", status, body)
	}
}

func TestLoginIsLimitedPerClientAddress(t *testing.T) {
	h := startServer(t, "embedded", func(c *Config) {
		c.LoginRate = 30
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	login := func(addr string) int {
		status, _, _ := h.request("POST", "/api/auth/login", "", map[string]any{"phone": "13811112222", "code": "123456", "challenge": strings.Repeat("0", 32)},
			http.Header{"X-Forwarded-For": {addr}})
		return status
	}
	for i := range 30 {
		if s := login("192.0.2.7"); s != 401 {
			t.Fatalf("attempt %d from one address: %d, want 401 (within the limit)", i+1, s)
		}
	}
	if s := login("192.0.2.7"); s != 429 {
		t.Fatalf("attempt 31 from one address: %d, want 429", s)
	}
	if s := login("192.0.2.8"); s != 401 {
		t.Fatalf("another address: %d, want 401 (its own limit)", s)
	}
	// A client the balancer saw as 192.0.2.7 cannot escape by writing an
	// address of its own at the left of the header.
	if s := login("10.9.9.9, 192.0.2.7"); s != 429 {
		t.Fatalf("a spoofed leftmost address: %d, want 429 (the rightmost untrusted entry is the client)", s)
	}
	// IPv6: one /64 is one client.
	for i := range 30 {
		if s := login(fmt.Sprintf("2001:db8:1:2::%x", i+1)); s != 401 {
			t.Fatalf("IPv6 attempt %d: %d", i+1, s)
		}
	}
	if s := login("2001:db8:1:2:ffff::1"); s != 429 {
		t.Fatalf("a 31st address of the same /64: %d, want 429", s)
	}
	if s := login("2001:db8:1:3::1"); s != 401 {
		t.Fatalf("the next /64: %d, want 401", s)
	}
}

func TestAnUntrustedPeersProxyHeaderIsIgnored(t *testing.T) {
	h := startServer(t, "embedded", func(c *Config) {
		c.LoginRate = 30
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")} // not the test's loopback
	})
	for i := range 31 {
		status, _, _ := h.request("POST", "/api/auth/login", "", map[string]any{"phone": "13811112222", "code": "123456", "challenge": strings.Repeat("0", 32)},
			http.Header{"X-Forwarded-For": {fmt.Sprintf("198.51.100.%d", i+1)}})
		if i == 30 && status != 429 {
			t.Fatalf("31 attempts from one untrusted peer with made-up headers: the last got %d, want 429", status)
		}
	}
}

// devLogin logs phone in with a dev code and returns the token and id.
func devLogin(t *testing.T, h *harness, phone string) (string, int64) {
	t.Helper()
	status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": phone})
	if status != 200 {
		t.Fatalf("code for %q: %d %v", phone, status, body)
	}
	status, body = h.do("POST", "/api/auth/login", "", map[string]any{"phone": phone, "code": body["code"], "challenge": body["challenge"]})
	if status != 200 {
		t.Fatalf("login as %q: %d %v", phone, status, body)
	}
	return body["token"].(string), int64(body["userId"].(float64))
}

func TestTheFourFormsOfOnePhoneAreOneShopper(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(10)
		forms := []string{"13811112222", "8613811112222", "+8613811112222", "008613811112222"}
		var first int64
		for i, f := range forms {
			token, id := devLogin(t, h, f)
			if i == 0 {
				first = id
				if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", token, nil); status != 200 {
					t.Fatalf("first unit as %q: %d %v", f, status, body)
				}
				continue
			}
			if id != first {
				t.Fatalf("%q is user %d, %q user %d: one phone, two shoppers", forms[0], first, f, id)
			}
			if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", token, nil); status != 409 || errorCode(body) != "already_purchased" {
				t.Fatalf("a second unit as %q: %d %v, want 409 already_purchased", f, status, body)
			}
		}
		for _, bad := range []string{"12345", "+86 1381111222", "1381111222a", "+999 123456789"} {
			if status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": bad}); status != 400 || errorCode(body) != "bad_request" {
				t.Errorf("invalid number %q: %d %v, want 400 bad_request", bad, status, body)
			}
		}
	})
}

func TestCollidingLegacyUsersAreReportedToTheAdmin(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		ctx := t.Context()
		db := h.srv.store.DB()
		var ids []int64
		for i, f := range []string{"13811113333", "+8613811113333"} {
			res, err := db.NewRaw("INSERT INTO tb_user (phone, nick_name, create_time, update_time) VALUES (?, 'legacy', ?, ?)",
				f, time.Now().Add(time.Duration(i-10)*time.Minute).UTC(), time.Now().UTC()).Exec(ctx)
			if err != nil {
				t.Fatal(err)
			}
			id, _ := res.LastInsertId()
			ids = append(ids, id)
		}
		if err := h.srv.normalizePhones(ctx); err != nil { // what the next start does
			t.Fatal(err)
		}
		if status, _ := h.do("GET", "/api/admin/users/phone-collisions", "", nil); status != 401 {
			t.Fatalf("collisions without the admin token: %d, want 401", status)
		}
		status, body := h.do("GET", "/api/admin/users/phone-collisions", h.cfg.AdminToken, nil)
		list, _ := body["collisions"].([]any)
		if status != 200 || len(list) != 1 || fmt.Sprint(list[0]) != fmt.Sprintf("map[phone:+8613811113333 userIds:[%d %d]]", ids[0], ids[1]) {
			t.Fatalf("collisions: %d %v, want +8613811113333 shared by %v", status, body, ids)
		}
		if _, id := devLogin(t, h, "138 1111 3333"); id != ids[0] {
			t.Fatalf("the shared phone logs in as %d, want the oldest user %d", id, ids[0])
		}
	})
}

func TestForcedDevCodesAreOnTheDashboard(t *testing.T) {
	h := startServer(t, "embedded", func(c *Config) { c.DevCodesForced = true })
	status, body := h.do("GET", "/api/dashboard", h.cfg.AdminToken, nil)
	if w, _ := body["warnings"].([]any); status != 200 || len(w) != 1 || !strings.Contains(w[0].(string), "SECKILL_DEV_CODES=force") {
		t.Fatalf("dashboard of a forced dev-codes server: %d warnings %v", status, body["warnings"])
	}
}

// TestACodePastThePhonesBudgetSaysTheWait: the sixth code for one phone
// from one address in 15 minutes, in any of its written forms, is 429 with
// Retry-After, the
// whole seconds until the first leaves the window (the storefront counts
// them down on its button).
func TestACodePastThePhonesBudgetSaysTheWait(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		for i, form := range []string{"13811113333", "+86 138 1111 3333", "8613811113333", "008613811113333", "138-1111-3333"} {
			if status, body := h.do("POST", "/api/auth/code", "", map[string]any{"phone": form}); status != 200 {
				t.Fatalf("code %d (%q): %d %v", i+1, form, status, body)
			}
		}
		status, body, header := h.request("POST", "/api/auth/code", "", map[string]any{"phone": "+86 138 1111 3333"}, nil)
		wait, err := strconv.Atoi(header.Get("Retry-After"))
		if status != 429 || errorCode(body) != "rate_limited" || err != nil || wait < 890 || wait > 900 {
			t.Fatalf("a sixth code: %d %v, Retry-After %q; want 429 rate_limited with about 900 s", status, body, header.Get("Retry-After"))
		}
	})
}

// TestNobodyCanLockAPhoneOut is the security review's lockout, as it was
// tried: an attacker asks codes for the owner's phone from eight
// addresses until each is refused; the review's owner, on a ninth, got 429
// Retry-After: 900 and, with the attack repeated every 15 minutes, never
// logged in. Now each address spends only its own budget: the owner gets a
// code (ten digits: the phone is under attack) and logs in with it.
func TestNobodyCanLockAPhoneOut(t *testing.T) {
	g := newSMSGateway(t)
	forEachStack(t, func(c *Config) {
		withGateway(g)(c)
		c.CodeRate = 0
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	}, func(t *testing.T, h *harness) {
		from := func(addr string) http.Header { return http.Header{"X-Forwarded-For": {addr}} }
		const phone = "13911113333"
		for a := 1; a <= 8; a++ {
			for i := 1; ; i++ {
				status, body, _ := h.request("POST", "/api/auth/code", "", map[string]any{"phone": phone}, from(fmt.Sprintf("203.0.113.%d", a)))
				if status == 429 {
					break
				}
				if status != 200 || i > 10 {
					t.Fatalf("the attacker's request %d from address %d: %d %v", i, a, status, body)
				}
			}
		}
		status, owner, _ := h.request("POST", "/api/auth/code", "", map[string]any{"phone": phone}, from("198.51.100.9"))
		code := g.codeFor("+8613911113333")
		if status != 200 || owner["codeDigits"] != float64(10) || len(code) != 10 {
			t.Fatalf("the owner's code from a ninth address: %d %v (texted %q), want 200 and a code of ten digits", status, owner, code)
		}
		status, body, _ := h.request("POST", "/api/auth/login", "", map[string]any{"phone": phone, "code": code, "challenge": owner["challenge"]}, from("198.51.100.9"))
		if status != 200 || body["token"] == nil {
			t.Fatalf("the owner's login: %d %v", status, body)
		}
	})
}
