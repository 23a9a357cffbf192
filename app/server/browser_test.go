package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/launcher"
	"github.com/go-rod/rod/lib/proto"

	"github.com/seckill-lab/seckill/adapters/testenv"
)

// browser is headless Chromium driven through rod, recording what a page
// must never do: log a console error, throw, or have a request fail (no
// answer, a 5xx, or a missing page file).
type browser struct {
	t        *testing.T
	b        *rod.Browser
	mu       sync.Mutex
	problems []string
}

// newBrowser starts the machine's Chromium for the test. Under CI a
// missing Chromium fails the test; elsewhere it skips (Debian: apt-get
// install -y chromium). rod never downloads a browser here: the path is
// given.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	if testing.Short() {
		t.Skip("no browser in -short mode")
	}
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if testenv.InCI() {
			t.Fatal("no Chromium on this machine; CI installs Debian's chromium package")
		}
		t.Skip("no Chromium on this machine (apt-get install -y chromium)")
	}
	l := launcher.New().Bin(bin).Headless(true).
		NoSandbox(true). // CI runs as root, where Chromium's sandbox cannot start
		Set("disable-gpu").Set("disable-dev-shm-usage")
	url, err := l.Launch()
	if err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	b := rod.New().ControlURL(url)
	if err := b.Connect(); err != nil {
		l.Kill()
		t.Fatalf("connect to Chromium: %v", err)
	}
	t.Cleanup(func() { b.Close(); l.Kill(); l.Cleanup() })
	return &browser{t: t, b: b}
}

// page opens a tab, watched from its first request on.
func (b *browser) page() *rod.Page {
	b.t.Helper()
	p, err := b.b.Page(proto.TargetCreateTarget{})
	if err != nil {
		b.t.Fatalf("open a tab: %v", err)
	}
	b.t.Cleanup(func() { p.Close() })
	go p.EachEvent(
		func(e *proto.RuntimeConsoleAPICalled) {
			if e.Type == proto.RuntimeConsoleAPICalledTypeError || e.Type == proto.RuntimeConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, a.Value.String())
				}
				b.problem("console error: %s", strings.Join(args, " "))
			}
		},
		func(e *proto.RuntimeExceptionThrown) {
			b.problem("uncaught exception: %s %s", e.ExceptionDetails.Text, e.ExceptionDetails.Exception.Description)
		},
		func(e *proto.NetworkLoadingFailed) {
			if !e.Canceled {
				b.problem("request failed: %s (%s)", e.ErrorText, e.Type)
			}
		},
		func(e *proto.NetworkResponseReceived) {
			kind := e.Type
			page := kind == proto.NetworkResourceTypeDocument || kind == proto.NetworkResourceTypeScript || kind == proto.NetworkResourceTypeStylesheet
			if e.Response.Status >= 500 || (page && e.Response.Status >= 400) {
				b.problem("request answered %d: %s", e.Response.Status, e.Response.URL)
			}
		},
	)()
	return p.Timeout(30 * time.Second)
}

func (b *browser) problem(format string, a ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, a...))
}

// seen returns the problems recorded so far, and forgets them.
func (b *browser) seen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.problems
	b.problems = nil
	return out
}

// clean fails the test on any recorded problem.
func (b *browser) clean() {
	b.t.Helper()
	if p := b.seen(); len(p) > 0 {
		b.t.Fatalf("the page had problems:\n%s", strings.Join(p, "\n"))
	}
}

// must fails the test with what the page did so far when err is set.
func (b *browser) must(what string, err error) {
	b.t.Helper()
	if err != nil {
		b.t.Fatalf("%s: %v (page problems so far: %v)", what, err, b.seen())
	}
}

// screenshot saves the page at a width and height into the test-output
// folder: $SECKILL_TEST_OUTPUT, or seckill-test-output under the temp
// directory.
func (b *browser) screenshot(p *rod.Page, name string, width, height int, mobile bool) {
	b.t.Helper()
	dir := os.Getenv("SECKILL_TEST_OUTPUT")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "seckill-test-output")
	}
	b.must("make the test-output folder", os.MkdirAll(dir, 0o755))
	b.must("set the viewport", proto.EmulationSetDeviceMetricsOverride{Width: width, Height: height, DeviceScaleFactor: 1, Mobile: mobile}.Call(p))
	time.Sleep(300 * time.Millisecond) // the layout settles
	png, err := p.Screenshot(true, &proto.PageCaptureScreenshot{Format: proto.PageCaptureScreenshotFormatPng})
	b.must("screenshot "+name, err)
	path := filepath.Join(dir, name+".png")
	b.must("save "+path, os.WriteFile(path, png, 0o644))
	b.t.Logf("screenshot: %s", path)
}

// waitJS waits until the expression is true in the page.
// open navigates p to url and waits for the page to load: a script
// evaluated before that would run in the page it leaves (about:blank).
func (b *browser) open(p *rod.Page, what, url string) {
	b.t.Helper()
	b.must(what, p.Navigate(url))
	b.must(what+": load", p.WaitLoad())
}

func (b *browser) waitJS(p *rod.Page, what, expr string) {
	b.t.Helper()
	b.must(what, p.Wait(rod.Eval(`() => `+expr)))
}

// text is an element's text.
func (b *browser) text(p *rod.Page, selector string) string {
	b.t.Helper()
	el, err := p.Element(selector)
	b.must("find "+selector, err)
	s, err := el.Text()
	b.must("read "+selector, err)
	return s
}

func (b *browser) click(p *rod.Page, selector string) {
	b.t.Helper()
	el, err := p.Element(selector)
	b.must("find "+selector, err)
	b.must("click "+selector, el.Click(proto.InputMouseButtonLeft, 1))
}

func (b *browser) input(p *rod.Page, selector, text string) {
	b.t.Helper()
	el, err := p.Element(selector)
	b.must("find "+selector, err)
	// Typed over what the field holds, as a person selecting it would.
	b.must("select "+selector, el.SelectAllText())
	b.must("type into "+selector, el.Input(text))
}

// TestTheStorefrontSellsInABrowser: a shopper opens /, logs in with the
// development code, buys, and sees the order go from queued to created;
// a second tab watching the same sale sees the stock fall. A voucher
// title with markup stays text. Nothing on the pages logs an error or
// fails a request. Screenshots at desktop and phone size are saved.
func TestTheStorefrontSellsInABrowser(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		b := newBrowser(t)
		title := `<script>alert(1)</script> Spring sale`
		status, body := h.do("POST", "/api/admin/vouchers", h.cfg.AdminToken, map[string]any{
			"title": title, "payValue": 990, "actualValue": 2000, "stock": 3,
			"beginTime": time.Now().Add(-time.Minute).Format(time.RFC3339), "endTime": time.Now().Add(time.Hour).Format(time.RFC3339)})
		if status != http.StatusCreated {
			t.Fatalf("create voucher: %d %v", status, body)
		}
		card := `li[data-voucher="` + idString(int64(body["id"].(float64))) + `"]`

		watcher := b.page()
		b.open(watcher, "open / in the second tab", h.base+"/")
		b.waitJS(watcher, "the second tab shows the voucher", `document.querySelector('`+card+` .stock') !== null`)
		if got := b.text(watcher, card+" .stock"); got != "3 left" {
			t.Fatalf("the stock shown before the sale: %q", got)
		}

		shop := b.page()
		b.open(shop, "open /", h.base+"/")
		b.waitJS(shop, "the voucher is listed", `document.querySelector('`+card+` .title') !== null`)
		if got := b.text(shop, card+" .title"); got != title {
			t.Fatalf("the title shows as %q, want the markup as text %q", got, title)
		}
		b.input(shop, "#phone", "13800000001")
		b.click(shop, "#send-code")
		b.waitJS(shop, "the development code is shown", `!document.getElementById('dev-code').hidden`)
		b.click(shop, "#log-in")
		b.waitJS(shop, "logged in", `!document.getElementById('who').hidden && !document.querySelector('`+card+` .buy').disabled`)
		// One read of the shopper's orders, and no per-voucher read of an
		// order they do not have (each was a 404 in the console at login).
		b.waitJS(shop, "the shopper's orders are read", `performance.getEntriesByType('resource').some((e) => new URL(e.name).pathname === '/api/orders')`)
		b.waitJS(shop, "no voucher's order is asked for", `!performance.getEntriesByType('resource').some((e) => /^\/api\/vouchers\/\d+\/order$/.test(new URL(e.name).pathname))`)
		b.screenshot(shop, "storefront-desktop", 1280, 800, false)
		b.click(shop, card+" .buy")
		b.waitJS(shop, "the order becomes created", `document.querySelector('`+card+` .answer').textContent.startsWith('Yours: pay before')`)
		// Plain words and a short reference, not the 18-digit order id.
		if got := b.text(shop, card+" .answer"); !regexp.MustCompile(`· ref \d{6}$`).MatchString(got) || regexp.MustCompile(`\d{7,}`).MatchString(got) {
			t.Fatalf("the answer shown: %q, want plain words and a six-digit reference", got)
		}
		b.waitJS(watcher, "the second tab sees the stock fall", `document.querySelector('`+card+` .stock').textContent === '2 left'`)
		// An operator's pause: shoppers read paused, not sold out, and no
		// button to press; the resume gives it back.
		voucher := int64(body["id"].(float64))
		h.steer(voucher, "pause", nil)
		b.waitJS(watcher, "the second tab shows the pause", `document.querySelector('`+card+` .stock').textContent === 'Paused (2 left)'`)
		b.waitJS(watcher, "its button says paused", `document.querySelector('`+card+` .buy').textContent === 'Paused' && document.querySelector('`+card+` .buy').disabled`)
		h.steer(voucher, "resume", nil)
		b.waitJS(watcher, "the second tab shows the sale again", `document.querySelector('`+card+` .stock').textContent === '2 left'`)
		b.screenshot(shop, "storefront-phone", 390, 844, true)
		b.clean()
	})
}

// TestTheBrowserHarnessCatchesConsoleErrorsAndFailedRequests: the
// harness the page tests rely on reports a console error, an uncaught
// exception and a page file that is not found — so a clean page test means
// something.
func TestTheBrowserHarnessCatchesConsoleErrorsAndFailedRequests(t *testing.T) {
	b := newBrowser(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/console", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `<!doctype html><script src="/console.js"></script>`)
	})
	mux.HandleFunc("/console.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `console.error("broken on purpose"); null.boom;`)
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `<!doctype html><p>hi</p><script src="/nowhere.js"></script>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	p := b.page()
	b.open(p, "open the page with a console error", srv.URL+"/console")
	time.Sleep(500 * time.Millisecond)
	got := strings.Join(b.seen(), "\n")
	if !strings.Contains(got, "console error: broken on purpose") || !strings.Contains(got, "uncaught exception") {
		t.Fatalf("the harness missed the console error or the exception; it saw:\n%s", got)
	}
	b.open(p, "open the page with a missing file", srv.URL+"/missing")
	b.must("load it", p.WaitLoad())
	time.Sleep(500 * time.Millisecond)
	if got := strings.Join(b.seen(), "\n"); !strings.Contains(got, "request answered 404") || !strings.Contains(got, "nowhere.js") {
		t.Fatalf("the harness missed the failed request; it saw:\n%s", got)
	}
}

// TestAShopperPaysAndAnotherCancelsInABrowser: one shopper buys, sees the
// time left to pay, presses Pay, pays on the sandbox's page and, back in
// the shop, sees the order paid; another buys the last unit and cancels
// it, and the unit is on sale again. Nothing on the pages logs an error or
// fails a request.
func TestAShopperPaysAndAnotherCancelsInABrowser(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		b := newBrowser(t)
		voucher := h.openVoucher(2)
		card := `li[data-voucher="` + idString(voucher) + `"]`
		logIn := func(p *rod.Page, phone string) {
			b.open(p, "open /", h.base+"/")
			b.waitJS(p, "the voucher is listed", `document.querySelector('`+card+` .title') !== null`)
			b.waitJS(p, "the button asks to log in first", `document.querySelector('`+card+` .buy').textContent === 'Log in to buy'`)
			b.input(p, "#phone", phone)
			b.click(p, "#send-code")
			b.waitJS(p, "the development code is shown", `!document.getElementById('dev-code').hidden`)
			b.click(p, "#log-in")
			b.waitJS(p, "logged in", `!document.querySelector('`+card+` .buy').disabled`)
		}

		payer := b.page()
		logIn(payer, "13800000011")
		b.click(payer, card+" .buy")
		b.waitJS(payer, "the order is created and can be paid", `!document.querySelector('`+card+` .order-actions').hidden`)
		if got := b.text(payer, "#who"); got != "+86 138 0000 0011" {
			t.Fatalf("the header names the shopper %q, want their phone as their region writes it", got)
		}
		looks, err := payer.Eval(`() => ['.pay-order', '.cancel-order'].map((s) => {
			const st = getComputedStyle(document.querySelector('` + card + ` ' + s));
			return st.backgroundColor + ' ' + st.color + ' ' + st.borderTopStyle; })`)
		b.must("read the order's buttons' looks", err)
		if pay, cancel := looks.Value.Arr()[0].Str(), looks.Value.Arr()[1].Str(); pay == cancel {
			t.Fatalf("Pay and Cancel look the same (%s)", pay)
		}
		b.waitJS(payer, "the button says it is the shopper's, to pay", `document.querySelector('`+card+` .buy').textContent === 'Yours: pay below' && document.querySelector('`+card+` .buy').disabled`)
		if got := b.text(payer, card+" .payby"); !strings.HasPrefix(got, "Pay within 1") {
			t.Fatalf("the time to pay shown: %q, want about 15 minutes", got)
		}
		b.screenshot(payer, "storefront-unpaid", 1280, 800, false)
		b.click(payer, card+" .pay-order")
		b.waitJS(payer, "the sandbox's pay page", `location.pathname.startsWith('/pay/sandbox/') && !document.getElementById('pay').disabled`)
		if got := b.text(payer, "#amount"); got != "¥1.00" {
			t.Fatalf("the pay page asks %q, want the payValue ¥1.00", got)
		}
		if item, ref := b.text(payer, "#item"), b.text(payer, "#order"); item != "test voucher" || !regexp.MustCompile(`^\d{6}$`).MatchString(ref) {
			t.Fatalf("the pay page names %q, ref %q; want the item and the shop's six-digit reference", item, ref)
		}
		b.screenshot(payer, "pay-sandbox", 1280, 800, false)
		info, err := payer.Info()
		b.must("read the pay page's address", err)
		b.click(payer, "#pay")
		b.waitJS(payer, "paid", `document.getElementById('result').textContent.startsWith('Paid')`)
		// The same page again: the order is paid, and no second payment is
		// offered (the outside review's page offered one, and charged it).
		b.open(payer, "the pay page of the paid order", info.URL)
		b.waitJS(payer, "shown paid, nothing to press", `document.getElementById('pay-title').textContent === 'Paid' && getComputedStyle(document.getElementById('actions')).display === 'none' && document.getElementById('result').textContent.startsWith('This order is paid')`)
		b.screenshot(payer, "pay-sandbox-paid", 1280, 800, false)
		b.open(payer, "back to the shop", h.base+"/")
		b.waitJS(payer, "the shop shows the order paid", `(document.querySelector('`+card+` .answer')?.textContent || '').startsWith('Paid ✓ · ref ')`)
		b.waitJS(payer, "no Pay or Cancel for a paid order", `getComputedStyle(document.querySelector('`+card+` .order-actions')).display === 'none'`)
		b.waitJS(payer, "my orders list it paid", `[...document.querySelectorAll('#my-orders li')].some((li) => li.dataset.status === 'paid')`)
		b.open(payer, "reload", h.base+"/")
		b.waitJS(payer, "my orders survive the reload", `!document.getElementById('my-orders-section').hidden && document.querySelector('#my-orders li').textContent.includes('paid — ref ')`)

		canceller := b.page()
		logIn(canceller, "+86 138 0000 0012") // the field takes the country code
		// Codes asked for past the phone's budget (5 in 15 minutes): the
		// page says the real wait and counts it down on the button (the
		// server's Retry-After). The first code, typed after four more were
		// sent, still logs in.
		again := b.page()
		b.open(again, "open /", h.base+"/")
		b.input(again, "#phone", "13800000019")
		b.click(again, "#send-code")
		b.waitJS(again, "the first code is sent", `!document.getElementById('dev-code').hidden`)
		shown := b.text(again, "#dev-code")
		first := strings.TrimPrefix(shown, "Development code: ")
		for i := 2; i <= 5; i++ {
			b.click(again, "#send-code")
			b.waitJS(again, fmt.Sprintf("code %d is sent", i), fmt.Sprintf(`document.getElementById('dev-code').textContent !== %q`, shown))
			shown = b.text(again, "#dev-code")
		}
		b.click(again, "#send-code")
		b.waitJS(again, "the wait is told", `/ask for another in 1[45] min\.$/.test(document.getElementById('login-message').textContent) && document.getElementById('send-code').disabled && /^Send again in 1[45] min$/.test(document.getElementById('send-code').textContent)`)
		b.screenshot(again, "storefront-codes-spent", 1280, 800, false)
		b.input(again, "#code", first)
		b.click(again, "#log-in")
		b.waitJS(again, "the first of five codes logs in", `!document.getElementById('who').hidden`)
		// Closed, so the canceller's tab is in front again: a click in a
		// tab behind waits for ever.
		if err := again.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := canceller.Activate(); err != nil {
			t.Fatal(err)
		}
		b.click(canceller, card+" .buy")
		b.waitJS(canceller, "the order is created", `!document.querySelector('`+card+` .order-actions').hidden`)
		b.waitJS(canceller, "sold out", `document.querySelector('`+card+` .stock').textContent === 'Sold out'`)
		b.click(canceller, card+" .cancel-order")
		b.waitJS(canceller, "cancelled, the unit back", `document.querySelector('`+card+` .answer').textContent.startsWith('Cancelled by you · ref ') && document.querySelector('`+card+` .stock').textContent === '1 left'`)
		b.waitJS(canceller, "the button buys again", `document.querySelector('`+card+` .buy').textContent === 'Buy' && !document.querySelector('`+card+` .buy').disabled`)
		b.waitJS(canceller, "no Pay or Cancel for a cancelled order", `getComputedStyle(document.querySelector('`+card+` .order-actions')).display === 'none'`)
		b.screenshot(canceller, "storefront-cancelled", 1280, 800, false)
		b.clean()
		var paid, cancelled int
		for _, st := range []struct {
			status int
			n      *int
		}{{2, &paid}, {4, &cancelled}} {
			n, err := h.srv.store.DB().NewSelect().Table("tb_voucher_order").Where("voucher_id = ? AND status = ?", voucher, st.status).Count(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			*st.n = int(n)
		}
		if paid != 1 || cancelled != 1 {
			t.Fatalf("%d paid and %d cancelled orders in the database, want one each", paid, cancelled)
		}
	})
}

// TestTheStorefrontCountsDownOnTheShopsClock: a phone whose clock is ten
// minutes fast still shows a sale opening in two minutes as opening in
// about two minutes, not as on sale: the countdowns run on the clock the
// listing reports (serverTime), the one that opens the sale.
func TestTheStorefrontCountsDownOnTheShopsClock(t *testing.T) {
	h := startServer(t, "embedded", nil)
	b := newBrowser(t)
	voucher := h.createVoucher(5, time.Now().Add(2*time.Minute), time.Now().Add(time.Hour))
	card := `li[data-voucher="` + idString(voucher) + `"]`
	p := b.page()
	_, err := p.EvalOnNewDocument(`(() => { const real = Date.now.bind(Date); Date.now = () => real() + 10 * 60 * 1000; })()`)
	b.must("set the phone's clock ten minutes fast", err)
	b.open(p, "open /", h.base+"/")
	b.waitJS(p, "the voucher is listed", `document.querySelector('`+card+` .window') !== null && document.querySelector('`+card+` .window').textContent !== ''`)
	if got := b.text(p, card+" .window"); !strings.HasPrefix(got, "Opens in 1m") && !strings.HasPrefix(got, "Opens in 2m") {
		t.Fatalf("a sale opening in two minutes shows %q on a phone ten minutes fast, want about two minutes to go", got)
	}
	if got := b.text(p, card+" .buy"); !strings.HasPrefix(got, "Opens at ") {
		t.Fatalf("the button of a sale not yet open says %q, want the time it opens", got)
	}
	b.clean()
}
