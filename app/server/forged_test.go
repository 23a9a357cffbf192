package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seckill-lab/seckill/adapters/amqpqueue"
	"github.com/seckill-lab/seckill/adapters/kafkaqueue"
	"github.com/seckill-lab/seckill/adapters/natsqueue"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// forgedOrder is an order message as this deployment's relay writes it,
// for a shopper who never logged in: unsigned, or signed with another
// deployment's secret.
func forgedOrder(voucherID, userID int64, signer *core.OrderSigner) ([]byte, map[string]string) {
	o := core.Order{ID: time.Now().UnixNano(), UserID: userID, VoucherID: voucherID, CreatedAt: time.Now()}
	body := core.EncodeOrder(o)
	headers := map[string]string{"Seckill-Event-Version": "1", "Seckill-Event": "order.reserved",
		"Seckill-Order-Id": fmt.Sprint(o.ID), "Seckill-Voucher-Id": fmt.Sprint(voucherID)}
	if signer != nil {
		headers["Seckill-Signature"] = signer.Sign(body)
	}
	return body, headers
}

// publishStraightToTheBroker is what the outside review did: reach the
// broker and publish there, past the reservation.
func publishStraightToTheBroker(t *testing.T, h *harness, voucherID int64, body []byte, headers map[string]string) {
	t.Helper()
	publishRaw(t, h, brokerPlace{natsSubject: natsqueue.StreamName(h.cfg.KeyPrefix) + "." + fmt.Sprint(voucherID),
		kafkaTopic: kafkaqueue.TopicName(h.cfg.KeyPrefix), kafkaKey: []byte(fmt.Sprint(voucherID)),
		amqpQueue: amqpqueue.QueueName(h.cfg.KeyPrefix)}, body, headers)
}

// brokerPlace is where publishRaw writes, on each outside broker.
type brokerPlace struct {
	natsSubject, kafkaTopic, amqpQueue string
	kafkaKey                           []byte
}

// publishRaw publishes body with headers to the server's broker at
// place, as anyone who reaches the broker can.
func publishRaw(t *testing.T, h *harness, place brokerPlace, body []byte, headers map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch h.cfg.Queue {
	case natsqueue.Name:
		nc, err := nats.Connect(h.cfg.Value(string(natsURL)))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		m := nats.NewMsg(place.natsSubject)
		m.Data = body
		for k, v := range headers {
			m.Header.Set(k, v)
		}
		if _, err := nc.RequestMsgWithContext(ctx, m); err != nil {
			t.Fatalf("publish to NATS: %v", err)
		}
	case kafkaqueue.Name:
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaBrokers.of(h.cfg)...), kgo.ProducerBatchMaxBytes(4<<20))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		r := &kgo.Record{Topic: place.kafkaTopic, Key: place.kafkaKey, Value: body}
		for k, v := range headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to Kafka: %v", err)
		}
	case amqpqueue.Name:
		conn, err := amqp.Dial(h.cfg.Value(string(amqpURL)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		table := amqp.Table{}
		for k, v := range headers {
			table[k] = v
		}
		if err := ch.PublishWithContext(ctx, "", place.amqpQueue, true, false,
			amqp.Publishing{Headers: table, ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body}); err != nil {
			t.Fatalf("publish to RabbitMQ: %v", err)
		}
	}
}

// TestOrdersPublishedStraightToTheBrokerAreNeverPersisted: the outside
// review published an order message to the NATS subject and it became a
// persisted order for a user who never logged in, MySQL's stock falling
// while Redis's did not. On every outside broker, an unsigned order and
// one signed with another deployment's secret are dead-lettered
// unauthenticated; MySQL has no row of them and its stock stays; the
// deployment's own orders are persisted beside them.
func TestOrdersPublishedStraightToTheBrokerAreNeverPersisted(t *testing.T) {
	for _, queue := range []string{natsqueue.Name, kafkaqueue.Name, amqpqueue.Name} {
		t.Run(queue, func(t *testing.T) {
			if queue == natsqueue.Name && testenv.BrokerURL(t, testenv.NATSURLEnv) == "" {
				t.Skipf("%s is not set: NATS not tested (CI sets it)", testenv.NATSURLEnv)
			}
			h := startServer(t, "real", func(c *Config) { c.Queue = queue })
			voucher := h.openVoucher(10)
			const intruder = 424242
			other := core.NewOrderSigner([]byte("another-deployments-secret-0123"), h.cfg.KeyPrefix)
			for _, signer := range []*core.OrderSigner{nil, other} {
				body, headers := forgedOrder(voucher, intruder, signer)
				publishStraightToTheBroker(t, h, voucher, body, headers)
			}
			if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(7), nil); status != 200 {
				t.Fatalf("a shopper's own seckill: %d %v", status, body)
			}
			dead := h.srv.metrics.deadLetters.WithLabelValues(string(core.DeadLetterUnauthenticated))
			deadline := time.Now().Add(20 * time.Second)
			for testutil.ToFloat64(dead) < 2 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if n := testutil.ToFloat64(dead); n != 2 {
				t.Fatalf("seckill_dead_letters_total{reason=unauthenticated} = %v, want the 2 forged orders", n)
			}
			if n := h.waitForRows(voucher, 1, 10*time.Second); n != 1 {
				t.Fatalf("%d rows for the voucher, want the shopper's one", n)
			}
			time.Sleep(300 * time.Millisecond) // anything still on its way
			var intruders int
			if err := h.srv.store.DB().NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").Where("user_id = ?", intruder).Scan(context.Background(), &intruders); err != nil {
				t.Fatal(err)
			}
			if rows, stock := h.rows(voucher); intruders != 0 || rows != 1 || stock != 9 {
				t.Fatalf("after two forged orders and one real one: %d rows of the intruder, %d rows, database stock %d; want 0, 1, 9", intruders, rows, stock)
			}
		})
	}
}
