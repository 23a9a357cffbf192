package server

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

var fuzzRoutes = []struct{ method, path string }{
	{"GET", "/api/vouchers/{id}"},
	{"POST", "/api/vouchers/{id}/seckill"},
	{"GET", "/api/vouchers/{id}/order"},
	{"GET", "/api/orders/{id}"},
	{"POST", "/api/auth/code"},
	{"POST", "/api/auth/login"},
	{"POST", "/api/admin/vouchers"},
	{"DELETE", "/api/vouchers/{id}"},
}

// FuzzRequests sends arbitrary ids, bodies and authorization headers to
// every route of a live server on the embedded stand-ins: the answer is
// never a 5xx, and every error is the contract's JSON body. The auth values
// "SHOPPER" and "ADMIN" stand for valid tokens, so the fuzzer also reaches
// the handlers behind the auth checks.
func FuzzRequests(f *testing.F) {
	h := startServer(f, "embedded", func(c *Config) { c.SeckillRate = 0; c.CodeRate = 0 })
	voucher := idString(h.openVoucher(1000))
	shopper := h.shopper(1)
	seeds := []struct {
		route      uint8
		id, body   string
		authorized string
	}{
		{0, voucher, "", ""},
		{0, "abc", "", ""},
		{0, "-1", "", ""},
		{0, "99999999999999999999", "", ""},
		{1, voucher, "", "SHOPPER"},
		{1, voucher, "{}", "Bearer x.y.z"},
		{2, voucher, "", "SHOPPER"},
		{3, "665485816507662337", "", "SHOPPER"},
		{4, "", `{"phone":"13800000000"}`, ""},
		{4, "", `{"phone":13800000000}`, ""},
		{4, "", `{"phone":"1"} trailing`, ""},
		{5, "", `{"phone":"13800000000","code":"123456"}`, ""},
		{6, "", `{"title":"t","payValue":1,"actualValue":2,"stock":5,"beginTime":"2026-01-01T00:00:00Z","endTime":"2027-01-01T00:00:00Z"}`, "ADMIN"},
		{6, "", `{"title":"t","stock":-5,"beginTime":"x"}`, "ADMIN"},
		{7, voucher, "", ""},
	}
	for _, s := range seeds {
		f.Add(s.route, s.id, s.body, s.authorized)
	}
	f.Fuzz(func(t *testing.T, route uint8, id, body, auth string) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		path := strings.Replace(r.path, "{id}", url.PathEscape(id), 1)
		req := httptest.NewRequest(r.method, path, strings.NewReader(body))
		switch auth {
		case "SHOPPER":
			req.Header.Set("Authorization", "Bearer "+shopper)
		case "ADMIN":
			req.Header.Set("Authorization", "Bearer "+h.cfg.AdminToken)
		case "":
		default:
			if strings.ContainsAny(auth, "\r\n\x00") {
				return // not a header value an HTTP client can send
			}
			req.Header.Set("Authorization", auth)
		}
		resp, err := h.srv.http.Test(req, -1)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, path, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s body %q auth %q: status %d", r.method, path, body, auth, resp.StatusCode)
		}
		if resp.StatusCode >= 400 {
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%s %s: status %d without the contract's error body (%v)", r.method, path, resp.StatusCode, err)
			}
		}
	})
}
