package server

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-lab/seckill/adapters/testenv/faultproxy"
	"github.com/seckill-lab/seckill/core"
)

// TestOrdersDeliveredTooOftenInAnOutageAreRedriven: the database out of
// the consumers' reach (a proxy between them and the real MySQL, taken
// down), and each consumer instance stopped while it holds the order —
// a rollout, or a crash loop, through the outage. Every backend that
// counts deliveries dead-letters the order as max_deliveries once it has
// come more than SECKILL_MAX_DELIVERIES times; the API lists it so;
// re-driven once the database is back it is persisted once, and the sale
// adds up (Redis's stock and the stock column both the initial stock
// less the one row). A backend that gives the order back but counts no
// deliveries keeps it coming instead: nothing reaches the register, and
// the order is persisted once the database is back.
func TestOrdersDeliveredTooOftenInAnOutageAreRedriven(t *testing.T) {
	const maxDeliveries = 2
	forEachBackendOnWith(t, []string{"real"}, func(c *Config) {
		c.Consumers, c.MaxDeliver, c.ClaimMinIdle = 0, maxDeliveries, 500*time.Millisecond
	}, func(t *testing.T, h *harness) {
		if h.cfg.Queue == "sync" {
			t.Skip("sync has no queue: nothing is delivered")
		}
		g := core.CapabilitiesOf(h.srv.queue).Guarantees
		if !g.DurableAcrossConsumerCrash {
			t.Skip("a stopped consumer's order comes to no other instance (in-process, fire-and-forget, or taken off the list): no delivery to count")
		}
		proxy, err := faultproxy.Start(mysqlAddr(t, h.cfg.MySQLDSN), 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(proxy.Close)
		consumerCfg := h.cfg
		consumerCfg.Consumers = 1
		consumerCfg.MySQLDSN = strings.Replace(h.cfg.MySQLDSN, mysqlAddr(t, h.cfg.MySQLDSN), proxy.Addr(), 1)

		const stock = 3
		voucher := h.openVoucher(stock)
		vid := idString(voucher)
		status, body := h.do("POST", "/api/vouchers/"+vid+"/seckill", h.shopper(5), nil)
		if status != 200 {
			t.Fatalf("buy: %d %v", status, body)
		}
		order := body["orderId"].(string)
		// Each instance starts with the database there and loses it
		// before its consumers run; it is stopped once it has failed to
		// persist the order. On a backend that counts, the instance after
		// the last delivery allowed dead-letters it on delivery.
		for started := 1; ; started++ {
			proxy.SetDown(false)
			c := startWith(t, consumerCfg, func(*Server) { proxy.SetDown(true) })
			lettered := waitForFailedSaveOrLetter(t, h, c, vid)
			c.shutdown()
			if lettered && !g.CountsDeliveries {
				t.Fatal("dead-lettered by a backend that declares it counts no deliveries")
			}
			if lettered {
				t.Logf("dead-lettered by instance %d", started)
				break
			}
			if started > maxDeliveries+1 && g.CountsDeliveries {
				t.Fatalf("%d instances held the order through the outage, and it was never dead-lettered", started)
			}
			if started > maxDeliveries+1 {
				break
			}
		}
		proxy.SetDown(false)
		if g.CountsDeliveries {
			redriveMaxDeliveries(t, h, vid, order, maxDeliveries)
		} else {
			startWith(t, consumerCfg)
			h.waitForRows(voucher, 1, 30*time.Second)
		}
		n, column := h.rows(voucher)
		_, v := h.do("GET", "/api/vouchers/"+vid, "", nil)
		if n != 1 || column != stock-1 || v["stock"] != float64(stock-1) {
			t.Fatalf("the database back: %d rows, stock column %d, Redis's stock %v; want 1, %d, %d", n, column, v["stock"], stock-1, stock-1)
		}
		if _, p := h.do("GET", "/api/admin/deadletters?voucher="+vid, h.cfg.AdminToken, nil); p["open"] != float64(0) || len(p["items"].([]any)) != 0 {
			t.Fatalf("open letters of the voucher: %v", p)
		}
	})
}

// redriveMaxDeliveries: the register lists the order as max_deliveries,
// delivered more than maxDeliveries times; re-driven (twice: the second
// finds nothing open), it is persisted.
func redriveMaxDeliveries(t *testing.T, h *harness, vid, order string, maxDeliveries int) {
	t.Helper()
	letters := waitForLetters(t, h, "reason=max_deliveries&voucher="+vid, 1)
	letter := letters[0].(map[string]any)
	if letter["orderId"] != order || letter["deliveries"].(float64) <= float64(maxDeliveries) {
		t.Fatalf("the letter %v; want order %s, delivered more than %d times", letter, order, maxDeliveries)
	}
	for range 2 {
		if status, out := h.do("POST", "/api/admin/deadletters/redrive", h.cfg.AdminToken, map[string]any{"voucher": vid}); status != 200 {
			t.Fatalf("re-drive: %d %v", status, out)
		}
	}
}

var storeFailed = regexp.MustCompile(`(?m)^seckill_store_failures_total(\{[^}]*\})? [1-9]`)

// mysqlAddr is the host:port a DSN names.
func mysqlAddr(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Addr
}

// waitForFailedSaveOrLetter waits until consumer instance c has failed to
// persist (false), or the register lists a letter of the voucher (true).
func waitForFailedSaveOrLetter(t *testing.T, h, c *harness, vid string) bool {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, p := h.do("GET", "/api/admin/deadletters?voucher="+vid, h.cfg.AdminToken, nil); len(p["items"].([]any)) > 0 {
			return true
		}
		if storeFailed.MatchString(c.metricsText()) {
			return false
		}
	}
	t.Fatal("the consumer instance neither failed to persist the order nor dead-lettered it within 60s")
	return false
}
