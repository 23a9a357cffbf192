package server

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/seckill-lab/seckill/adapters/amqpqueue"
	"github.com/seckill-lab/seckill/adapters/kafkaqueue"
	"github.com/seckill-lab/seckill/adapters/natsqueue"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/adapters/testenv/faultproxy"
	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
)

// useTestBrokers points an outside broker's backend at the test's broker:
// RabbitMQ has no stand-in to embed, so without SECKILL_TEST_AMQP_URL its
// runs are skipped (outside CI; under CI they fail).
func useTestBrokers(t testing.TB, cfg *Config) {
	t.Helper()
	if cfg.Queue == kafkaqueue.Name {
		if cfg.Value(string(kafkaBrokers)) == "" { // a test's own cluster stays
			*cfg = cfg.MustWith(string(kafkaBrokers), strings.Join(testKafka(t), ","))
		}
		return
	}
	if cfg.Queue != amqpqueue.Name {
		return
	}
	url := testenv.BrokerURL(t, testenv.AMQPURLEnv)
	if url == "" {
		t.Skipf("%s is not set: RabbitMQ not tested (CI sets it)", testenv.AMQPURLEnv)
	}
	*cfg = cfg.MustWith(string(amqpURL), url)
}

// TestRedisRestartedEmptyWaitsForRabbitMQToDrain: RabbitMQ cannot list
// the orders it holds, so after Redis came back empty with 5 orders in the
// queue and none in MySQL (a row lock holds the consumers), a rebuild from
// MySQL alone would sell their 5 units again. The voucher stays closed —
// a shopper is answered 503, an operator's reconcile 409 not_reconcilable
// — until the queue holds nothing; then it sells the other 15, and no
// order answered 200 is refused by MySQL.
func TestRedisRestartedEmptyWaitsForRabbitMQToDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("Redis restarts skipped in -short mode")
	}
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set", testenv.MySQLDSNEnv)
	}
	proc := redistopology.StartRedisProcess(t)
	cfg := testConfig()
	cfg.RedisURL, cfg.MySQLDSN, cfg.Queue = proc.URL(), dsn, amqpqueue.Name
	useTestBrokers(t, &cfg)
	h := startWith(t, cfg)
	const stock, accepted = 20, 5
	voucher := h.openVoucher(stock)
	lock := h.buyWithStockRowLocked(t, voucher, accepted)
	defer lock.Rollback()
	waitFor(t, 10*time.Second, "the relay to forward every order", func() bool {
		return strings.Contains(h.metricsText(), `seckill_relay_forwarded_total{queue="rabbitmq"} 5`)
	})
	proc.RestartEmpty()
	waitReady(t, h)
	if status, body := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); status != 503 {
		t.Fatalf("voucher right after the loss, its 5 orders in RabbitMQ: %d %v, want 503 until they are persisted", status, body)
	}
	status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/reconcile", h.cfg.AdminToken, nil)
	if status != 409 || errorCode(body) != "not_reconcilable" {
		t.Fatalf("reconcile with the orders in RabbitMQ: %d %v, want 409 not_reconcilable", status, body)
	}
	lock.Rollback()
	if n := h.waitForRows(voucher, accepted, 20*time.Second); n != accepted {
		t.Fatalf("%d of %d orders persisted", n, accepted)
	}
	waitFor(t, 20*time.Second, "the voucher to open again once the queue drained", func() bool {
		status, _ := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil)
		return status == 200
	})
	saleAfterLoss(t, h, voucher, stock, accepted)
}

// removeBrokerState deletes what a test's server made on a real broker
// (its streams or queues, named from the test's key prefix), so the
// machine's broker does not fill up with tests' orders.
func removeBrokerState(t testing.TB, cfg Config) {
	var err error
	switch {
	case cfg.Queue == amqpqueue.Name:
		url := cmp.Or(cfg.Value(string(amqpURL)), amqpqueue.DefaultURL)
		err = amqpqueue.Remove(url, amqpqueue.QueueName(cfg.KeyPrefix))
	case cfg.Queue == natsqueue.Name && !(cfg.EmbeddedRedis() && cfg.EmbeddedSQL()):
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		streams := natsqueue.Streams(cfg.KeyPrefix)
		err = natsqueue.RemoveStreams(ctx, cmp.Or(cfg.Value(string(natsURL)), natsqueue.DefaultURL), func(name string) bool {
			return slices.Contains(streams, name)
		})
	}
	if err != nil {
		t.Logf("remove the test's broker state: %v", err)
	}
}

// testKafka is SECKILL_TEST_KAFKA_BROKERS, or an in-process kfake cluster
// of the test's own: this machine kind runs no Kafka, so kfake is the
// stand-in in CI too.
func testKafka(t testing.TB) []string {
	if v := os.Getenv(testenv.KafkaBrokersEnv); v != "" {
		return strings.Split(v, ",")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// TestABrokerThatIsDownFillsTheOutboxOnlyToItsCap: with the broker
// unreachable the relay cannot forward, the outbox fills to
// SECKILL_OUTBOX_CAP, and then shoppers get 503 busy with Retry-After
// (nothing reserved) while /readyz says why; once the broker is back the
// outbox drains, sales resume, and every order answered 200 is in the
// database once.
func TestABrokerThatIsDownFillsTheOutboxOnlyToItsCap(t *testing.T) {
	url, stop, err := natsqueue.StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	proxy, err := faultproxy.Start(strings.TrimPrefix(url, "nats://"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	h := startServer(t, "embedded", func(c *Config) {
		c.Queue, c.OutboxCap = "nats", 5
		*c = c.MustWith(string(natsURL), "nats://"+proxy.Addr())
	})
	voucher := h.openVoucher(100)
	buy := func(u int64) (int, map[string]any, http.Header) {
		return h.request("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil, nil)
	}
	proxy.SetDown(true)
	accepted := 0
	var user int64
	deadline := time.Now().Add(10 * time.Second)
	var status int
	var header http.Header
	var body map[string]any
	for time.Now().Before(deadline) {
		user++
		status, body, header = buy(user)
		if status == 200 {
			accepted++
			time.Sleep(20 * time.Millisecond) // the cap is read twice a second
			continue
		}
		if status == 503 {
			break
		}
		t.Fatalf("buy %d: %d %v", user, status, body)
	}
	e, _ := body["error"].(map[string]any)
	if status != 503 || e["code"] != "busy" || header.Get("Retry-After") == "" || !strings.Contains(e["message"].(string), "outbox") {
		t.Fatalf("with the broker down: %d %v (Retry-After %q), want 503 busy naming the outbox", status, body, header.Get("Retry-After"))
	}
	if accepted < 5 || accepted > 40 {
		t.Fatalf("%d accepted before the cap of 5 answered busy", accepted)
	}
	if status, body := h.do("GET", "/readyz", "", nil); status != 503 || !strings.Contains(fmt.Sprint(body), "outbox") {
		t.Fatalf("readyz with the outbox full: %d %v, want 503 saying why", status, body)
	}
	proxy.SetDown(false)
	h.waitForRows(voucher, accepted, 30*time.Second)
	deadline = time.Now().Add(10 * time.Second)
	for {
		user++
		if status, _, _ := buy(user); status == 200 {
			accepted++
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sales did not resume once the broker was back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rows := h.waitForRows(voucher, accepted, 30*time.Second); rows != accepted {
		t.Fatalf("%d rows for %d orders answered 200", rows, accepted)
	}
	if status, _ := h.do("GET", "/readyz", "", nil); status != 200 {
		t.Fatalf("readyz after the broker came back: %d", status)
	}
}

// TestRedisRestartedEmptyCountsWhatTheRelayForwarded: orders the relay
// forwarded sit in the broker, held by consumers that wait on a locked
// stock row, when Redis restarts empty. The rebuild reads them from the
// broker (JetStream above the ack floor, Kafka from the committed
// offsets): the voucher's stock right after the loss already counts them,
// their buyers are refused a second order, and no unit is sold twice.
func TestRedisRestartedEmptyCountsWhatTheRelayForwarded(t *testing.T) {
	for _, queue := range []string{natsqueue.Name, kafkaqueue.Name} {
		t.Run(queue, func(t *testing.T) {
			if testing.Short() {
				t.Skip("Redis restarts skipped in -short mode")
			}
			dsn, ok := testenv.MySQLDatabase(t)
			if !ok {
				t.Skipf("%s is not set", testenv.MySQLDSNEnv)
			}
			proc := redistopology.StartRedisProcess(t)
			cfg := testConfig()
			cfg.RedisURL, cfg.MySQLDSN, cfg.Queue = proc.URL(), dsn, queue
			cfg = cfg.MustWith(string(natsURL), os.Getenv(testenv.NATSURLEnv))
			if queue == natsqueue.Name && cfg.Value(string(natsURL)) == "" {
				url, stop, err := natsqueue.StartEmbedded()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(stop)
				cfg = cfg.MustWith(string(natsURL), url)
			}
			useTestBrokers(t, &cfg)
			h := startWith(t, cfg)
			const stock, accepted = 20, 5
			voucher := h.openVoucher(stock)
			lock := h.buyWithStockRowLocked(t, voucher, accepted)
			defer lock.Rollback()
			waitFor(t, 10*time.Second, "the relay to forward every order", func() bool {
				return strings.Contains(h.metricsText(), `seckill_relay_forwarded_total{queue="`+queue+`"} 5`)
			})
			proc.RestartEmpty()
			waitReady(t, h)
			if status, body := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); status != 200 || body["stock"] != float64(stock-accepted) {
				t.Fatalf("voucher right after the loss: %d %v, want stock %d: the %d orders in the broker counted", status, body, stock-accepted, accepted)
			}
			lock.Rollback()
			if n := h.waitForRows(voucher, accepted, 20*time.Second); n != accepted {
				t.Fatalf("%d of %d orders persisted", n, accepted)
			}
			saleAfterLoss(t, h, voucher, stock, accepted)
		})
	}
}
