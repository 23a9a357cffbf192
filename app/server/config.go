package server

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/gofiber/fiber/v2"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/seckill-lab/seckill/core"
)

// Config is the whole configuration, read from the environment. Each field
// names its variable; see README.md for the table.
type Config struct {
	Addr       string // SECKILL_ADDR
	RedisURL   string // SECKILL_REDIS_URL; empty: embedded Redis
	MySQLDSN   string // SECKILL_MYSQL_DSN; empty: embedded SQL database
	Queue      string // SECKILL_QUEUE
	JWTSecret  []byte // SECKILL_JWT_SECRET
	AdminToken string // SECKILL_ADMIN_TOKEN
	Consumers  int    // SECKILL_CONSUMERS; 0: serve the API only
	// Shards is the number of queue shards (core.Shards); 0: the number
	// recorded in Redis, else 1 on one Redis and 12 on a cluster.
	Shards       int           // SECKILL_SHARDS
	BatchSize    int           // SECKILL_BATCH_SIZE
	MaxDeliver   int           // SECKILL_MAX_DELIVERIES
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
	// DemoSale opens two vouchers at start, one on sale and one opening in
	// two minutes, so the storefront shows a sale at once (embedded mode).
	DemoSale bool // SECKILL_DEMO_SALE
	UserLock bool // SECKILL_USER_LOCK
	// AllowEviction starts on a Redis whose maxmemory-policy may evict
	// keys (refused otherwise: an eviction deletes sale state unnoticed).
	AllowEviction bool // SECKILL_REDIS_ALLOW_EVICTION
	// MemoryCapacity bounds the memory backend's channel.
	MemoryCapacity int // SECKILL_MEMORY_CAPACITY
	// ListReliable turns on the list backend's processing lists.
	ListReliable bool // SECKILL_LIST_RELIABLE
	// SeckillRate: seckill requests per shopper per second (0: no limit).
	SeckillRate int // SECKILL_SECKILL_RATE
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
	// NATSURL is the nats backend's server; empty: nats://127.0.0.1:4222
	// with real servers, an embedded one on the stand-ins.
	NATSURL string // SECKILL_NATS_URL
	// AMQPURL is the rabbitmq backend's broker; empty: the local default
	// with real servers, refused on the stand-ins (nothing to embed).
	AMQPURL string // SECKILL_AMQP_URL
	// OutboxCap: with an outside broker, the orders the outbox may hold
	// before shoppers are answered busy (0: no cap).
	OutboxCap int64 // SECKILL_OUTBOX_CAP
	// KafkaBrokers are the kafka backend's seed brokers (host:port);
	// required for it, with real servers and on the stand-ins.
	KafkaBrokers []string // SECKILL_KAFKA_BROKERS
	// KafkaTLS, if set, is the TLS of every Kafka connection
	// (SECKILL_KAFKA_TLS, SECKILL_KAFKA_TLS_CA); KafkaSASL its
	// authentication (SECKILL_KAFKA_SASL, _USER, _PASSWORD). Nil: none.
	KafkaTLS  *tls.Config
	KafkaSASL sasl.Mechanism
	// NATSCredentials is a NATS credentials file to connect with.
	NATSCredentials string // SECKILL_NATS_CREDS
	// lookup is the environment the configuration was read from; a
	// backend reads its own variables through it (Deps.Getenv).
	lookup func(string) (string, bool)
	// GeneratedAdminToken is set when the admin token was made up at start
	// (embedded mode only): the log then shows it, since nobody else knows it.
	GeneratedAdminToken bool
}

// EmbeddedRedis and EmbeddedSQL tell whether a stand-in replaces a server.
func (c Config) EmbeddedRedis() bool { return c.RedisURL == "" }
func (c Config) EmbeddedSQL() bool   { return c.MySQLDSN == "" }

// configError names the variable whose value is bad.
type configError struct{ name, value, why string }

func (e *configError) Error() string {
	if e.value == "" {
		return fmt.Sprintf("config: %s: %s", e.name, e.why)
	}
	return fmt.Sprintf("config: %s=%q: %s", e.name, e.value, e.why)
}

// LoadConfig reads the environment through lookup (os.LookupEnv in main).
// The first bad value stops it with an error naming the variable.
func LoadConfig(lookup func(string) (string, bool)) (Config, error) {
	get := func(name, def string) string {
		if v, ok := lookup(name); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
		return def
	}
	c := Config{
		Addr:         get("SECKILL_ADDR", ":8080"),
		RedisURL:     get("SECKILL_REDIS_URL", ""),
		MySQLDSN:     get("SECKILL_MYSQL_DSN", ""),
		Queue:        get("SECKILL_QUEUE", "streamgroup"),
		JWTSecret:    []byte(get("SECKILL_JWT_SECRET", "")),
		AdminToken:   get("SECKILL_ADMIN_TOKEN", ""),
		KeyPrefix:    get("SECKILL_KEY_PREFIX", "seckill:"),
		ConsumerName: get("SECKILL_CONSUMER_NAME", ""),
		LogFormat:    get("SECKILL_LOG_FORMAT", "text"),
		PprofAddr:    get("SECKILL_PPROF_ADDR", ""),
		MetricsAddr:  get("SECKILL_METRICS_ADDR", ""),
		PhoneRegion:  strings.ToUpper(get("SECKILL_PHONE_REGION", "CN")),
		ProxyHeader:  get("SECKILL_PROXY_HEADER", fiber.HeaderXForwardedFor),

		CodeWebhookURL:    get("SECKILL_CODE_WEBHOOK_URL", ""),
		CodeWebhookSecret: get("SECKILL_CODE_WEBHOOK_SECRET", ""),
		lookup:            lookup,
	}
	var err error
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return c, &configError{"SECKILL_ADDR", c.Addr, "want host:port, e.g. :8080"}
	}
	if c.PprofPublic, err = boolVar(lookup, "SECKILL_PPROF_PUBLIC", false); err != nil {
		return c, err
	}
	if c.PprofAddr != "" {
		host, _, err := net.SplitHostPort(c.PprofAddr)
		if err != nil {
			return c, &configError{"SECKILL_PPROF_ADDR", c.PprofAddr, "want host:port, e.g. 127.0.0.1:6060"}
		}
		if !c.PprofPublic && !isLoopback(host) {
			return c, &configError{"SECKILL_PPROF_ADDR", c.PprofAddr, "the profiler listens on loopback only (e.g. 127.0.0.1:6060); " +
				"SECKILL_PPROF_PUBLIC=1 lets it listen elsewhere"}
		}
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return c, &configError{"SECKILL_METRICS_ADDR", c.MetricsAddr, "want host:port, e.g. 10.0.0.5:9090"}
		}
	}
	if c.RedisURL != "" {
		if t, perr := parseRedisURL(c.RedisURL); perr == nil {
			c.RedisPoolSize = t.requestPool
		}
		if _, perr := parseRedisURL(c.RedisURL); perr != nil {
			return c, &configError{"SECKILL_REDIS_URL", redactURL(c.RedisURL), perr.Error()}
		}
	}
	if c.MySQLDSN != "" {
		if _, perr := mysql.ParseDSN(c.MySQLDSN); perr != nil {
			return c, &configError{"SECKILL_MYSQL_DSN", "", "not a go-sql-driver DSN (" + perr.Error() + "); e.g. root@tcp(127.0.0.1:3306)/test"}
		}
	}
	if err := halfEmbedded(c); err != nil {
		return c, err
	}
	if _, ok := lookupBackend(c.Queue); !ok {
		return c, &configError{"SECKILL_QUEUE", c.Queue, "want one of " + strings.Join(BackendNames(), ", ")}
	}
	if c.Consumers, err = intVar(lookup, "SECKILL_CONSUMERS", 2, 0, 256); err != nil {
		return c, err
	}
	if c.Queue == "memory" && c.Consumers == 0 {
		// The queue is this process's memory: no other process can drain
		// it, and what it holds is gone when this one stops.
		return c, &configError{"SECKILL_CONSUMERS", "0", "SECKILL_QUEUE=memory needs a consumer in this process: its queue is this process's memory, which no other process can drain, so every order would stay queued and be lost at stop"}
	}
	if c.Shards, err = intVar(lookup, "SECKILL_SHARDS", 0, 0, maxShards); err != nil {
		return c, err
	}
	if c.BatchSize, err = intVar(lookup, "SECKILL_BATCH_SIZE", 500, 1, 10000); err != nil {
		return c, err
	}
	if c.MaxDeliver, err = intVar(lookup, "SECKILL_MAX_DELIVERIES", 5, 1, 1000); err != nil {
		return c, err
	}
	if c.ClaimMinIdle, err = durationVar(lookup, "SECKILL_CLAIM_MIN_IDLE", 30*time.Second); err != nil {
		return c, err
	}
	if c.WaitReplicas, err = intVar(lookup, "SECKILL_REDIS_WAIT_REPLICAS", 0, 0, 16); err != nil {
		return c, err
	}
	if c.WaitTimeout, err = durationVar(lookup, "SECKILL_REDIS_WAIT_TIMEOUT", 250*time.Millisecond); err != nil {
		return c, err
	}
	if c.WaitReplicas > 0 && c.EmbeddedRedis() {
		return c, &configError{"SECKILL_REDIS_WAIT_REPLICAS", strconv.Itoa(c.WaitReplicas), "the embedded Redis has no replicas to wait for"}
	}
	if c.RequestTimeout, err = durationVar(lookup, "SECKILL_REQUEST_TIMEOUT", DefaultRequestTimeout); err != nil {
		return c, err
	}
	if c.PayWindow, err = durationVar(lookup, "SECKILL_PAY_WINDOW", DefaultPayWindow); err != nil {
		return c, err
	}
	if c.PayWindow < time.Second {
		return c, &configError{"SECKILL_PAY_WINDOW", c.PayWindow.String(), "want at least 1s, e.g. 15m"}
	}
	if c.MySQLMaxConns, err = intVar(lookup, "SECKILL_MYSQL_MAX_CONNS", DefaultMySQLMaxConns, 1, 4096); err != nil {
		return c, err
	}
	if c.NATSURL, err = brokerURLVar(lookup, "SECKILL_NATS_URL", "nats://127.0.0.1:4222", "nats", "tls", "ws", "wss"); err != nil {
		return c, err
	}
	outboxCap, err := intVar(lookup, "SECKILL_OUTBOX_CAP", DefaultOutboxCap, 0, 100_000_000)
	if err != nil {
		return c, err
	}
	c.OutboxCap = int64(outboxCap)
	if c.AMQPURL, err = brokerURLVar(lookup, "SECKILL_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/", "amqp", "amqps"); err != nil {
		return c, err
	}
	if c.TokenLifetime, err = durationVar(lookup, "SECKILL_TOKEN_LIFETIME", DefaultTokenLifetime); err != nil {
		return c, err
	}
	if c.TokenLifetime < time.Minute || c.TokenLifetime > 90*24*time.Hour {
		return c, &configError{"SECKILL_TOKEN_LIFETIME", c.TokenLifetime.String(), "want from 1m to 2160h (90 days), e.g. 24h"}
	}
	c.Expiry = strings.TrimSpace(get("SECKILL_EXPIRY", ""))
	switch {
	case c.Expiry == "" && c.Queue == "sync":
		c.Expiry = ExpirySweep
	case c.Expiry == "":
		c.Expiry = ExpiryDeadlines
	case c.Expiry != ExpiryDeadlines && c.Expiry != ExpirySweep:
		return c, &configError{"SECKILL_EXPIRY", c.Expiry, "want deadlines or sweep"}
	case c.Expiry == ExpiryDeadlines && c.Queue == "sync":
		return c, &configError{"SECKILL_EXPIRY", c.Expiry, "SECKILL_QUEUE=sync reserves in MySQL: its orders expire by the sweep alone (set sweep, or leave it unset)"}
	}
	c.ConsumerLinger = -1
	if v, ok := lookup("SECKILL_CONSUMER_LINGER"); ok && strings.TrimSpace(v) != "" {
		d, perr := time.ParseDuration(strings.TrimSpace(v))
		if perr != nil || d < 0 || d > time.Second {
			return c, &configError{"SECKILL_CONSUMER_LINGER", v, "want a Go duration from 0 to 1s, e.g. 20ms"}
		}
		c.ConsumerLinger = d
	}
	c.AnswerMemo = DefaultAnswerMemo
	if v, ok := lookup("SECKILL_ANSWER_MEMO"); ok && strings.TrimSpace(v) != "" {
		d, perr := time.ParseDuration(strings.TrimSpace(v))
		if perr != nil || d < 0 || d > 10*time.Second {
			return c, &configError{"SECKILL_ANSWER_MEMO", v, "want a Go duration from 0 (off) to 10s, e.g. 200ms"}
		}
		c.AnswerMemo = d
	}
	embedded := c.EmbeddedRedis() && c.EmbeddedSQL()
	if err := c.loadPayments(lookup, embedded); err != nil {
		return c, err
	}
	if err := c.loadLogin(lookup, embedded); err != nil {
		return c, err
	}
	if c.DemoSale, err = boolVar(lookup, "SECKILL_DEMO_SALE", embedded); err != nil {
		return c, err
	}
	if c.UserLock, err = boolVar(lookup, "SECKILL_USER_LOCK", false); err != nil {
		return c, err
	}
	if c.AllowEviction, err = boolVar(lookup, "SECKILL_REDIS_ALLOW_EVICTION", false); err != nil {
		return c, err
	}
	if c.MemoryCapacity, err = intVar(lookup, "SECKILL_MEMORY_CAPACITY", 10000, 1, 10_000_000); err != nil {
		return c, err
	}
	if c.ListReliable, err = boolVar(lookup, "SECKILL_LIST_RELIABLE", false); err != nil {
		return c, err
	}
	if c.RedisBatch, err = intVar(lookup, "SECKILL_REDIS_BATCH", DefaultRedisBatch, 0, 256); err != nil {
		return c, err
	}
	if c.RedisCoalesce, err = boolVar(lookup, "SECKILL_REDIS_COALESCE", true); err != nil {
		return c, err
	}
	name := get("SECKILL_ORDER_BODY", string(core.OrderBodyCompact))
	if c.OrderBody, err = core.ParseOrderBody(name); err != nil {
		return c, &configError{"SECKILL_ORDER_BODY", name, "want compact or json"}
	}
	if c.SeckillRate, err = intVar(lookup, "SECKILL_SECKILL_RATE", 5, 0, 1_000_000); err != nil {
		return c, err
	}
	if c.CodeRate, err = intVar(lookup, "SECKILL_CODE_RATE", 20, 0, 1_000_000); err != nil {
		return c, err
	}
	if c.LoginRate, err = intVar(lookup, "SECKILL_LOGIN_RATE", 30, 0, 1_000_000); err != nil {
		return c, err
	}
	if c.MissRate, err = intVar(lookup, "SECKILL_MISS_RATE", 60, 0, 1_000_000); err != nil {
		return c, err
	}
	if v := get("SECKILL_TRUSTED_PROXIES", ""); v != "" {
		if c.TrustedProxies, err = parseTrustedProxies(v); err != nil {
			return c, &configError{"SECKILL_TRUSTED_PROXIES", v, err.Error() + "; want addresses or CIDR ranges, comma-separated"}
		}
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return c, &configError{"SECKILL_LOG_FORMAT", c.LogFormat, "want text or json"}
	}
	if v := get("SECKILL_KAFKA_BROKERS", ""); v != "" {
		for _, b := range strings.Split(v, ",") {
			b = strings.TrimSpace(b)
			if host, port, err := net.SplitHostPort(b); err != nil || host == "" || port == "" {
				return c, &configError{"SECKILL_KAFKA_BROKERS", v, "want host:port of the seed brokers, comma-separated"}
			}
			c.KafkaBrokers = append(c.KafkaBrokers, b)
		}
	}
	if err := c.loadBrokerSecurity(lookup); err != nil {
		return c, err
	}
	if c.Queue == "kafka" && len(c.KafkaBrokers) == 0 {
		return c, &configError{"SECKILL_KAFKA_BROKERS", "", "SECKILL_QUEUE=kafka needs the brokers (host:port, comma-separated); there is no Kafka to embed"}
	}
	if embedded && c.Queue == "rabbitmq" && c.AMQPURL == "" {
		return c, &configError{"SECKILL_AMQP_URL", "", "SECKILL_QUEUE=rabbitmq needs a RabbitMQ to talk to, and the stand-ins have none to embed: set SECKILL_AMQP_URL (e.g. amqp://guest:guest@127.0.0.1:5672/)"}
	}
	if err := c.loadSecrets(embedded); err != nil {
		return c, err
	}
	return c, nil
}

// loadSecrets makes up the secrets the stand-ins lack, and refuses on real
// servers a missing secret, a short one, a documented example, one of
// fewer than 8 distinct characters, and an admin token equal to the JWT
// secret.
func (c *Config) loadSecrets(embedded bool) error {
	if embedded {
		if len(c.JWTSecret) == 0 {
			c.JWTSecret = []byte(randomHex(32))
		}
		if c.AdminToken == "" {
			c.AdminToken = randomHex(16)
			c.GeneratedAdminToken = true
		}
	} else {
		// With real servers, a made-up secret would differ on every
		// instance and every restart: refuse instead.
		if len(c.JWTSecret) == 0 {
			return &configError{"SECKILL_JWT_SECRET", "", "required when Redis or MySQL is configured"}
		}
		if c.AdminToken == "" {
			return &configError{"SECKILL_ADMIN_TOKEN", "", "required when Redis or MySQL is configured"}
		}
	}
	if len(c.JWTSecret) < 16 {
		return &configError{"SECKILL_JWT_SECRET", "", "must be at least 16 bytes"}
	}
	if len(c.AdminToken) < 16 {
		return &configError{"SECKILL_ADMIN_TOKEN", "", "must be at least 16 characters"}
	}
	if !embedded {
		for name, v := range map[string]string{"SECKILL_JWT_SECRET": string(c.JWTSecret), "SECKILL_ADMIN_TOKEN": c.AdminToken,
			"SECKILL_CODE_WEBHOOK_SECRET": c.CodeWebhookSecret, "SECKILL_PAY_SECRET": c.PaySecret} {
			if v == "" {
				continue
			}
			if isExampleSecret(v) {
				return &configError{name, "", "is an example value from the README or docs, known to everyone: choose a random one (e.g. openssl rand -hex 32)"}
			}
			if len(v) < 16 {
				return &configError{name, "", "must be at least 16 bytes"}
			}
			if distinct(v) < minDistinctSecretBytes {
				return &configError{name, "", fmt.Sprintf("has fewer than %d distinct characters, a pattern anyone guesses: choose a random one (e.g. openssl rand -hex 32)", minDistinctSecretBytes)}
			}
		}
		if string(c.JWTSecret) == c.AdminToken {
			return &configError{"SECKILL_ADMIN_TOKEN", "", "is the same as SECKILL_JWT_SECRET: whoever holds one would hold both (the admin token travels in headers and logs of tools; the JWT secret signs every shopper); choose two random values"}
		}
	}
	return nil
}

// halfEmbedded refuses exactly one of the two servers set: such an
// instance joins the real queue and persists its orders into a throw-away
// embedded database (or reserves in a throw-away Redis against the real
// database). The outside review saw one dead-letter 20 of 40 real orders.
func halfEmbedded(c Config) error {
	switch {
	case c.EmbeddedRedis() && !c.EmbeddedSQL():
		return &configError{"SECKILL_REDIS_URL", "", "not set while SECKILL_MYSQL_DSN is: set both (a real deployment) or neither (the embedded stand-ins); " +
			"half embedded, this instance would sell from a throw-away Redis into the real database"}
	case !c.EmbeddedRedis() && c.EmbeddedSQL():
		return &configError{"SECKILL_MYSQL_DSN", "", "not set while SECKILL_REDIS_URL is: set both (a real deployment) or neither (the embedded stand-ins); " +
			"half embedded, this instance would consume the real queue into a throw-away database"}
	}
	return nil
}

// minDistinctSecretBytes: a secret of fewer distinct bytes is a pattern
// (aaaa…, abab…, 1212…), whatever its length.
const minDistinctSecretBytes = 8

// distinct counts the different bytes of s.
func distinct(s string) int {
	var seen [256]bool
	n := 0
	for i := 0; i < len(s); i++ {
		if !seen[s[i]] {
			seen[s[i]] = true
			n++
		}
	}
	return n
}

// exampleSecrets are the secret values the README and docs show. On real
// servers they are refused: whoever copied one shares it with every
// reader. TestDocumentedSecretsAreRefused keeps this list and the docs in
// step. A blocklist, not an entropy guess: a guess refuses good secrets and
// passes bad ones.
var exampleSecrets = []string{
	"change-me-to-32-random-bytes....",
	"change-me-admin-token",
	"demo-admin-token-0123",
	"sms-gateway-shared-secret",
}

func isExampleSecret(v string) bool {
	if strings.HasPrefix(strings.ToLower(v), "change-me") {
		return true
	}
	for _, e := range exampleSecrets {
		if v == e {
			return true
		}
	}
	return false
}

// isLoopback reports whether host (of host:port) names only this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// loadPayments reads the payment provider and the sandbox's secret.
func (c *Config) loadPayments(lookup func(string) (string, bool), embedded bool) error {
	v, set := lookup("SECKILL_PAY_PROVIDER")
	c.PayProvider = strings.TrimSpace(v)
	if !set && embedded {
		c.PayProvider = SandboxProvider
	}
	if c.PayProvider != "" {
		if _, ok := lookupPayProvider(c.PayProvider); !ok {
			return &configError{"SECKILL_PAY_PROVIDER", c.PayProvider, "want one of " + strings.Join(PayProviderNames(), ", ") + ", or empty for no payments"}
		}
	}
	c.PaySecret = strings.TrimSpace(func() string { v, _ := lookup("SECKILL_PAY_SECRET"); return v }())
	if c.PayProvider == SandboxProvider {
		switch {
		case c.PaySecret == "" && embedded:
			c.PaySecret = randomHex(32)
		case c.PaySecret == "":
			return &configError{"SECKILL_PAY_SECRET", "", "required by SECKILL_PAY_PROVIDER=sandbox with real servers: every instance must sign and check the sandbox's notifications alike"}
		}
		c.PaySandboxOnRealServers = !embedded
	}
	return nil
}

// loadLogin reads how shoppers log in: dev codes, the code sender, the
// phone region.
func (c *Config) loadLogin(lookup func(string) (string, bool), embedded bool) error {
	switch v, _ := lookup("SECKILL_DEV_CODES"); strings.ToLower(strings.TrimSpace(v)) {
	case "":
		c.DevCodes = embedded
	case "force":
		c.DevCodes, c.DevCodesForced = true, !embedded
	default:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return &configError{"SECKILL_DEV_CODES", v, "want 1, 0 or force"}
		}
		if b && !embedded {
			return &configError{"SECKILL_DEV_CODES", v, "returns every login code to whoever asks for it, so anyone can log in as any phone; " +
				"with real servers write force if that is really meant (a test or a demo), else set SECKILL_CODE_WEBHOOK_URL"}
		}
		c.DevCodes = b
	}
	c.CodeSender = strings.TrimSpace(func() string { v, _ := lookup("SECKILL_CODE_SENDER"); return v }())
	if c.CodeSender == "" && c.CodeWebhookURL != "" {
		c.CodeSender = WebhookSender
	}
	if c.CodeSender != "" {
		if _, ok := lookupCodeSender(c.CodeSender); !ok {
			return &configError{"SECKILL_CODE_SENDER", c.CodeSender, "want one of " + strings.Join(CodeSenderNames(), ", ")}
		}
	}
	if c.CodeSender == WebhookSender {
		if c.CodeWebhookURL == "" {
			return &configError{"SECKILL_CODE_WEBHOOK_URL", "", "required by SECKILL_CODE_SENDER=webhook"}
		}
		if c.CodeWebhookSecret == "" {
			return &configError{"SECKILL_CODE_WEBHOOK_SECRET", "", "required with SECKILL_CODE_WEBHOOK_URL: the gateway checks each code's signature with it"}
		}
	}
	if !core.ValidRegion(c.PhoneRegion) {
		return &configError{"SECKILL_PHONE_REGION", c.PhoneRegion, "want an ISO 3166 region code libphonenumber knows, e.g. CN or US"}
	}
	c.PhoneRegions = []string{c.PhoneRegion}
	if v, _ := lookup("SECKILL_PHONE_REGIONS"); strings.TrimSpace(v) != "" {
		c.PhoneRegions = nil
		for _, r := range strings.Split(v, ",") {
			r = strings.ToUpper(strings.TrimSpace(r))
			if !core.ValidRegion(r) {
				return &configError{"SECKILL_PHONE_REGIONS", v, "want ISO 3166 region codes libphonenumber knows, comma-separated, e.g. CN,HK"}
			}
			c.PhoneRegions = append(c.PhoneRegions, r)
		}
	}
	var err error
	if c.CodesPerPhone, err = intVar(lookup, "SECKILL_CODES_PER_PHONE", DefaultCodesPerPhone, 1, 1000); err != nil {
		return err
	}
	return nil
}

// loadBrokerSecurity reads how the outside brokers' connections are
// secured: Kafka's TLS and SASL, NATS's credentials file. All optional,
// off by default; a file that cannot be read, or a mechanism without its
// user, stops the start.
func (c *Config) loadBrokerSecurity(lookup func(string) (string, bool)) error {
	get := func(name string) string { v, _ := lookup(name); return strings.TrimSpace(v) }
	on, err := boolVar(lookup, "SECKILL_KAFKA_TLS", false)
	if err != nil {
		return err
	}
	if ca := get("SECKILL_KAFKA_TLS_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return &configError{"SECKILL_KAFKA_TLS_CA", ca, "cannot read it: " + err.Error()}
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return &configError{"SECKILL_KAFKA_TLS_CA", ca, "holds no PEM certificate"}
		}
		c.KafkaTLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	} else if on {
		c.KafkaTLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	user, password := get("SECKILL_KAFKA_USER"), get("SECKILL_KAFKA_PASSWORD")
	switch mechanism := strings.ToUpper(get("SECKILL_KAFKA_SASL")); {
	case mechanism == "" && user == "":
	case mechanism == "" || user == "" || password == "":
		return &configError{"SECKILL_KAFKA_SASL", mechanism, "SASL needs the mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), SECKILL_KAFKA_USER and SECKILL_KAFKA_PASSWORD together"}
	case mechanism == "PLAIN":
		c.KafkaSASL = plain.Auth{User: user, Pass: password}.AsMechanism()
	case mechanism == "SCRAM-SHA-256":
		c.KafkaSASL = scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	case mechanism == "SCRAM-SHA-512":
		c.KafkaSASL = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	default:
		return &configError{"SECKILL_KAFKA_SASL", mechanism, "want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"}
	}
	if creds := get("SECKILL_NATS_CREDS"); creds != "" {
		if _, err := os.Stat(creds); err != nil {
			return &configError{"SECKILL_NATS_CREDS", creds, "cannot read the credentials file: " + err.Error()}
		}
		c.NATSCredentials = creds
	}
	return nil
}

// DefaultCodesPerPhone is SECKILL_CODES_PER_PHONE's default: with five
// tries a code, 25 judged guesses a phone in 15 minutes, whoever asks.
const DefaultCodesPerPhone = 5

func intVar(lookup func(string) (string, bool), name string, def, lo, hi int) (int, error) {
	v, ok := lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo || n > hi {
		return 0, &configError{name, v, fmt.Sprintf("want an integer from %d to %d", lo, hi)}
	}
	return n, nil
}

// DefaultRequestTimeout is the contract's default deadline of a request.
const DefaultRequestTimeout = 2 * time.Second

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

// brokerURLVar reads an outside broker's URL: empty, or a URL of one of
// the schemes with a host (example shows one in the error).
func brokerURLVar(lookup func(string) (string, bool), name, example string, schemes ...string) (string, error) {
	v, _ := lookup(name)
	if v == "" {
		return "", nil
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || !slices.Contains(schemes, u.Scheme) {
		return "", &configError{name, redactURL(v), "want a URL such as " + example}
	}
	return v, nil
}

func durationVar(lookup func(string) (string, bool), name string, def time.Duration) (time.Duration, error) {
	v, ok := lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return 0, &configError{name, v, "want a positive Go duration, e.g. 30s or 1m"}
	}
	return d, nil
}

func boolVar(lookup func(string) (string, bool), name string, def bool) (bool, error) {
	v, ok := lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, &configError{name, v, "want 1 or 0 (true or false)"}
	}
	return b, nil
}

// credentialsInURL is the userinfo of each URL in a text: user:password@
// or a lone token@ (NATS takes nats://token@host), in a URL of any scheme,
// also in lists (nats://u:p@a,nats://u:p@b) that url.Parse refuses.
var credentialsInURL = regexp.MustCompile(`(?i)([a-z][a-z0-9+.-]*://)([^/@\s,]*)@`)

// redactURL hides the credentials of every URL in s before it is printed:
// a password becomes xxxxx, a lone token (NATS's) too; the user name
// stays, to tell which account.
func redactURL(s string) string {
	return credentialsInURL.ReplaceAllStringFunc(s, func(m string) string {
		parts := credentialsInURL.FindStringSubmatch(m)
		scheme, userinfo := parts[1], parts[2]
		if user, _, ok := strings.Cut(userinfo, ":"); ok {
			return scheme + user + ":xxxxx@"
		}
		return scheme + "xxxxx@"
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
