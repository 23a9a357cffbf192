package server

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/core"
)

// Backend is a queue backend the server can run, selected by SECKILL_QUEUE.
// The built-in ones are registered by this package; a program of its own
// registers more before it calls Main (or New), the way database/sql
// drivers register themselves.
type Backend struct {
	// Name is the SECKILL_QUEUE value that selects the backend.
	Name string
	// Iteration says in a line which iteration of the classic design the
	// backend is, for the docs and the help text.
	Iteration string
	// Open opens the queue, creating its structures if missing. How a
	// reservation feeds it follows from what the queue declares
	// (core.Capabilities): a Handoff (the reservation script runs it in its
	// own atomic step) or a Publisher (the order is published after the
	// reservation, which is released if the queue refuses it). Nil only for
	// a backend with a Sale of its own.
	Open func(ctx context.Context, d Deps) (core.Queue, error)
	// Sale, if set, replaces the shared Redis reservation with the
	// backend's own: the sync baseline's database transaction.
	Sale func(d Deps) (core.Reserver, core.StockBoard)
	// Broker, if set, opens an outside broker's queue (one that declares a
	// core.Forwarder), once per process. The reservation cannot write a
	// broker in its atomic step, so the server gives it an outbox the
	// script does write (a Redis stream per shard, read by the relays'
	// consumer group) and relays in every process that runs consumers
	// (relay.New).
	Broker func(ctx context.Context, d Deps) (core.Queue, error)
	// Variables are the backend's own settings, rows of the one variables
	// table (README.md, `seckill serve -h`, the env template): each read at
	// every start, whichever backend runs, with its Parse, and read back by
	// the backend with Config.Setting. A backend of a program of its own
	// declares its variables the same way.
	Variables []Variable
	// Check, if set, refuses a configuration of the backend's that cannot
	// run, once every variable is read. Every backend's is asked, whichever
	// runs, as every backend's variables are read: what matters only when
	// it runs (a broker's address) it checks against c.Queue.
	Check func(c Config) error
	// Variants are other configurations of the backend that the comparison
	// lab measures as columns of their own.
	Variants []Variant
}

// The built-in backends, one per iteration of the classic design, each in
// its file (backend_<name>.go: how it opens, its variables, its check).
// This is the one list of them, in the order of the iterations:
// SECKILL_QUEUE's validation, the lab's columns, the metrics label and the
// docs' tables (held by a test) come from it.
func init() {
	for _, b := range []Backend{syncBackend, memoryBackend, listBackend, pubsubBackend, streamBackend, streamgroupBackend,
		natsBackend, rabbitmqBackend, kafkaBackend} {
		Register(b)
	}
	builtinBackends = Backends()
}

// builtinBackends are the backends this package registers, apart from any
// a program adds.
var builtinBackends []Backend

// Variant is a named configuration of a backend, such as the list's
// reliable mode.
type Variant struct {
	Name      string
	Configure func(*Config)
}

// Deps are what a backend is opened with: the configuration and the
// connections the server shares.
type Deps struct {
	Config Config
	Redis  redis.UniversalClient
	Store  *mysqlstore.Store
	Log    *slog.Logger
	// Shards are the sale's shards, and Shard the one this queue serves: a
	// backend whose queue the reservation feeds is opened once per shard,
	// and each queue reads its own key (QueueKey). A backend that is not
	// fed by the reservation is opened once.
	Shards core.Shards
	Shard  int
	// Forgotten is for a queue to call when its Redis state vanished under
	// an unchanged Redis (a stream or group gone): Redis becomes another
	// incarnation, on every instance, and every voucher is rebuilt before
	// its next use.
	Forgotten func()
	// Tracer is the provider a backend's client instrumentation records
	// with: spans only inside a sampled trace, none when the server traces
	// nothing (a provider that records nothing, never nil).
	Tracer trace.TracerProvider
	// legacy: the key layout before shards (only to check old queues).
	legacy bool
}

// Getenv reads a variable from the environment the configuration was
// loaded from ("" when unset): how a code sender or a payment provider a
// program registers reads its own settings. A backend declares its
// variables instead (Backend.Variables), and reads them with
// Config.Setting.
func (d Deps) Getenv(name string) string {
	if d.Config.lookup == nil {
		return ""
	}
	v, _ := d.Config.lookup(name)
	return v
}

// OrderSigner signs the order messages an outside broker carries, so its
// consumers persist none that this deployment did not produce
// (core.OrderSigner). Its key derives from SECKILL_JWT_SECRET and
// SECKILL_KEY_PREFIX, which every process of a deployment shares: no
// setting of its own.
func (d Deps) OrderSigner() *core.OrderSigner {
	return core.NewOrderSigner(d.Config.JWTSecret, d.Config.KeyPrefix, d.Config.JWTSecretPrevious)
}

// Key is the server's key prefix followed by suffix: every Redis key of a
// deployment starts with SECKILL_KEY_PREFIX.
func (d Deps) Key(suffix string) string { return d.Config.KeyPrefix + suffix }

// QueueKey is the key of this shard's queue named name: the prefix, name,
// then the shard's hash tag, so the reservation of any voucher of the
// shard writes it in the slot of the voucher's own keys. Keys a queue
// derives from it by appending (name + ":dead") stay in that slot.
func (d Deps) QueueKey(name string) string {
	if d.legacy {
		return d.Key(name)
	}
	return redisreserve.Keys{Prefix: d.Config.KeyPrefix, Shards: d.Shards}.ShardKey(name, d.Shard)
}

var backends = registry[Backend]{kind: "backend"}

// Register makes a backend selectable by SECKILL_QUEUE. It panics on an
// empty or taken name, or a backend that can open nothing: those are
// programming errors, found at start.
func Register(b Backend) {
	if b.Name == "" {
		panic("server: Register: a backend needs a name")
	}
	set := 0
	for _, given := range []bool{b.Open != nil, b.Sale != nil, b.Broker != nil} {
		if given {
			set++
		}
	}
	if set != 1 {
		panic(fmt.Sprintf("server: Register %q: set exactly one of Open, Sale and Broker", b.Name))
	}
	backends.add(b)
}

// Backends lists the registered backends, the built-in ones first, in
// the order of the iterations.
func Backends() []Backend { return backends.all() }

// BackendNames are the values SECKILL_QUEUE accepts.
func BackendNames() []string { return backends.names() }

func lookupBackend(name string) (Backend, bool) { return backends.lookup(name) }
