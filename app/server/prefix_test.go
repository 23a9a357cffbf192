package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
)

// TestEveryKeyIsUnderThePrefix: SECKILL_KEY_PREFIX is the prefix of every
// key the server writes — a shared Redis's ACL key patterns (~shop:*)
// depend on it. A whole sale runs on a Redis of its own (the stand-in's,
// and a private redis-server): login codes, the rate limits (the
// library's keys too), the reservation, the queue, payment, cancel and
// expiry, the dashboard. Then every key in that Redis must start with the
// prefix.
func TestEveryKeyIsUnderThePrefix(t *testing.T) {
	for _, stack := range []string{"embedded", "real"} {
		t.Run(stack, func(t *testing.T) {
			mutate := func(c *Config) {
				c.KeyPrefix = "shop1:"
				c.SeckillRate, c.CodeRate, c.LoginRate = 2, 100, 100
				c.PayWindow = time.Second
			}
			if stack == "real" {
				dsn, ok := testenv.MySQLDatabase(t)
				if !ok {
					t.Skipf("%s is not set", testenv.MySQLDSNEnv)
				}
				proc := redistopology.StartRedisProcess(t)
				inner := mutate
				mutate = func(c *Config) {
					inner(c)
					c.RedisURL, c.MySQLDSN, c.DevCodes = proc.URL(), dsn, true
				}
			}
			h := startServer(t, "embedded", mutate)
			seen := map[string]bool{}
			// Some keys live for moments (a rate limit's bucket, a code
			// until its login): the keys are looked at along the way.
			look := func() {
				keys, err := h.srv.rdb.Keys(context.Background(), "*").Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					seen[k] = true
				}
			}
			voucher := h.openVoucher(3)
			h.do("POST", "/api/auth/code", "", map[string]any{"phone": "13800004444"}) // a code never used
			look()
			var tokens []string
			var orders []string
			for i, phone := range []string{"13800001111", "13800002222", "13800003333"} {
				token, _ := devLogin(t, h, phone)
				tokens = append(tokens, token)
				status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", token, nil)
				if status != 200 {
					t.Fatalf("buyer %d: %d %v", i, status, body)
				}
				orders = append(orders, body["orderId"].(string))
				look()
			}
			h.waitForRows(voucher, 3, 10*time.Second)
			if status, body := h.do("POST", "/api/orders/"+orders[0]+"/pay", tokens[0], nil); status == 200 {
				h.do("POST", "/api/payments/sandbox/"+body["paymentId"].(string)+"/complete", "", map[string]string{"status": "succeeded"})
			}
			h.do("POST", "/api/orders/"+orders[1]+"/cancel", tokens[1], nil)
			look()
			limited := false
			for range 4 { // past the seckill limit: 429s, counted in Redis
				status, _ := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", tokens[2], nil)
				limited = limited || status == 429
			}
			look()
			time.Sleep(2500 * time.Millisecond) // order 3 expires, its unit goes back
			h.do("GET", "/api/dashboard", h.cfg.AdminToken, nil)
			look()
			var outside []string
			for k := range seen {
				if !strings.HasPrefix(k, "shop1:") {
					outside = append(outside, k)
				}
			}
			if len(outside) > 0 {
				t.Fatalf("keys not under the prefix: %v (of %d seen)", outside, len(seen))
			}
			// The checker saw the kinds of key it is about: a rate limit's
			// (the library's), a login code's, the sale's.
			for _, part := range []string{"rate:", "code", "stock:", "payby:"} {
				found := false
				for k := range seen {
					found = found || strings.Contains(k, part)
				}
				if !found {
					t.Errorf("no key with %q was seen (limited: %v): %v", part, limited, seen)
				}
			}
		})
	}
}
