package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestUnauthenticatedEndpointsRequireJSON(t *testing.T) {
	h := startServer(t, "embedded", nil)
	for _, path := range []string{"/api/auth/code", "/api/auth/login"} {
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "", "application/jsonx", "text/json"} {
			header := http.Header{"Content-Type": {ct}}
			if ct == "" {
				header = http.Header{"Content-Type": nil}
			}
			status, body, _ := h.request("POST", path, "", `{"phone":"13811112222","code":"123456"}`, header)
			if strings.HasPrefix(ct, "multipart/") && status == 400 {
				continue // fasthttp itself refuses a body that is not the multipart it claims
			}
			if status != 415 || errorCode(body) != codeUnsupportedMediaType {
				t.Errorf("%s with Content-Type %q: %d %v, want 415 %s", path, ct, status, body, codeUnsupportedMediaType)
			}
		}
	}
	status, body, _ := h.request("POST", "/api/auth/code", "", `{"phone":"13811112222"}`, http.Header{"Content-Type": {"application/json; charset=utf-8"}})
	if status != 200 {
		t.Fatalf("application/json with a charset: %d %v", status, body)
	}
	// Authenticated endpoints take a JSON body whatever it is labelled.
	voucher := h.openVoucher(1)
	status, body, _ = h.request("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(7), nil, http.Header{"Content-Type": {"text/plain"}})
	if status != 200 {
		t.Fatalf("seckill labelled text/plain: %d %v", status, body)
	}
}

func TestEveryResponseCarriesTheSecurityHeaders(t *testing.T) {
	h := startServer(t, "embedded", nil)
	voucher := h.openVoucher(1)
	for _, c := range []struct {
		method, path, token string
		api                 bool
	}{
		{"GET", "/healthz", "", false},
		{"GET", "/", "", false},
		{"GET", "/dashboard", "", false},
		{"GET", "/assets/style.css", "", false},
		{"GET", "/no/such/page", "", false},
		{"GET", "/api/vouchers", "", true},
		{"GET", "/api/vouchers/" + idString(voucher), "", true},
		{"GET", "/api/vouchers/999999", "", true},
		{"POST", "/api/vouchers/" + idString(voucher) + "/seckill", "", true},
		{"POST", "/api/vouchers/" + idString(voucher) + "/seckill", h.shopper(3), true},
		{"GET", "/api/vouchers/" + idString(voucher) + "/order", h.shopper(3), true},
		{"GET", "/api/dashboard", h.cfg.AdminToken, true},
	} {
		req, _ := http.NewRequest(c.method, h.base+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		hd := resp.Header
		for name, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
			if hd.Get(name) != want {
				t.Errorf("%s %s (%d): %s = %q, want %q", c.method, c.path, resp.StatusCode, name, hd.Get(name), want)
			}
		}
		if !strings.Contains(hd.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("%s %s: Content-Security-Policy %q", c.method, c.path, hd.Get("Content-Security-Policy"))
		}
		if c.api && hd.Get("Cache-Control") != "no-store" {
			t.Errorf("%s %s: Cache-Control %q, want no-store", c.method, c.path, hd.Get("Cache-Control"))
		}
		if page := !c.api && resp.StatusCode == 200 && c.path != "/healthz"; page && hd.Get("Cross-Origin-Opener-Policy") != "same-origin" {
			t.Errorf("%s %s: a page without helmet's document headers (Cross-Origin-Opener-Policy %q)", c.method, c.path, hd.Get("Cross-Origin-Opener-Policy"))
		}
	}
}

func TestMetricsCanMoveToAnInternalListener(t *testing.T) {
	h := startServer(t, "embedded", func(c *Config) { c.MetricsAddr = "127.0.0.1:0" })
	if status, _ := h.do("GET", "/metrics", "", nil); status != 404 {
		t.Fatalf("/metrics on the API listener with SECKILL_METRICS_ADDR set: %d, want 404", status)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.srv.ServeMetrics(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "seckill_orders_persisted_total") {
		t.Fatalf("metrics listener: %d %.200s", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeMetrics after its context ended: %v", err)
	}
	// By default /metrics stays on the API listener.
	if status, _ := startServer(t, "embedded", nil).do("GET", "/metrics", "", nil); status != 200 {
		t.Fatalf("/metrics by default: %d, want 200", status)
	}
}

// TestMetricsOnTheAPIListenerNeedTheAdminTokenOnRealServers: /metrics shows
// the login figures, queue depths and dead letters the dashboard keeps to
// the operator; on a real deployment's public listener it needs the admin
// token (the outside review read it without one). On the stand-ins it
// stays open, for `make run`'s curl.
func TestMetricsOnTheAPIListenerNeedTheAdminTokenOnRealServers(t *testing.T) {
	h := startServer(t, "real", nil)
	for _, token := range []string{"", "wrong-token-0123456789", string(h.cfg.JWTSecret)} {
		if status, body := h.do("GET", "/metrics", token, nil); status != 401 || errorCode(body) != "unauthorized" {
			t.Fatalf("/metrics on a real server's API listener with token %q: %d %v, want 401 unauthorized", token, status, body)
		}
	}
	if text := h.metricsText(); !strings.Contains(text, "seckill_orders_persisted_total") {
		t.Fatalf("/metrics with the admin token: %.200s", text)
	}
}

// TestChunkedHTTP10IsNotDechunked: HTTP/1.0 has no chunked encoding, so a
// request that claims it is malformed. fasthttp before 1.52 de-chunked it,
// which a proxy in front that reads the body by Content-Length (or to the
// end) does not: the two see different requests (smuggling). Refused now.
func TestChunkedHTTP10IsNotDechunked(t *testing.T) {
	h := startServer(t, "embedded", nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	body := `{"phone":"13811112222"}`
	req := "POST /api/auth/code HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strings.ToUpper(strconvHex(len(body))) + "\r\n" + body + "\r\n0\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return // the connection was dropped: refused
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Fatalf("an HTTP/1.0 request with Transfer-Encoding: chunked was de-chunked and served: %d %s", resp.StatusCode, got)
	}
	if resp.StatusCode >= 500 {
		t.Fatalf("a malformed request got %d", resp.StatusCode)
	}
}

func strconvHex(n int) string {
	const digits = "0123456789abcdef"
	if n == 0 {
		return "0"
	}
	var out []byte
	for n > 0 {
		out = append([]byte{digits[n%16]}, out...)
		n /= 16
	}
	return string(out)
}

// TestDocumentedSecretsAreRefused: every secret value the README and docs
// show is on the blocklist, so one copied into a real deployment stops
// its start.
func TestDocumentedSecretsAreRefused(t *testing.T) {
	files := []string{"../../README.md"}
	docs, _ := os.ReadDir("../../docs")
	for _, d := range docs {
		if strings.HasSuffix(d.Name(), ".md") || strings.HasSuffix(d.Name(), ".yaml") {
			files = append(files, "../../docs/"+d.Name())
		}
	}
	shown := regexp.MustCompile(`SECKILL_(?:JWT_SECRET|ADMIN_TOKEN|CODE_WEBHOOK_SECRET|PAY_SECRET)=['"]?([^\s'"\\]+)`)
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range shown.FindAllStringSubmatch(string(b), -1) {
			v := m[1]
			if v == "…" || strings.HasPrefix(v, "$") || strings.HasPrefix(v, "<") {
				continue // a placeholder, not a value
			}
			seen++
			if !isExampleSecret(v) {
				t.Errorf("%s shows %s=%s, which real servers would accept: add it to exampleSecrets", f, strings.SplitN(m[0], "=", 2)[0], v)
			}
		}
	}
	if seen == 0 {
		t.Fatal("found no example secret in the docs: the pattern is broken")
	}
}
