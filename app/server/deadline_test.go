package server

import (
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv/faultproxy"
)

// startFaultProxy starts a proxy to backend, closed when the test ends.
func startFaultProxy(t *testing.T, backend string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(backend, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestADependencyThatStopsAnsweringCostsARequestItsDeadline: Redis, then
// MySQL, stop answering without closing their connections. Every request
// that needs them is answered 503 unavailable with Retry-After within its
// deadline (SECKILL_REQUEST_TIMEOUT, 500 ms here) instead of hanging until
// the client gives up; nothing is reserved for a request that timed out.
func TestADependencyThatStopsAnsweringCostsARequestItsDeadline(t *testing.T) {
	const deadline = 500 * time.Millisecond
	for _, dep := range []string{"redis", "mysql", "mysql-sync"} {
		t.Run(dep, func(t *testing.T) {
			var hole *faultproxy.Proxy
			h := startServer(t, "real", func(c *Config) {
				c.RequestTimeout = deadline
				if dep == "mysql-sync" {
					c.Queue = "sync" // MySQL is the order path
				}
				if dep == "redis" {
					u, _ := url.Parse(c.RedisURL)
					hole = startFaultProxy(t, u.Host)
					u.Host = hole.Addr()
					c.RedisURL = u.String()
				} else {
					at := strings.Index(c.MySQLDSN, "tcp(") + len("tcp(")
					end := strings.Index(c.MySQLDSN[at:], ")") + at
					hole = startFaultProxy(t, c.MySQLDSN[at:end])
					c.MySQLDSN = c.MySQLDSN[:at] + hole.Addr() + c.MySQLDSN[end:]
				}
			})
			// Before the server's stop: its connections reset, so the stop
			// does not wait out the fault.
			t.Cleanup(hole.Close)
			voucher := h.openVoucher(100)
			path := "/api/vouchers/" + idString(voucher)
			status, body := h.do("POST", path+"/seckill", h.shopper(1), nil)
			if status != 200 {
				t.Fatalf("before the fault: %d %v", status, body)
			}
			order := body["orderId"].(string)
			h.waitForRows(voucher, 1, 10*time.Second)
			hole.Silence()
			requests := map[string]string{
				"seckill":      "POST " + path + "/seckill",
				"order status": "GET " + path + "/order",
				"order":        "GET /api/orders/" + order,
			}
			var wg sync.WaitGroup
			for name, req := range requests {
				for u := int64(2); u <= 6; u++ {
					wg.Go(func() {
						method, p, _ := strings.Cut(req, " ")
						start := time.Now()
						status, body, header := h.doWithHeader(method, p, h.shopper(u))
						took := time.Since(start)
						if status == 503 && errorCode(body) == "unavailable" && header.Get("Retry-After") != "" && took < deadline+time.Second {
							return
						}
						// What needs neither dependency may still succeed.
						if status < 500 && !(dep != "mysql" && name == "seckill") {
							return
						}
						t.Errorf("%s with %s not answering: %d %v (Retry-After %q) after %v; want 503 unavailable with Retry-After within %v",
							name, dep, status, body, header.Get("Retry-After"), took.Round(time.Millisecond), deadline+time.Second)
					})
				}
			}
			wg.Wait()
		})
	}
}
