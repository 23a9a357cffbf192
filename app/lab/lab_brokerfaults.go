package lab

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seckill-lab/seckill/adapters/amqpqueue"
	"github.com/seckill-lab/seckill/adapters/natsqueue"
	"github.com/seckill-lab/seckill/adapters/testenv/faultproxy"
	"github.com/seckill-lab/seckill/app/server"
)

// The outside brokers' faults: a relay killed holding a batch the broker
// has not confirmed, and the broker itself killed and restarted.

// isBroker reports whether the backend is an outside broker, fed through
// the outbox and the relay.
func isBroker(queue string) bool {
	for _, b := range server.Backends() {
		if b.Name == queue {
			return b.Broker != nil
		}
	}
	return false
}

// brokerURL is the URL of the broker cfg's backend talks to, and the
// function that points a configuration at another one.
func brokerURL(cfg server.Config) (*url.URL, func(*server.Config, string), error) {
	var raw string
	var set func(*server.Config, string)
	switch cfg.Queue {
	case "nats":
		raw, set = cfg.Value("SECKILL_NATS_URL"), func(c *server.Config, u string) { *c = c.MustWith("SECKILL_NATS_URL", u) }
		if raw == "" {
			raw = "nats://127.0.0.1:4222"
		}
	case "rabbitmq":
		raw, set = cfg.Value("SECKILL_AMQP_URL"), func(c *server.Config, u string) { *c = c.MustWith("SECKILL_AMQP_URL", u) }
		if raw == "" {
			raw = "amqp://guest:guest@127.0.0.1:5672/"
		}
	default:
		return nil, nil, fmt.Errorf("the lab does not know how to reach %s's broker", cfg.Queue)
	}
	u, err := url.Parse(raw)
	return u, set, err
}

// labKafka is the in-process kfake cluster the lab runs the kafka column
// on when SECKILL_KAFKA_BROKERS names no Kafka (none runs on this machine
// kind): a stand-in that speaks Kafka's protocol, groups and idempotent
// producers, without Kafka's storage or replication. Its figures say so.
var labKafka *kfake.Cluster

// kfakeColumn names the kafka column measured on kfake.
const kfakeColumn = "kafka (kfake stand-in)"

// startLabKafka starts labKafka and points cfg at it.
func startLabKafka(cfg *server.Config) (stop func(), err error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, fmt.Errorf("compare: start kfake for the kafka column: %w", err)
	}
	labKafka, *cfg = c, cfg.MustWith("SECKILL_KAFKA_BROKERS", strings.Join(c.ListenAddrs(), ","))
	progressf("compare: kafka runs on kfake, franz-go's in-process Kafka (a stand-in: no Kafka on this machine; set SECKILL_KAFKA_BROKERS for a real one) at %s", strings.Join(c.ListenAddrs(), ","))
	return func() { c.Close(); labKafka = nil }, nil
}

// holdKafkaProduce delays every produce request kfake gets by d, and
// after stall holds each until restore is called (which also ends the
// delay).
func holdKafkaProduce(c *kfake.Cluster, d time.Duration) (stall, restore func()) {
	var done, held atomic.Bool
	release := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		switch {
		case done.Load():
		case held.Load():
			c.SleepControl(func() { <-release })
		default:
			c.SleepControl(func() { time.Sleep(d) })
		}
		return nil, nil, false // then handled as usual
	})
	var once sync.Once
	return func() { held.Store(true) }, func() {
		once.Do(func() { done.Store(true); close(release) })
	}
}

// relayBrokerDelay slows every chunk the relay sends the broker, so a
// forward is in flight most of the time and the kill lands in one.
const relayBrokerDelay = 20 * time.Millisecond

// killRelay kills (SIGKILL) a process whose relay holds a batch it read
// from the outbox and the broker has not confirmed (the outbox's pending
// count, read just before, is above zero), then starts another: the
// entries are forwarded again (the broker drops the ones it had by order
// id, or the store absorbs them), and none is lost.
func (f faultLab) killRelay() faultResult {
	if !isBroker(f.cfg.Queue) {
		return faultResult{Note: "n/a: no relay (the script writes the queue)"}
	}
	// The broker is slowed, and once shoppers have bought for a moment it
	// stops answering: the relay's batch then stays in its hands, and the
	// kill lands in it whatever the machine's speed.
	slow, stall, resume, undo, note := f.stallableBroker()
	if note != "" {
		return faultResult{Note: note}
	}
	defer undo()
	p1, err := startProcess(slow, nil)
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	voucher, err := createVoucher(p1.base, f.cfg.AdminToken, faultStock)
	if err != nil {
		p1.kill()
		return faultResult{Note: err.Error()}
	}
	*f.vouchers = append(*f.vouchers, voucher)
	// The kill comes while shoppers buy and the relay holds a batch: the
	// answers the dead process never gave are not accepted orders.
	loaded := make(chan loadResult, 1)
	go func() {
		loaded <- runLoad(context.Background(), f.conns, 2*time.Minute, faultBacklog,
			buyRequests(p1.base, f.tokens, []int64{voucher}, 1, faultBacklog))
	}()
	time.Sleep(300 * time.Millisecond)
	stall()
	deadline := time.Now().Add(30 * time.Second)
	for metricValue(p1, "seckill_relay_outbox_pending") <= 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	inFlight := metricValue(p1, "seckill_relay_outbox_pending")
	struck := f.rows(voucher)
	p1.kill()
	killedAt := time.Now()
	resume()
	accepted := (<-loaded).Status[http.StatusOK]
	if inFlight <= 0 {
		return faultResult{Note: "not run: the relay never held a batch to kill it in"}
	}
	p2, err := startProcess(f.cfg, nil)
	if err != nil {
		return faultResult{Note: "restart: " + err.Error()}
	}
	defer p2.stop()
	r := f.recover(p2, voucher, accepted, struck, killedAt)
	// The kill came while shoppers bought: orders reserved as the process
	// died (their answers lost with it) come in after the accepted count
	// is reached, so rows and stock are read again once nothing moves.
	rows := f.settle(voucher, math.MaxInt64, 60*time.Second)
	r.Lost, r.StockOff = accepted-rows, f.stockTaken(voucher, faultStock)-rows
	r.Note = fmt.Sprintf("%.0f outbox entries in the relay's hands at the kill", inFlight)
	if r.Lost < 0 {
		// Requests the process reserved as it died, whose answers died
		// with it: persisted, though nobody was told 200.
		r.Note += fmt.Sprintf("; %d more orders than were answered 200 were persisted: reserved as the process died, their answers lost with it", -r.Lost)
		r.Lost = 0
	}
	return r
}

// stallableBroker is the lab's config with the broker reached through a
// fault of the lab's own: slowed by relayBrokerDelay, and silent between
// stall and resume; undo removes the fault. A note says why there is none.
func (f faultLab) stallableBroker() (slow server.Config, stall, resume, undo func(), note string) {
	slow = f.cfg
	if f.cfg.Queue == "kafka" {
		// Kafka's clients go to the brokers the metadata names, not
		// through a proxy of the seed: the lab controls kfake instead.
		if labKafka == nil {
			return slow, nil, nil, nil, "not run: the lab controls only kfake's produce, and SECKILL_KAFKA_BROKERS names a real Kafka"
		}
		stall, restore := holdKafkaProduce(labKafka, relayBrokerDelay)
		return slow, stall, restore, restore, ""
	}
	u, set, err := brokerURL(f.cfg)
	if err != nil {
		return slow, nil, nil, nil, "not run: " + err.Error()
	}
	proxy, err := faultproxy.Start(u.Host, relayBrokerDelay)
	if err != nil {
		return slow, nil, nil, nil, err.Error()
	}
	through := *u
	through.Host = proxy.Addr()
	set(&slow, through.String())
	return slow, proxy.Silence, proxy.Heal, func() { proxy.Close() }, ""
}

// brokerRestart kills (SIGKILL) a NATS server of the lab's own mid-drain
// and starts it again on the same store: orders it had stored survive
// (the page cache keeps what the process wrote), the relay forwards
// again what it could not, and the consumers go on.
func (f faultLab) brokerRestart() faultResult {
	if !isBroker(f.cfg.Queue) {
		return faultResult{Note: "n/a: no outside broker"}
	}
	if f.cfg.Queue != "nats" {
		return faultResult{Note: map[string]string{
			"rabbitmq": "not run: the lab starts only a NATS server of its own (this machine's RabbitMQ is shared, and a second one would need its own Erlang node)",
			"kafka":    "not run: kfake lives in the lab's process, and a real Kafka is not on this machine",
		}[f.cfg.Queue]}
	}
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		return faultResult{Note: "not run: no nats-server binary on this machine"}
	}
	dir, err := os.MkdirTemp("", "seckill-lab-nats-")
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	defer os.RemoveAll(dir)
	addr, err := freeAddr()
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	host, port, _ := net.SplitHostPort(addr)
	start := func() (*exec.Cmd, error) {
		cmd := exec.Command(bin, "-a", host, "-p", port, "-js", "-sd", dir)
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		for range 100 {
			if nc, err := nats.Connect("nats://"+addr, nats.Timeout(200*time.Millisecond)); err == nil {
				nc.Close()
				return cmd, nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("nats-server on %s did not start", addr)
	}
	ns, err := start()
	if err != nil {
		return faultResult{Note: err.Error()}
	}
	cfg := f.cfg
	cfg = cfg.MustWith("SECKILL_NATS_URL", "nats://"+addr)
	p, err := startProcess(cfg, nil)
	if err != nil {
		ns.Process.Kill()
		ns.Wait()
		return faultResult{Note: err.Error()}
	}
	defer p.stop()
	voucher, accepted, err := f.backlog(p)
	if err != nil {
		ns.Process.Kill()
		ns.Wait()
		return faultResult{Note: err.Error()}
	}
	struck := f.strike(voucher, accepted)
	ns.Process.Kill()
	ns.Wait()
	time.Sleep(2 * time.Second) // down long enough for the relay to fail and retry
	if ns, err = start(); err != nil {
		return faultResult{Note: "restart: " + err.Error()}
	}
	defer func() { ns.Process.Kill(); ns.Wait() }()
	return f.recover(p, voucher, accepted, struck, time.Now())
}

// labPrefixes are the key prefixes the lab's runs used, so their broker
// queues can be deleted afterwards (RabbitMQ cannot list its queues over
// AMQP).
var labPrefixes sync.Map

func usedPrefix(p string) { labPrefixes.Store(p, true) }

// dropLabStreams deletes what the lab's runs made on a real broker — the
// JetStream streams (every key prefix the lab uses starts with "lab"), the
// RabbitMQ queues of the prefixes it used — so the user's broker does not
// keep the lab's orders. The stand-ins' brokers go away with their process.
func dropLabStreams(cfg server.Config) {
	if cfg.EmbeddedRedis() {
		return
	}
	switch cfg.Queue {
	case "rabbitmq":
		labPrefixes.Range(func(k, _ any) bool {
			amqpqueue.Remove(cmp.Or(cfg.Value("SECKILL_AMQP_URL"), amqpqueue.DefaultURL), amqpqueue.QueueName(k.(string)))
			return true
		})
	case "nats":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		natsqueue.RemoveStreams(ctx, cmp.Or(cfg.Value("SECKILL_NATS_URL"), natsqueue.DefaultURL), func(name string) bool {
			return strings.HasPrefix(name, "lab") && (strings.HasSuffix(name, "_orders") || strings.HasSuffix(name, "_orders_dead"))
		})
	}
}

// brokerVersions names the outside brokers the results measured, with
// their versions, and kfake as the stand-in it is.
func brokerVersions(cfg server.Config, results []labResult) string {
	ran := map[string]bool{}
	for _, r := range results {
		ran[r.Backend] = true
	}
	var parts []string
	if ran["nats"] {
		v := "NATS (embedded nats-server, a stand-in)"
		if !cfg.EmbeddedRedis() || !cfg.EmbeddedSQL() {
			v = "NATS server"
			raw := cfg.Value("SECKILL_NATS_URL")
			if raw == "" {
				raw = "nats://127.0.0.1:4222"
			}
			if nc, err := nats.Connect(raw, nats.Timeout(2*time.Second)); err == nil {
				v += " " + nc.ConnectedServerVersion() + " with JetStream, file storage"
				nc.Close()
			}
		}
		parts = append(parts, v)
	}
	if ran["rabbitmq"] {
		v := "RabbitMQ"
		raw := cfg.Value("SECKILL_AMQP_URL")
		if raw == "" {
			raw = "amqp://guest:guest@127.0.0.1:5672/"
		}
		if conn, err := amqp.Dial(raw); err == nil {
			if s, ok := conn.Properties["version"].(string); ok {
				v += " " + s
			}
			conn.Close()
		}
		parts = append(parts, v+" (one node: a quorum queue without fault tolerance)")
	}
	if ran[kfakeColumn] {
		parts = append(parts, "Kafka: **kfake**, franz-go's in-process stand-in (no Kafka runs on this machine): it speaks the protocol, consumer groups and idempotent producers, without Kafka's disk, replication or network, so its figures are not Kafka's")
	} else if ran["kafka"] {
		parts = append(parts, "Kafka at "+cfg.Value("SECKILL_KAFKA_BROKERS"))
	}
	return strings.Join(parts, "; ")
}
