package lab

import (
	"crypto/rand"
	"os"
	"testing"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/app/server"
)

// TestOutsideBrokersLoseNothingWhenKilled runs, on every outside broker
// and the real servers, the lab's kills as separate processes: a process
// SIGKILLed while its consumer holds a batch, and one SIGKILLed while its
// relay holds outbox entries the broker has not confirmed, each restarted.
// Every order answered 200 must be in MySQL once, its stock taken once.
func TestOutsideBrokersLoseNothingWhenKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("the lab runs sales")
	}
	r, ok := testenv.RealRedis(t)
	if !ok {
		t.Skipf("%s is not set: the kills need real servers (CI sets it)", testenv.RedisURLEnv)
	}
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set", testenv.MySQLDSNEnv)
	}
	t.Setenv(childEnv, "server") // the processes the lab starts serve
	base, err := server.LoadConfig(func(k string) (string, bool) {
		v, ok := map[string]string{
			"SECKILL_REDIS_URL": os.Getenv(testenv.RedisURLEnv), "SECKILL_MYSQL_DSN": dsn,
			"SECKILL_KEY_PREFIX": r.Prefix, "SECKILL_JWT_SECRET": testenv.Secret(),
			"SECKILL_ADMIN_TOKEN": testenv.Secret(), "SECKILL_NATS_URL": os.Getenv(testenv.NATSURLEnv),
			"SECKILL_AMQP_URL": os.Getenv(testenv.AMQPURLEnv), "SECKILL_KAFKA_BROKERS": os.Getenv(testenv.KafkaBrokersEnv),
		}[k]
		return v, ok && v != ""
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range server.Backends() {
		if b.Broker == nil {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			if b.Name == "rabbitmq" && testenv.BrokerURL(t, testenv.AMQPURLEnv) == "" {
				t.Skipf("%s is not set: RabbitMQ not tested (CI sets it)", testenv.AMQPURLEnv)
			}
			cfg := base
			cfg.Queue = b.Name
			if b.Name == "kafka" && cfg.Value("SECKILL_KAFKA_BROKERS") == "" {
				stop, err := startLabKafka(&cfg) // the stand-in: no Kafka runs here
				if err != nil {
					t.Fatal(err)
				}
				defer stop()
			}
			f, closeLab, err := newFaultLab(cfg, 16, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			defer closeLab()
			defer dropLabStreams(cfg)
			for name, fault := range map[string]func(faultLab) faultResult{
				"consumer SIGKILLed mid-batch": faultLab.killConsumer,
				"relay SIGKILLed mid-batch":    faultLab.killRelay,
			} {
				f.cfg.KeyPrefix = "lab" + rand.Text()[:4] + ":"
				res := fault(f)
				dropKeys(f.cfg.RedisURL, f.cfg.KeyPrefix)
				if !res.Ran {
					t.Errorf("%s: did not run: %s", name, res.Note)
					continue
				}
				t.Logf("%s: %d accepted, struck at %d persisted; lost %d, redelivered %d, stock off by %d; %s",
					name, res.Accepted, res.StruckAt, res.Lost, res.Redelivered, res.StockOff, res.Note)
				if res.Accepted == 0 || res.Lost != 0 || res.StockOff != 0 {
					t.Errorf("%s: %d accepted, %d lost, stock off by %d: want every accepted order in MySQL once",
						name, res.Accepted, res.Lost, res.StockOff)
				}
			}
		})
	}
}
