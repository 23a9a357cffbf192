package server

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// TestAdminTokenGuessesAreLimitedPerAddress: the security review sent 300
// wrong admin tokens and was answered 300 × 401 in 1.1 s. Now an address
// gets ten 401s in a minute; past them every admin request from it is 429
// rate_limited with Retry-After, the right token included (a guesser learns
// nothing more until the window ends), while another address uses the
// right token as before; every failure is counted in
// seckill_admin_auth_failures_total.
func TestAdminTokenGuessesAreLimitedPerAddress(t *testing.T) {
	forEachStack(t, func(c *Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	}, func(t *testing.T, h *harness) {
		from := func(addr string) http.Header { return http.Header{"X-Forwarded-For": {addr}} }
		codes := map[int]int{}
		var retryAfter string
		for i := range 300 {
			status, body, header := h.request("GET", "/api/admin/deadletters", "guess-"+strconv.Itoa(i), nil, from("203.0.113.7"))
			codes[status]++
			if status == 429 {
				retryAfter = header.Get("Retry-After")
				if errorCode(body) != "rate_limited" {
					t.Fatalf("guess %d: 429 %v, want rate_limited", i, body)
				}
			}
		}
		if codes[401] != adminFailures || codes[429] != 300-adminFailures {
			t.Fatalf("300 wrong admin tokens from one address: %v, want %d × 401 then 429", codes, adminFailures)
		}
		if n, err := strconv.Atoi(retryAfter); err != nil || n < 1 || n > 60 {
			t.Fatalf("Retry-After %q, want the seconds left of the minute", retryAfter)
		}
		if status, _, _ := h.request("GET", "/api/admin/deadletters", h.cfg.AdminToken, nil, from("203.0.113.7")); status != 429 {
			t.Fatalf("the right token from the guessing address: %d, want 429 until the window ends", status)
		}
		if status, body, _ := h.request("GET", "/api/admin/deadletters", h.cfg.AdminToken, nil, from("203.0.113.8")); status != 200 {
			t.Fatalf("the right token from another address: %d %v", status, body)
		}
		if status, _, _ := h.request("GET", "/api/admin/deadletters", "wrong", nil, from("203.0.113.9")); status != 401 {
			t.Fatalf("a first wrong token from a third address: %d, want 401", status)
		}
		if m := h.metricsText(); !strings.Contains(m, "seckill_admin_auth_failures_total 302") {
			t.Fatalf("/metrics: %s", grepLines(m, "admin_auth"))
		}
	})
}
