package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/seckill-lab/seckill/adapters/amqpqueue"
	"github.com/seckill-lab/seckill/adapters/kafkaqueue"
	"github.com/seckill-lab/seckill/adapters/natsqueue"
	"github.com/seckill-lab/seckill/adapters/testenv"
)

// publishToTheDeadStream is the security review's second forgery: a
// record published straight to the broker's dead-letter stream, topic or
// queue, with the headers a dead letter has, of the forger's choosing.
func publishToTheDeadStream(t *testing.T, h *harness, body []byte, headers map[string]string) {
	t.Helper()
	publishRaw(t, h, brokerPlace{natsSubject: natsqueue.StreamName(h.cfg.KeyPrefix) + "_dead.dead",
		kafkaTopic: kafkaqueue.TopicName(h.cfg.KeyPrefix) + "_dead", amqpQueue: amqpqueue.QueueName(h.cfg.KeyPrefix) + "_dead"}, body, headers)
}

// TestForgedDeadLettersAreNeverRedriven is the review's second and third
// findings, tried as the attacker did, on every outside broker: an
// unsigned order published to the orders queue with a delivery count of
// 99 (RabbitMQ's x-delivery-count, which the adapter reads), and unsigned
// orders published straight to the dead stream with reason stock_anomaly
// and max_deliveries, were filed under those kinds, and the routine
// re-drives the docs advise made orders of them. A record with
// attempt=abc stopped the register, and a body of a megabyte was kept whole. Now
// every forged record is unauthenticated (the body's signature is checked
// before anything else), no re-drive persists any of them, the bad record
// is listed as poison and every record after it is listed too, and a body
// is kept cut at 64 KiB.
func TestForgedDeadLettersAreNeverRedriven(t *testing.T) {
	for _, queue := range []string{natsqueue.Name, kafkaqueue.Name, amqpqueue.Name} {
		t.Run(queue, func(t *testing.T) {
			if queue == natsqueue.Name && testenv.BrokerURL(t, testenv.NATSURLEnv) == "" {
				t.Skipf("%s is not set: NATS not tested (CI sets it)", testenv.NATSURLEnv)
			}
			h := startServer(t, "real", func(c *Config) { c.Queue = queue })
			const stock, intruder = 10, 737373
			voucher := h.openVoucher(stock)
			vid := idString(voucher)

			body, headers := forgedOrder(voucher, intruder, nil)
			headers["x-delivery-count"] = "99"
			publishStraightToTheBroker(t, h, voucher, body, headers)
			for _, reason := range []string{"stock_anomaly: forged", "max_deliveries: delivered 100 times"} {
				body, _ := forgedOrder(voucher, intruder+1, nil)
				publishToTheDeadStream(t, h, body, map[string]string{"reason": reason, "attempt": "1", "queue": queue})
			}
			body, _ = forgedOrder(voucher, intruder+2, nil)
			publishToTheDeadStream(t, h, body, map[string]string{"reason": "stock_anomaly: x", "attempt": "abc"})
			publishToTheDeadStream(t, h, []byte(strings.Repeat("x", 512<<10)), map[string]string{"reason": "poison: big", "attempt": "1"})
			// A real letter after them: the register must not stop before it.
			buyRefused(t, h, voucher, 1)

			letters := waitForLetters(t, h, "voucher="+vid, 5) // the big one carries no voucher
			kinds := map[string]int{}
			for _, l := range letters {
				kinds[l.(map[string]any)["reason"].(string)]++
			}
			if kinds["unauthenticated"] != 4 || kinds["stock_anomaly"] != 1 {
				t.Fatalf("the register's letters of the voucher by kind: %v, want 4 unauthenticated (every forgery) and the real stock_anomaly", kinds)
			}
			status, page := h.do("GET", "/api/admin/deadletters?limit=500", h.cfg.AdminToken, nil)
			if status != 200 {
				t.Fatalf("list: %d %v", status, page)
			}
			var big map[string]any
			for _, l := range page["items"].([]any) {
				if m := l.(map[string]any); m["orderId"] == nil && strings.Contains(fmt.Sprint(m["error"]), "524288") {
					big = m
				}
			}
			if big == nil {
				t.Fatalf("the 512 KiB record is not listed as one whose body was cut: %v", page["items"])
			}
			status, one := h.do("GET", "/api/admin/deadletters/"+big["id"].(string), h.cfg.AdminToken, nil)
			if b, _ := one["body"].(string); status != 200 || len(b) > 64<<10 {
				t.Fatalf("the big record's body as kept: %d, %d bytes; want at most 64 KiB", status, len(b))
			}

			setStockColumn(t, h, voucher, stock) // the real letter's cause fixed
			for _, filter := range []map[string]any{{"reason": "stock_anomaly"}, {"reason": "max_deliveries"}, {"reason": "unauthenticated"}, {}} {
				filter["voucher"] = vid
				if status, out := h.do("POST", "/api/admin/deadletters/redrive", h.cfg.AdminToken, filter); status != 200 {
					t.Fatalf("re-drive %v: %d %v", filter, status, out)
				}
			}
			var intruders int
			if err := h.srv.store.DB().NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").
				Where("user_id IN (?, ?, ?)", intruder, intruder+1, intruder+2).Scan(context.Background(), &intruders); err != nil {
				t.Fatal(err)
			}
			if rows, column := h.rows(voucher); intruders != 0 || rows != 1 || column != stock-1 {
				t.Fatalf("after the re-drives: %d rows of the intruders, %d rows, stock column %d; want 0, the real shopper's 1, %d", intruders, rows, column, stock-1)
			}
		})
	}
}
