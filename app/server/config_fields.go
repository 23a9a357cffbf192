package server

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-lab/seckill/core"
)

// The server's own variables whose reading is more than a type's: each is
// one row's field in variables_table.go.

// redisURLField is SECKILL_REDIS_URL; its pool_size is RedisPoolSize.
var redisURLField = field{
	load: func(c *Config, v string) error {
		c.RedisURL = v
		if v == "" {
			return nil
		}
		t, err := parseRedisURL(v)
		if err != nil {
			return &configError{"SECKILL_REDIS_URL", redactURL(v), err.Error()}
		}
		c.RedisPoolSize = t.requestPool
		return nil
	},
	env: func(c Config) string { return c.RedisURL },
}

// mysqlDSNField is SECKILL_MYSQL_DSN, never shown in an error (it may
// carry a password).
var mysqlDSNField = textField(func(c *Config) *string { return &c.MySQLDSN }, "", func(v string) error {
	if _, err := mysql.ParseDSN(v); err != nil {
		return &configError{"SECKILL_MYSQL_DSN", "", "not a go-sql-driver DSN (" + err.Error() + "); e.g. root@tcp(127.0.0.1:3306)/test"}
	}
	return nil
})

// jwtSecretField is SECKILL_JWT_SECRET, kept as bytes.
var jwtSecretField = field{
	load: func(c *Config, v string) error { c.JWTSecret = []byte(v); return nil },
	env:  func(c Config) string { return string(c.JWTSecret) },
}

// jwtPreviousField is SECKILL_JWT_SECRET_PREVIOUS, kept as bytes.
var jwtPreviousField = field{
	load: func(c *Config, v string) error { c.JWTSecretPrevious = []byte(v); return nil },
	env:  func(c Config) string { return string(c.JWTSecretPrevious) },
}

// outboxCapField is SECKILL_OUTBOX_CAP.
var outboxCapField = field{
	load: func(c *Config, v string) error {
		n, err := parseInt(v, DefaultOutboxCap, 0, 100_000_000)
		c.OutboxCap = int64(n)
		return err
	},
	env: func(c Config) string { return strconv.FormatInt(c.OutboxCap, 10) },
}

// lingerField is SECKILL_CONSUMER_LINGER: unset is -1, chosen by the
// shard count.
var lingerField = cappedDurationField(func(c *Config) *time.Duration { return &c.ConsumerLinger }, -1, time.Second,
	"want a Go duration from 0 to 1s, e.g. 20ms")

// answerMemoField is SECKILL_ANSWER_MEMO: 0 (off) to 10s.
var answerMemoField = cappedDurationField(func(c *Config) *time.Duration { return &c.AnswerMemo }, DefaultAnswerMemo, 10*time.Second,
	"want a Go duration from 0 (off) to 10s, e.g. 200ms")

// cappedDurationField is a duration from 0 (a setting of its own) to most,
// def when unset; a negative def is written back unset.
func cappedDurationField(at func(*Config) *time.Duration, def, most time.Duration, why string) field {
	return field{
		load: func(c *Config, v string) error {
			*at(c) = def
			if v == "" {
				return nil
			}
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > most {
				return errors.New(why)
			}
			*at(c) = d
			return nil
		},
		env: func(c Config) string {
			if d := *at(&c); d >= 0 {
				return d.String()
			}
			return ""
		},
	}
}

// devCodesField is SECKILL_DEV_CODES: 1, 0 or force; unset is decided
// with the servers (finish).
var devCodesField = field{
	load: func(c *Config, v string) error {
		switch strings.ToLower(v) {
		case "", "force":
			return nil
		}
		if _, err := strconv.ParseBool(v); err != nil {
			return errors.New("want 1, 0 or force")
		}
		return nil
	},
	env: func(c Config) string {
		if c.DevCodesForced {
			return "force"
		}
		return boolEnv(c.DevCodes)
	},
}

// phoneRegionField is SECKILL_PHONE_REGION.
var phoneRegionField = field{
	load: func(c *Config, v string) error {
		c.PhoneRegion = strings.ToUpper(v)
		if v == "" {
			c.PhoneRegion = "CN"
		}
		if !core.ValidRegion(c.PhoneRegion) {
			return errors.New("want an ISO 3166 region code libphonenumber knows, e.g. CN or US")
		}
		return nil
	},
	env: func(c Config) string { return c.PhoneRegion },
}

// phoneRegionsField is SECKILL_PHONE_REGIONS; unset is SECKILL_PHONE_REGION
// alone (finish).
var phoneRegionsField = field{
	load: func(c *Config, v string) error {
		c.PhoneRegions = nil
		for r := range strings.SplitSeq(v, ",") {
			if r = strings.ToUpper(strings.TrimSpace(r)); r == "" {
				continue
			}
			if !core.ValidRegion(r) {
				return errors.New("want ISO 3166 region codes libphonenumber knows, comma-separated, e.g. CN,HK")
			}
			c.PhoneRegions = append(c.PhoneRegions, r)
		}
		return nil
	},
	env: func(c Config) string { return strings.Join(c.PhoneRegions, ",") },
}

// trustedProxiesField is SECKILL_TRUSTED_PROXIES.
var trustedProxiesField = field{
	load: func(c *Config, v string) error {
		var err error
		if c.TrustedProxies, err = parseTrustedProxies(v); err != nil {
			return errors.New(err.Error() + "; want addresses or CIDR ranges, comma-separated")
		}
		return nil
	},
	env: func(c Config) string {
		out := make([]string, len(c.TrustedProxies))
		for i, p := range c.TrustedProxies {
			out[i] = p.String()
		}
		return strings.Join(out, ",")
	},
}

// orderBodyField is SECKILL_ORDER_BODY.
var orderBodyField = field{
	load: func(c *Config, v string) error {
		if v == "" {
			v = string(core.OrderBodyCompact)
		}
		var err error
		if c.OrderBody, err = core.ParseOrderBody(v); err != nil {
			return errors.New("want compact or json")
		}
		return nil
	},
	env: func(c Config) string { return string(c.OrderBody) },
}

func knownBackend(name string) error {
	if _, ok := lookupBackend(name); !ok {
		return errors.New("want one of " + strings.Join(BackendNames(), ", "))
	}
	return nil
}

func knownPayProvider(name string) error {
	if _, ok := lookupPayProvider(name); !ok {
		return errors.New("want one of " + strings.Join(PayProviderNames(), ", ") + ", or empty for no payments")
	}
	return nil
}

func knownCodeSender(name string) error {
	if _, ok := lookupCodeSender(name); !ok {
		return errors.New("want one of " + strings.Join(CodeSenderNames(), ", "))
	}
	return nil
}

func tokenLifetimeBounds(d time.Duration) error {
	if d < time.Minute || d > 90*24*time.Hour {
		return errors.New("want from 1m to 2160h (90 days), e.g. 24h")
	}
	return nil
}

func payWindowBounds(d time.Duration) error {
	if d < time.Second {
		return errors.New("want at least 1s, e.g. 15m")
	}
	return nil
}

// finish decides, once every variable is read, what depends on several:
// the defaults that differ on the stand-ins, the pairs that go together,
// the selected backend's own checks and the secrets.
func (c *Config) finish() error {
	embedded := c.EmbeddedRedis() && c.EmbeddedSQL()
	if err := c.finishServers(); err != nil {
		return err
	}
	if err := c.finishSale(); err != nil {
		return err
	}
	if err := c.finishPayments(embedded); err != nil {
		return err
	}
	if err := c.finishLogin(embedded); err != nil {
		return err
	}
	for _, b := range Backends() {
		if b.Check == nil {
			continue
		}
		if err := b.Check(*c); err != nil {
			return err
		}
	}
	return c.loadSecrets(embedded)
}

// finishServers checks the servers and listeners together.
func (c *Config) finishServers() error {
	if err := halfEmbedded(*c); err != nil {
		return err
	}
	if c.WaitReplicas > 0 && c.EmbeddedRedis() {
		return &configError{"SECKILL_REDIS_WAIT_REPLICAS", strconv.Itoa(c.WaitReplicas), "the embedded Redis has no replicas to wait for"}
	}
	if c.PprofAddr != "" {
		host, _, _ := net.SplitHostPort(c.PprofAddr) // read as host:port already
		if !c.PprofPublic && !isLoopback(host) {
			return &configError{"SECKILL_PPROF_ADDR", c.PprofAddr, "the profiler listens on loopback only (e.g. 127.0.0.1:6060); " +
				"SECKILL_PPROF_PUBLIC=1 lets it listen elsewhere"}
		}
	}
	return nil
}

// finishSale decides how unpaid orders are found (by the backend) and the
// demo sale.
func (c *Config) finishSale() error {
	switch {
	case c.Expiry == "":
		c.Expiry = defaultExpiry(c.Queue)
	case c.Expiry == ExpiryDeadlines && c.Queue == "sync":
		return &configError{"SECKILL_EXPIRY", c.Expiry, "SECKILL_QUEUE=sync reserves in MySQL: its orders expire by the sweep alone (set sweep, or leave it unset)"}
	}
	if c.given["SECKILL_DEMO_SALE"] == "" {
		c.DemoSale = c.EmbeddedRedis() && c.EmbeddedSQL()
	}
	return nil
}

// finishPayments decides the payment provider (the sandbox on the
// stand-ins unless set, even to empty) and the sandbox's secret.
func (c *Config) finishPayments(embedded bool) error {
	if _, set := c.given["SECKILL_PAY_PROVIDER"]; !set && embedded {
		c.PayProvider = SandboxProvider
	}
	if c.PaySandboxDropNotices+c.PaySandboxDelayNotices > 1 {
		return &configError{"SECKILL_PAYSANDBOX_DELAY_NOTICES", c.given["SECKILL_PAYSANDBOX_DELAY_NOTICES"],
			"with SECKILL_PAYSANDBOX_DROP_NOTICES, more than every notice: the two shares add up to at most 1"}
	}
	if c.PayProvider != SandboxProvider {
		return nil
	}
	switch {
	case c.PaySecret == "" && embedded:
		c.PaySecret = randomHex(32)
	case c.PaySecret == "":
		return &configError{"SECKILL_PAY_SECRET", "", "required by SECKILL_PAY_PROVIDER=sandbox with real servers: every instance must sign and check the sandbox's notifications alike"}
	}
	c.PaySandboxOnRealServers = !embedded
	return nil
}

// finishLogin decides how shoppers log in: dev codes, the code sender
// (the webhook when its URL is set), the regions.
func (c *Config) finishLogin(embedded bool) error {
	switch v := c.given["SECKILL_DEV_CODES"]; strings.ToLower(v) {
	case "":
		c.DevCodes = embedded
	case "force":
		c.DevCodes, c.DevCodesForced = true, !embedded
	default:
		b, _ := strconv.ParseBool(v) // read already
		if b && !embedded {
			return &configError{"SECKILL_DEV_CODES", v, "returns every login code to whoever asks for it, so anyone can log in as any phone; " +
				"with real servers write force if that is really meant (a test or a demo), else set SECKILL_CODE_WEBHOOK_URL"}
		}
		c.DevCodes = b
	}
	if c.CodeSender == "" && c.CodeWebhookURL != "" {
		c.CodeSender = WebhookSender
	}
	if c.CodeSender == WebhookSender {
		if c.CodeWebhookURL == "" {
			return &configError{"SECKILL_CODE_WEBHOOK_URL", "", "required by SECKILL_CODE_SENDER=webhook"}
		}
		if c.CodeWebhookSecret == "" {
			return &configError{"SECKILL_CODE_WEBHOOK_SECRET", "", "required with SECKILL_CODE_WEBHOOK_URL: the gateway checks each code's signature with it"}
		}
	}
	if len(c.PhoneRegions) == 0 {
		c.PhoneRegions = []string{c.PhoneRegion}
	}
	return nil
}
