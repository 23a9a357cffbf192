package server

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Config is the whole configuration, read from the environment. Each field
// names its variable; see README.md for the table.
type Config struct {
	Addr      string // SECKILL_ADDR
	RedisURL  string // SECKILL_REDIS_URL; empty: embedded Redis
	MySQLDSN  string // SECKILL_MYSQL_DSN; empty: embedded SQL database
	Queue     string // SECKILL_QUEUE
	JWTSecret []byte // SECKILL_JWT_SECRET
	// JWTSecretPrevious still verifies what it signed (tokens, passes,
	// broker messages) while the secret rotates; empty: none.
	JWTSecretPrevious []byte // SECKILL_JWT_SECRET_PREVIOUS
	AdminToken        string // SECKILL_ADMIN_TOKEN
	Consumers         int    // SECKILL_CONSUMERS; 0: serve the API only
	// Shards is the number of queue shards (core.Shards); 0: the number
	// recorded in Redis, else 1 on one Redis and 12 on a cluster.
	Shards       int           // SECKILL_SHARDS
	BatchSize    int           // SECKILL_BATCH_SIZE
	MaxDeliver   int           // SECKILL_MAX_DELIVERIES
	RedriveLimit int           // SECKILL_REDRIVE_LIMIT
	ClaimMinIdle time.Duration // SECKILL_CLAIM_MIN_IDLE
	// WaitReplicas > 0: a reservation is answered only once WAIT confirms
	// it on this many replicas within WaitTimeout; else 503 unconfirmed.
	WaitReplicas int           // SECKILL_REDIS_WAIT_REPLICAS
	WaitTimeout  time.Duration // SECKILL_REDIS_WAIT_TIMEOUT
	// RequestTimeout is every request's deadline: a Redis or MySQL that
	// does not answer within it gives 503 unavailable with Retry-After, and
	// a reservation that reaches Redis after it reserves nothing.
	RequestTimeout time.Duration // SECKILL_REQUEST_TIMEOUT
	// PayWindow is how long an order may stay unpaid after its
	// reservation; then it is cancelled (expired) and its unit goes back
	// on sale.
	PayWindow time.Duration // SECKILL_PAY_WINDOW
	// RedisPoolSize is the connections per Redis node for requests, the
	// URL's pool_size (0: DefaultRedisPoolSize); the consumers' blocking
	// reads come on top. MySQLMaxConns bounds the database connections.
	RedisPoolSize int // pool_size in SECKILL_REDIS_URL
	MySQLMaxConns int // SECKILL_MYSQL_MAX_CONNS
	// TokenLifetime is how long a shopper's token is valid after login.
	TokenLifetime time.Duration // SECKILL_TOKEN_LIFETIME
	// Expiry is how an unpaid order is found at its deadline: ExpiryDeadlines
	// (each reservation records its deadline in Redis, claimed within about
	// a second of it, with the database's sweep as the safety net) or
	// ExpirySweep (the database's sweep alone: no Redis write per order,
	// but an order Redis queued and MySQL never got holds its unit until a
	// reconcile). Under sync only the sweep exists. Empty is
	// ExpiryDeadlines.
	Expiry string // SECKILL_EXPIRY
	// ConsumerLinger is core.PipelineConfig.Linger; negative: chosen by
	// the shard count (lingerFor).
	ConsumerLinger time.Duration // SECKILL_CONSUMER_LINGER
	// AnswerMemo is how long an instance answers a voucher's sold out (or
	// not started, or ended) from memory before asking Redis again; 0: it
	// always asks. Stock that comes back is nudged to every instance at
	// once; AnswerMemo bounds the wait when a nudge is lost.
	AnswerMemo time.Duration // SECKILL_ANSWER_MEMO
	// DevCodes returns each login code in the response to whoever asks:
	// for the stand-ins, demos and tests. With real servers it takes
	// SECKILL_DEV_CODES=force, which sets DevCodesForced (warned of at
	// start and on the dashboard).
	DevCodes       bool // SECKILL_DEV_CODES
	DevCodesForced bool
	// CodeSender names the registered sender that delivers login codes
	// (RegisterCodeSender); empty: none (only dev codes can log in).
	CodeSender string // SECKILL_CODE_SENDER; default "webhook" when CodeWebhookURL is set
	// CodeWebhookURL and CodeWebhookSecret configure the webhook sender.
	CodeWebhookURL    string // SECKILL_CODE_WEBHOOK_URL
	CodeWebhookSecret string // SECKILL_CODE_WEBHOOK_SECRET
	// PayProvider names the registered payment provider
	// (RegisterPayProvider); empty: payments disabled (orders still
	// expire). PaySecret is the sandbox's signing secret.
	PayProvider string // SECKILL_PAY_PROVIDER; default "sandbox" on the stand-ins
	PaySecret   string // SECKILL_PAY_SECRET; random per start on the stand-ins
	// PayReconcileAfter: a payment the provider has said nothing of this
	// long is asked about by the reconciliation duty.
	PayReconcileAfter time.Duration // SECKILL_PAY_RECONCILE_AFTER
	// PaySandboxDropNotices and PaySandboxDelayNotices are the shares of
	// the sandbox's notices lost and sent past the order's deadline (for
	// tests).
	PaySandboxDropNotices  float64 // SECKILL_PAYSANDBOX_DROP_NOTICES
	PaySandboxDelayNotices float64 // SECKILL_PAYSANDBOX_DELAY_NOTICES
	// PaySandboxOnRealServers: the sandbox was chosen with real servers,
	// where it gives orders away (warned of at start and on the dashboard).
	PaySandboxOnRealServers bool
	// PhoneRegion reads numbers written without a country code.
	PhoneRegion string // SECKILL_PHONE_REGION
	// PhoneRegions are the regions whose mobile numbers get login codes;
	// default: PhoneRegion alone.
	PhoneRegions []string // SECKILL_PHONE_REGIONS
	// CodesPerPhone: login codes issued to one phone in any 15 minutes,
	// whatever the addresses asking.
	CodesPerPhone int // SECKILL_CODES_PER_PHONE
	// LoginRate: login attempts per client address per minute (0: no
	// limit); each code's own guess limit comes on top.
	LoginRate int // SECKILL_LOGIN_RATE
	// TrustedProxies are the load balancers whose proxy header names the
	// client; empty: the peer is the client.
	TrustedProxies []netip.Prefix // SECKILL_TRUSTED_PROXIES
	ProxyHeader    string         // SECKILL_PROXY_HEADER
	// MaxConnsPerIP caps the connections one client address holds open
	// (its requests in flight, behind a trusted proxy); 0: no cap.
	MaxConnsPerIP int // SECKILL_MAX_CONNS_PER_IP
	// DemoSale opens two vouchers at start, one on sale and one opening in
	// two minutes, so the storefront shows a sale at once (embedded mode).
	DemoSale bool // SECKILL_DEMO_SALE
	UserLock bool // SECKILL_USER_LOCK
	// AllowEviction starts on a Redis whose maxmemory-policy may evict
	// keys (refused otherwise: an eviction deletes sale state unnoticed).
	AllowEviction bool // SECKILL_REDIS_ALLOW_EVICTION
	// SeckillRate: seckill requests per shopper per second (0: no limit).
	SeckillRate int // SECKILL_SECKILL_RATE
	// RoomPowBits: the waiting rooms' proof of work on joining, in
	// leading zero bits (0: off).
	RoomPowBits int // SECKILL_ROOM_POW_BITS
	// CodeRate: login-code requests per client IP per minute (0: no limit).
	CodeRate int // SECKILL_CODE_RATE
	// MissRate: answers voucher_not_found per client address per minute;
	// past it they are 429 (0: no limit).
	MissRate     int    // SECKILL_MISS_RATE
	KeyPrefix    string // SECKILL_KEY_PREFIX
	ConsumerName string // SECKILL_CONSUMER_NAME
	LogFormat    string // SECKILL_LOG_FORMAT: text or json
	// RedisCoalesce sends the reservations of concurrent requests through
	// go-redis's AutoPipeline (an API go-redis marks experimental); 0 turns
	// it off, one round trip per reservation.
	RedisCoalesce bool // SECKILL_REDIS_COALESCE
	// RedisBatch > 1: the reservations of one shard that arrive while its
	// previous call is in flight go together in one script call, at most
	// this many (redisreserve.Config.Batch); it replaces the coalescing.
	// 0 or 1: a script call per reservation (coalesced or not, by
	// RedisCoalesce).
	RedisBatch int // SECKILL_REDIS_BATCH
	// OrderBody is the format of the orders the reservation writes to the
	// Redis queues: compact (version 2), or json (version 1) while
	// instances of an older version still consume (core.OrderBody).
	OrderBody core.OrderBody // SECKILL_ORDER_BODY
	// PprofAddr, if set, serves net/http/pprof there, apart from the API:
	// a loopback address unless PprofPublic (profiles show internals and
	// cost CPU on demand).
	PprofAddr   string // SECKILL_PPROF_ADDR
	PprofPublic bool   // SECKILL_PPROF_PUBLIC
	// MetricsAddr, if set, serves /metrics there (no token) instead of on
	// the API's listener: an internal address for a public deployment.
	MetricsAddr string // SECKILL_METRICS_ADDR
	// OutboxCap: with an outside broker, the orders the outbox may hold
	// before shoppers are answered busy (0: no cap).
	OutboxCap int64 // SECKILL_OUTBOX_CAP
	// lookup is the environment the configuration was read from: a code
	// sender or payment provider a program registers reads its own
	// settings through it (Deps.Getenv).
	lookup func(string) (string, bool)
	// given holds each variable that was set, as written (trimmed);
	// settings what each backend variable's Parse made of its value.
	given    map[string]string
	settings map[string]any
	// GeneratedAdminToken is set when the admin token was made up at start
	// (embedded mode only): the log then shows it, since nobody else knows it.
	GeneratedAdminToken bool
}

// EmbeddedRedis and EmbeddedSQL tell whether a stand-in replaces a server.
func (c Config) EmbeddedRedis() bool { return c.RedisURL == "" }

func (c Config) EmbeddedSQL() bool { return c.MySQLDSN == "" }

// configError names the variable whose value is bad.
type configError struct{ name, value, why string }

func (e *configError) Error() string {
	if e.value == "" {
		return fmt.Sprintf("config: %s: %s", e.name, e.why)
	}
	return fmt.Sprintf("config: %s=%q: %s", e.name, e.value, e.why)
}

// LoadConfig reads the environment through lookup (os.LookupEnv in main):
// every variable of the table, the server's own and each backend's, then
// what depends on several of them. The first bad value stops it with an
// error naming the variable.
func LoadConfig(lookup func(string) (string, bool)) (Config, error) {
	c := Config{lookup: lookup, given: map[string]string{}, settings: map[string]any{}}
	for _, v := range Variables() {
		raw, set := lookup(v.Name)
		value := strings.TrimSpace(raw)
		if set {
			c.given[v.Name] = value
		}
		if err := c.read(v, value); err != nil {
			return c, err
		}
	}
	return c, c.finish()
}

// read reads one variable's value ("" when unset) into c.
func (c *Config) read(v Variable, value string) error {
	var err error
	switch {
	case v.field.load != nil:
		err = v.field.load(c, value)
	case v.Parse != nil:
		var parsed any
		if parsed, err = v.Parse(value); err == nil {
			c.settings[v.Name] = parsed
		}
	default:
		c.settings[v.Name] = value
	}
	if err == nil {
		return nil
	}
	if ce := (*configError)(nil); errors.As(err, &ce) {
		if ce.name == "" {
			ce.name = v.Name
		}
		return ce
	}
	return &configError{v.Name, value, err.Error()}
}

// Setting is what a backend variable's Parse made of its value (nil for a
// name no backend declares).
func (c Config) Setting(name string) any { return c.settings[name] }

// Value is a variable's value as the environment that makes another
// process serve c carries it (Environment); "" when unset.
func (c Config) Value(name string) string {
	v, ok := variable(name)
	if !ok {
		return ""
	}
	return c.valueOf(v)
}

// valueOf is v's value as the environment carries it.
func (c Config) valueOf(v Variable) string {
	if v.field.env != nil {
		return v.field.env(c)
	}
	return c.given[v.Name]
}

// ForQueue is c serving queue instead, with what derives from the queue
// derived again (SECKILL_EXPIRY, where it was not given): how the lab runs
// one configuration on every backend (a derived deadlines expiry carried
// to sync stopped its server at start).
func (c Config) ForQueue(queue string) Config {
	c.Queue = queue
	if c.given["SECKILL_EXPIRY"] == "" {
		c.Expiry = defaultExpiry(queue)
	}
	return c
}

// defaultExpiry is SECKILL_EXPIRY's default for queue: sync has only the
// sweep.
func defaultExpiry(queue string) string {
	if queue == "sync" {
		return ExpirySweep
	}
	return ExpiryDeadlines
}

// With is c with one variable set as LoadConfig reads it (what other
// variables derive from it at start is not derived again): a test's or a
// lab's change of one setting, a backend's or the server's own.
func (c Config) With(name, value string) (Config, error) {
	v, ok := variable(name)
	if !ok {
		return c, &configError{name, value, "not a variable the server reads"}
	}
	c.given, c.settings = maps.Clone(c.given), maps.Clone(c.settings)
	if c.given == nil {
		c.given, c.settings = map[string]string{}, map[string]any{}
	}
	c.given[name] = strings.TrimSpace(value)
	return c, c.read(v, strings.TrimSpace(value))
}

// MustWith is With for a value known good (a test's, a variant's): it
// panics on a bad one.
func (c Config) MustWith(name, value string) Config {
	c, err := c.With(name, value)
	if err != nil {
		panic(err)
	}
	return c
}

// Environment is the environment that makes another process serve c:
// every variable of the table, as c holds it (a variable the process
// running it derived, such as a secret the stand-ins made up, written as
// it came out). The lab starts its server processes with it.
func (c Config) Environment() map[string]string {
	env := map[string]string{}
	for _, v := range Variables() {
		env[v.Name] = c.valueOf(v)
	}
	return env
}

// DefaultCodesPerPhone is SECKILL_CODES_PER_PHONE's default: with five
// tries a code, 25 judged guesses a phone in 15 minutes, whoever asks.
const DefaultCodesPerPhone = 5

// DefaultMaxConnsPerIP is SECKILL_MAX_CONNS_PER_IP's default: a browser
// opens about six connections, so dozens of shoppers behind one address
// (an office, a carrier's NAT) fit, and one client cannot hold thousands.
const DefaultMaxConnsPerIP = 256

// DefaultRequestTimeout is the contract's default deadline of a request.
const DefaultRequestTimeout = 2 * time.Second

// DefaultPayReconcileAfter is SECKILL_PAY_RECONCILE_AFTER's default, the
// contract's.
const DefaultPayReconcileAfter = 30 * time.Second

// DefaultPayWindow is SECKILL_PAY_WINDOW's default: the contract's 15
// minutes, the classic shops' (mall's and gomall's order timeouts).
const DefaultPayWindow = 15 * time.Minute

// DefaultRedisBatch is SECKILL_REDIS_BATCH's default: BenchmarkReserve's
// Redis CPU per order falls from a call each to batches of 16 and 32, and
// no further at 64 (docs/performance.md); and with one call in flight per
// shard, a shard's reservations are bounded by this many per round trip,
// so smaller batches cost throughput where Redis is far.
const DefaultRedisBatch = 32

// Defaults of the pools and the token lifetime.
const (
	DefaultRedisPoolSize = 64
	DefaultMySQLMaxConns = 32
	DefaultTokenLifetime = 24 * time.Hour
)

// The values of SECKILL_EXPIRY.
const (
	ExpiryDeadlines = "deadlines"
	ExpirySweep     = "sweep"
)

// DefaultAnswerMemo keeps stock that comes back on sale again within 250 ms
// on every instance even when the nudge that announces it is lost.
const DefaultAnswerMemo = 200 * time.Millisecond

// DefaultOutboxCap is SECKILL_OUTBOX_CAP's default: about 20 MB of
// Redis at the outbox's entry size, minutes of a busy sale's orders.
const DefaultOutboxCap = 100_000
