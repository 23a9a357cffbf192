package server

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigDefaultsInEmbeddedMode(t *testing.T) {
	c, err := LoadConfig(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != ":8080" || c.Queue != "streamgroup" || c.ClaimMinIdle != 30*time.Second || !c.DevCodes ||
		!c.EmbeddedRedis() || !c.EmbeddedSQL() || len(c.JWTSecret) == 0 || c.AdminToken == "" || !c.GeneratedAdminToken ||
		!c.RedisCoalesce || c.RedisBatch != 32 || c.PprofAddr != "" || c.BatchSize != 500 || c.AnswerMemo != 200*time.Millisecond ||
		c.OrderBody != core.OrderBodyCompact {
		t.Fatalf("defaults: %+v", c)
	}
	other, _ := LoadConfig(env(nil))
	if string(other.JWTSecret) == string(c.JWTSecret) {
		t.Fatal("the embedded JWT secret is not random per start")
	}
}

func TestConfigWithRealServers(t *testing.T) {
	real := map[string]string{
		"SECKILL_REDIS_URL": "redis://127.0.0.1:6379/0",
		"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/test",
	}
	if _, err := LoadConfig(env(real)); err == nil || !strings.Contains(err.Error(), "SECKILL_JWT_SECRET") {
		t.Fatalf("no secrets with real servers: err = %v, want a refusal naming SECKILL_JWT_SECRET", err)
	}
	real["SECKILL_JWT_SECRET"] = testenv.Secret()
	if _, err := LoadConfig(env(real)); err == nil || !strings.Contains(err.Error(), "SECKILL_ADMIN_TOKEN") {
		t.Fatalf("no admin token: err = %v, want a refusal naming SECKILL_ADMIN_TOKEN", err)
	}
	real["SECKILL_ADMIN_TOKEN"] = testenv.Secret()
	c, err := LoadConfig(env(real))
	if err != nil {
		t.Fatal(err)
	}
	if c.DevCodes || c.GeneratedAdminToken {
		t.Fatalf("with real servers dev codes must default off: %+v", c)
	}
}

func TestBadConfigValuesNameTheirVariable(t *testing.T) {
	for variable, value := range map[string]string{
		"SECKILL_QUEUE":           "rocketmq",
		"SECKILL_NATS_URL":        "localhost:4222",
		"SECKILL_AMQP_URL":        "http://guest:guest@localhost:5672/",
		"SECKILL_KAFKA_BROKERS":   "kafka-1:9092,kafka-2",
		"SECKILL_CLAIM_MIN_IDLE":  "5",
		"SECKILL_CONSUMERS":       "-1",
		"SECKILL_BATCH_SIZE":      "lots",
		"SECKILL_DEV_CODES":       "maybe",
		"SECKILL_REDIS_URL":       "http://localhost:6379",
		"SECKILL_MYSQL_DSN":       "root@tcp(127.0.0.1:3306",
		"SECKILL_ADDR":            "8080",
		"SECKILL_LOG_FORMAT":      "xml",
		"SECKILL_JWT_SECRET":      "short",
		"SECKILL_REDIS_COALESCE":  "sometimes",
		"SECKILL_REDIS_BATCH":     "1000",
		"SECKILL_ORDER_BODY":      "protobuf",
		"SECKILL_PPROF_ADDR":      "6060",
		"SECKILL_SHARDS":          "65",
		"SECKILL_CONSUMER_LINGER": "5s",
		"SECKILL_ANSWER_MEMO":     "1m",
		"SECKILL_PHONE_REGION":    "XX",
		"SECKILL_CODE_SENDER":     "carrier-pigeon",
		"SECKILL_LOGIN_RATE":      "-3",
		"SECKILL_TRUSTED_PROXIES": "10.0.0.0/8, lb.internal",
		"SECKILL_EXPIRY":          "later",
	} {
		_, err := LoadConfig(env(map[string]string{variable: value}))
		if err == nil {
			t.Errorf("%s=%q accepted", variable, value)
			continue
		}
		if !strings.Contains(err.Error(), variable) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s=%q: error %q should be one line naming the variable", variable, value, err)
		}
	}
}

// TestOutsideBrokersWithoutTheirBrokerRefuseToStart: kafka always needs
// its brokers (there is no Kafka to embed), rabbitmq needs its URL on the
// stand-ins (nothing to embed there; real servers default to the local
// one), and nats on the stand-ins embeds its own server.
func TestOutsideBrokersWithoutTheirBrokerRefuseToStart(t *testing.T) {
	real := map[string]string{"SECKILL_REDIS_URL": "redis://127.0.0.1:6379/0", "SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/test",
		"SECKILL_JWT_SECRET": testenv.Secret(), "SECKILL_ADMIN_TOKEN": testenv.Secret()}
	withQueue := func(base map[string]string, queue string) map[string]string {
		m := map[string]string{"SECKILL_QUEUE": queue}
		for k, v := range base {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		name     string
		vars     map[string]string
		variable string // "" when it starts
	}{
		{"kafka on the stand-ins", withQueue(nil, "kafka"), "SECKILL_KAFKA_BROKERS"},
		{"kafka on real servers", withQueue(real, "kafka"), "SECKILL_KAFKA_BROKERS"},
		{"rabbitmq on the stand-ins", withQueue(nil, "rabbitmq"), "SECKILL_AMQP_URL"},
		{"rabbitmq on real servers", withQueue(real, "rabbitmq"), ""},
		{"nats on the stand-ins", withQueue(nil, "nats"), ""},
		{"kafka with brokers", withQueue(map[string]string{"SECKILL_KAFKA_BROKERS": "127.0.0.1:9092, 127.0.0.1:9093"}, "kafka"), ""},
	} {
		cfg, err := LoadConfig(env(c.vars))
		switch {
		case c.variable == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.variable != "" && (err == nil || !strings.Contains(err.Error(), c.variable) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: err = %v, want one line naming %s", c.name, err, c.variable)
		case c.name == "kafka with brokers" && strings.Join(kafkaBrokers.of(cfg), ",") != "127.0.0.1:9092,127.0.0.1:9093":
			t.Errorf("%s: brokers %q", c.name, kafkaBrokers.of(cfg))
		}
	}
}

func TestLingerDefaultsByShards(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 0, 3: 10 * time.Millisecond, 12: 50 * time.Millisecond, 64: 50 * time.Millisecond} {
		if got := lingerFor(n); got != want {
			t.Errorf("%d shards: linger %v, want %v", n, got, want)
		}
	}
	c, err := LoadConfig(env(map[string]string{"SECKILL_CONSUMER_LINGER": "0"}))
	if err != nil || c.ConsumerLinger != 0 {
		t.Fatalf("SECKILL_CONSUMER_LINGER=0: %v, %v; want an explicit 0", c.ConsumerLinger, err)
	}
	if c, _ := LoadConfig(env(nil)); c.ConsumerLinger >= 0 {
		t.Fatalf("unset linger is %v, want negative: chosen by the shard count", c.ConsumerLinger)
	}
}

func TestAnswerMemoOfZeroTurnsItOff(t *testing.T) {
	c, err := LoadConfig(env(map[string]string{"SECKILL_ANSWER_MEMO": "0"}))
	if err != nil || c.AnswerMemo != 0 {
		t.Fatalf("SECKILL_ANSWER_MEMO=0: %v, %v; want off", c.AnswerMemo, err)
	}
}

func TestRedisPasswordIsNotEchoed(t *testing.T) {
	_, err := LoadConfig(env(map[string]string{"SECKILL_REDIS_URL": "ftp://:hunter2@host:1/0"}))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v: want a refusal that hides the password", err)
	}
}

// TestRedisURLForms: one server, go-redis's cluster form and its failover
// (Sentinel) form are accepted; a malformed one of either form is refused naming the variable,
// without the password.
func TestRedisURLForms(t *testing.T) {
	base := map[string]string{"SECKILL_JWT_SECRET": testenv.Secret(), "SECKILL_ADMIN_TOKEN": testenv.Secret(),
		"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/test"}
	for url, ok := range map[string]bool{
		"redis://127.0.0.1:6379/0":                                            true,
		"rediss://:pw@redis.example:6380/2":                                   true,
		"redis://127.0.0.1:7001?addr=127.0.0.1:7002&addr=127.0.0.1:7003":      true,
		"redis://:hunter2@127.0.0.1:7001?addr=127.0.0.1:7002&read_timeout=2s": true,
		"redis://127.0.0.1:7001?addr=127.0.0.1:7002&bogus=1":                  false,
		"redis://:hunter2@127.0.0.1:7001?addr=127.0.0.1:7002&bogus=1":         false,
		"redis://127.0.0.1:6379/0?unknown=1":                                  false,
		"redis://127.0.0.1:26379?master_name=mymaster&addr=127.0.0.1:26380":   true,
		"redis://:hunter2@127.0.0.1:26379?master_name=m&bogus=1":              false,
	} {
		m := map[string]string{"SECKILL_REDIS_URL": url}
		for k, v := range base {
			m[k] = v
		}
		_, err := LoadConfig(env(m))
		if ok && err != nil {
			t.Errorf("%s refused: %v", url, err)
		}
		if !ok && (err == nil || !strings.Contains(err.Error(), "SECKILL_REDIS_URL") || strings.Contains(err.Error(), "hunter2")) {
			t.Errorf("%s: err = %v, want a refusal naming the variable, without the password", url, err)
		}
	}
}

// TestRedisURLFormsAreToldApart: one server, a cluster (addr=) and
// Sentinel (master_name=) open different clients.
func TestRedisURLFormsAreToldApart(t *testing.T) {
	for url, want := range map[string]string{
		"redis://127.0.0.1:6379/0":                                          "single",
		"redis://127.0.0.1:7001?addr=127.0.0.1:7002&addr=127.0.0.1:7003":    "cluster",
		"redis://127.0.0.1:26379?master_name=mymaster&addr=127.0.0.1:26380": "failover",
	} {
		target, err := parseRedisURL(url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		got := map[bool]string{true: "single"}[target.single != nil] + map[bool]string{true: "cluster"}[target.cluster != nil] +
			map[bool]string{true: "failover"}[target.failover != nil]
		if got != want {
			t.Errorf("%s parsed as %q, want %q", url, got, want)
		}
	}
	if target, _ := parseRedisURL("redis://127.0.0.1:26379?master_name=mymaster&addr=127.0.0.1:26380"); target.failover.MasterName != "mymaster" ||
		len(target.failover.SentinelAddrs) != 2 {
		t.Fatalf("sentinels %v, master %q", target.failover.SentinelAddrs, target.failover.MasterName)
	}
}

func realServers(extra map[string]string) map[string]string {
	m := map[string]string{
		"SECKILL_REDIS_URL":   "redis://127.0.0.1:6379/0",
		"SECKILL_MYSQL_DSN":   "root@tcp(127.0.0.1:3306)/test",
		"SECKILL_JWT_SECRET":  testenv.Secret(),
		"SECKILL_ADMIN_TOKEN": testenv.Secret(),
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestDevCodesOnRealServersNeedForce(t *testing.T) {
	_, err := LoadConfig(env(realServers(map[string]string{"SECKILL_DEV_CODES": "1"})))
	if err == nil || !strings.Contains(err.Error(), "SECKILL_DEV_CODES") || !strings.Contains(err.Error(), "force") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("SECKILL_DEV_CODES=1 with real servers: err = %v, want one line naming the variable and force", err)
	}
	c, err := LoadConfig(env(realServers(map[string]string{"SECKILL_DEV_CODES": "force"})))
	if err != nil || !c.DevCodes || !c.DevCodesForced {
		t.Fatalf("force: %v, DevCodes=%v forced=%v", err, c.DevCodes, c.DevCodesForced)
	}
	c, err = LoadConfig(env(map[string]string{"SECKILL_DEV_CODES": "1"}))
	if err != nil || !c.DevCodes || c.DevCodesForced {
		t.Fatalf("1 on the stand-ins: %v, DevCodes=%v forced=%v (nothing to force there)", err, c.DevCodes, c.DevCodesForced)
	}
}

func TestTheWebhookSenderNeedsItsSecret(t *testing.T) {
	_, err := LoadConfig(env(realServers(map[string]string{"SECKILL_CODE_WEBHOOK_URL": "https://sms.example/hook"})))
	if err == nil || !strings.Contains(err.Error(), "SECKILL_CODE_WEBHOOK_SECRET") {
		t.Fatalf("a webhook without a secret: err = %v, want a refusal naming SECKILL_CODE_WEBHOOK_SECRET", err)
	}
	c, err := LoadConfig(env(realServers(map[string]string{"SECKILL_CODE_WEBHOOK_URL": "https://sms.example/hook", "SECKILL_CODE_WEBHOOK_SECRET": "gateway-secret-0123456789"})))
	if err != nil || c.CodeSender != WebhookSender {
		t.Fatalf("webhook configured: %v, sender %q, want %q by default", err, c.CodeSender, WebhookSender)
	}
}

func TestTheProfilerListensOnLoopbackUnlessForced(t *testing.T) {
	for addr, ok := range map[string]bool{":6060": false, "0.0.0.0:6060": false, "[::]:6060": false, "10.1.2.3:6060": false,
		"127.0.0.1:6060": true, "localhost:6060": true, "[::1]:6060": true} {
		_, err := LoadConfig(env(map[string]string{"SECKILL_PPROF_ADDR": addr}))
		if (err == nil) != ok {
			t.Errorf("SECKILL_PPROF_ADDR=%s: err = %v, want accepted=%v", addr, err, ok)
		}
	}
	if _, err := LoadConfig(env(map[string]string{"SECKILL_PPROF_ADDR": ":6060", "SECKILL_PPROF_PUBLIC": "1"})); err != nil {
		t.Errorf(":6060 with SECKILL_PPROF_PUBLIC=1: %v", err)
	}
}

func TestExampleAndShortSecretsAreRefusedOnRealServers(t *testing.T) {
	for name, value := range map[string]string{
		"SECKILL_JWT_SECRET":          "change-me-to-32-random-bytes....",
		"SECKILL_ADMIN_TOKEN":         "demo-admin-token-0123",
		"SECKILL_CODE_WEBHOOK_SECRET": "short-secret",
	} {
		extra := map[string]string{name: value}
		if name == "SECKILL_CODE_WEBHOOK_SECRET" {
			extra["SECKILL_CODE_WEBHOOK_URL"] = "https://sms.example/hook"
		}
		_, err := LoadConfig(env(realServers(extra)))
		if err == nil || !strings.Contains(err.Error(), name) || strings.Contains(err.Error(), value) {
			t.Errorf("%s=%s on real servers: err = %v, want a refusal naming the variable and not echoing the value", name, value, err)
		}
	}
	// On the stand-ins the README's demo token is what the walk-through uses.
	if _, err := LoadConfig(env(map[string]string{"SECKILL_ADMIN_TOKEN": "demo-admin-token-0123"})); err != nil {
		t.Errorf("the README's demo admin token on the stand-ins: %v", err)
	}
}

func TestTheExpiryMechanismFollowsTheReservation(t *testing.T) {
	for _, c := range []struct{ queue, expiry, want string }{
		{"streamgroup", "", ExpiryDeadlines},
		{"streamgroup", "sweep", ExpirySweep},
		{"list", "deadlines", ExpiryDeadlines},
		{"sync", "", ExpirySweep},
		{"sync", "sweep", ExpirySweep},
	} {
		cfg, err := LoadConfig(env(map[string]string{"SECKILL_QUEUE": c.queue, "SECKILL_EXPIRY": c.expiry}))
		if err != nil || cfg.Expiry != c.want {
			t.Errorf("SECKILL_QUEUE=%s SECKILL_EXPIRY=%q: %q, %v; want %q", c.queue, c.expiry, cfg.Expiry, err, c.want)
		}
	}
	// The in-process queue with no consumer in its process: every order
	// would stay queued and go with the process.
	if _, err := LoadConfig(env(map[string]string{"SECKILL_QUEUE": "memory", "SECKILL_CONSUMERS": "0"})); err == nil ||
		!strings.Contains(err.Error(), "SECKILL_CONSUMERS") || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("memory with no consumer: %v, want a refusal naming SECKILL_CONSUMERS", err)
	}
	// Under sync the database reserves: no Redis deadline to record.
	_, err := LoadConfig(env(map[string]string{"SECKILL_QUEUE": "sync", "SECKILL_EXPIRY": "deadlines"}))
	if err == nil || !strings.Contains(err.Error(), "SECKILL_EXPIRY") {
		t.Fatalf("sync with deadlines: %v, want a refusal naming SECKILL_EXPIRY", err)
	}
}

// TestPoolsAndTokenLifetimeAreSettings: the URL's pool_size is the
// request pool (the consumers' blocking readers on top), not overwritten;
// SECKILL_MYSQL_MAX_CONNS bounds the database pool; a token lives
// SECKILL_TOKEN_LIFETIME.
func TestPoolsAndTokenLifetimeAreSettings(t *testing.T) {
	for variable, value := range map[string]string{"SECKILL_MYSQL_MAX_CONNS": "0", "SECKILL_TOKEN_LIFETIME": "10s"} {
		if _, err := LoadConfig(env(map[string]string{variable: value})); err == nil || !strings.Contains(err.Error(), variable) {
			t.Errorf("%s=%s: %v, want a refusal naming it", variable, value, err)
		}
	}
	if _, err := LoadConfig(env(map[string]string{"SECKILL_REDIS_URL": "redis://127.0.0.1:6379/0?pool_size=0"})); err == nil || !strings.Contains(err.Error(), "pool_size") {
		t.Errorf("pool_size=0: %v, want a refusal", err)
	}
	redisURL := os.Getenv(testenv.RedisURLEnv)
	dsn, ok := testenv.MySQLDatabase(t)
	if redisURL == "" || !ok {
		t.Skip("the pools are looked at on the real servers (CI sets them)")
	}
	cfg, err := LoadConfig(env(map[string]string{
		"SECKILL_REDIS_URL": redisURL + "?pool_size=7", "SECKILL_MYSQL_DSN": dsn,
		"SECKILL_JWT_SECRET": testenv.Secret(), "SECKILL_ADMIN_TOKEN": testenv.Secret(),
		"SECKILL_MYSQL_MAX_CONNS": "5", "SECKILL_TOKEN_LIFETIME": "2h", "SECKILL_DEV_CODES": "force", "SECKILL_KEY_PREFIX": "t" + testenv.RandomSuffix() + ":",
	}))
	if err != nil {
		t.Fatal(err)
	}
	h := startWith(t, cfg)
	if got, want := h.srv.rdb.(*redis.Client).Options().PoolSize, 7+max(cfg.Consumers, defaultClusterShards); got != want {
		t.Errorf("Redis pool %d, want pool_size 7 plus %d blocking readers", got, want-7)
	}
	if got := h.srv.store.DB().DB.Stats().MaxOpenConnections; got != 5 {
		t.Errorf("MySQL pool %d, want SECKILL_MYSQL_MAX_CONNS 5", got)
	}
	token, _ := devLogin(t, h, "13800005555") // a token the server issued
	var claims struct{ Iat, Exp int64 }
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[1])
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp-claims.Iat != 7200 {
		t.Errorf("token claims %s (%v), want exp 2 h after iat", payload, err)
	}
}

// TestWeakSecretsAreRefusedOnRealServers: the outside review started a
// real deployment with a 16-character all-"a" secret and with the admin
// token equal to the JWT secret. Both stop the start now, naming the
// variable and never echoing the value; the stand-ins keep taking them.
func TestWeakSecretsAreRefusedOnRealServers(t *testing.T) {
	sameKey := testenv.Secret()
	for _, c := range []struct {
		name, variable string
		vars           map[string]string
	}{
		{"all one letter", "SECKILL_JWT_SECRET", map[string]string{"SECKILL_JWT_SECRET": strings.Repeat("a", 16)}},
		{"a short pattern repeated", "SECKILL_ADMIN_TOKEN", map[string]string{"SECKILL_ADMIN_TOKEN": strings.Repeat("ab12", 8)}},
		{"seven distinct of 40", "SECKILL_PAY_SECRET", map[string]string{"SECKILL_PAY_PROVIDER": "sandbox", "SECKILL_PAY_SECRET": strings.Repeat("abcdefg", 6)}},
		{"webhook secret all one digit", "SECKILL_CODE_WEBHOOK_SECRET", map[string]string{"SECKILL_CODE_WEBHOOK_URL": "https://sms.example/hook", "SECKILL_CODE_WEBHOOK_SECRET": strings.Repeat("1", 32)}},
		{"admin token = JWT secret", "SECKILL_ADMIN_TOKEN", map[string]string{"SECKILL_JWT_SECRET": sameKey, "SECKILL_ADMIN_TOKEN": sameKey}},
		// The security review's: each started on real servers, and a
		// six-word list cracked the first from one shopper's token.
		{"a word list's", "SECKILL_JWT_SECRET", map[string]string{"SECKILL_JWT_SECRET": "supersecretpassword"}},
		{"a counting pattern", "SECKILL_JWT_SECRET", map[string]string{"SECKILL_JWT_SECRET": "0123456789abcdef"}},
		{"the pattern at 32 bytes of hex", "SECKILL_JWT_SECRET", map[string]string{"SECKILL_JWT_SECRET": strings.Repeat("0123456789abcdef", 4)}},
		{"a repeated word at 32 bytes", "SECKILL_ADMIN_TOKEN", map[string]string{"SECKILL_ADMIN_TOKEN": strings.Repeat("deadbeef", 8)}},
		{"16 random bytes", "SECKILL_ADMIN_TOKEN", map[string]string{"SECKILL_ADMIN_TOKEN": testenv.Secret()[:32]}},
		{"words of 40 characters", "SECKILL_JWT_SECRET", map[string]string{"SECKILL_JWT_SECRET": "correct-horse-battery-staple-is-my-secret"}},
		{"the previous secret weak", "SECKILL_JWT_SECRET_PREVIOUS", map[string]string{"SECKILL_JWT_SECRET_PREVIOUS": "supersecretpassword"}},
		{"the previous secret the current", "SECKILL_JWT_SECRET_PREVIOUS", map[string]string{"SECKILL_JWT_SECRET": sameKey, "SECKILL_JWT_SECRET_PREVIOUS": sameKey}},
	} {
		_, err := LoadConfig(env(realServers(c.vars)))
		if err == nil || !strings.Contains(err.Error(), c.variable) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want one line naming %s", c.name, err, c.variable)
			continue
		}
		for _, v := range c.vars {
			if len(v) >= 16 && strings.Contains(err.Error(), v) {
				t.Errorf("%s: the refusal echoes the secret: %v", c.name, err)
			}
		}
		embedded := map[string]string{}
		for k, v := range c.vars {
			embedded[k] = v
		}
		if _, err := LoadConfig(env(embedded)); err != nil {
			t.Errorf("%s on the stand-ins: %v, want accepted (demo values are fine there)", c.name, err)
		}
	}
	if _, err := LoadConfig(env(realServers(nil))); err != nil {
		t.Fatalf("the tests' own real-server secrets: %v", err)
	}
	// 32 random bytes in each form openssl and the like print them.
	raw := make([]byte, 32)
	rand.Read(raw)
	for _, key := range []string{hex.EncodeToString(raw), base64.StdEncoding.EncodeToString(raw), base64.RawURLEncoding.EncodeToString(raw)} {
		if _, err := LoadConfig(env(realServers(map[string]string{"SECKILL_JWT_SECRET": key, "SECKILL_JWT_SECRET_PREVIOUS": testenv.Secret()}))); err != nil {
			t.Errorf("a random key %q: %v, want accepted", key, err)
		}
	}
}

// TestExactlyOneServerSetIsRefused: the outside review started a second
// instance with the real Redis and no MySQL setting; it joined the real
// consumer group and dead-lettered 20 of 40 real orders into its
// throw-away database. Either half alone stops the start, naming the
// missing variable.
func TestExactlyOneServerSetIsRefused(t *testing.T) {
	secrets := map[string]string{"SECKILL_JWT_SECRET": testenv.Secret(), "SECKILL_ADMIN_TOKEN": testenv.Secret()}
	for missing, set := range map[string]map[string]string{
		"SECKILL_MYSQL_DSN": {"SECKILL_REDIS_URL": "redis://127.0.0.1:6379/0"},
		"SECKILL_REDIS_URL": {"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/test"},
	} {
		for k, v := range secrets {
			set[k] = v
		}
		_, err := LoadConfig(env(set))
		if err == nil || !strings.HasPrefix(err.Error(), "config: "+missing+":") || strings.Contains(err.Error(), "\n") {
			t.Errorf("only the other server set: err = %v, want one line naming %s", err, missing)
		}
	}
}

// TestAPlainHTTPWebhookIsWarnedOfOnRealServers: codes in clear text on the
// network; a warning at start (the gateway may be on this host).
func TestAPlainHTTPWebhookIsWarnedOfOnRealServers(t *testing.T) {
	sender, _ := lookupCodeSender(WebhookSender)
	for _, c := range []struct {
		url  string
		real bool
		warn bool
	}{
		{"http://sms.example/hook", true, true},
		{"https://sms.example/hook", true, false},
		{"http://127.0.0.1:9999/hook", false, false}, // the stand-ins
	} {
		vars := map[string]string{"SECKILL_CODE_WEBHOOK_URL": c.url, "SECKILL_CODE_WEBHOOK_SECRET": "a-webhook-secret-0123456"}
		if c.real {
			vars = realServers(vars)
		}
		cfg, err := LoadConfig(env(vars))
		if err != nil {
			t.Fatal(err)
		}
		var logged strings.Builder
		if _, err := sender.Open(Deps{Config: cfg, Log: slog.New(slog.NewTextHandler(&logged, nil))}); err != nil {
			t.Fatal(err)
		}
		if warned := strings.Contains(logged.String(), "level=WARN") && strings.Contains(logged.String(), "http://"); warned != c.warn {
			t.Errorf("%s (real servers %v): warned %v, want %v; log: %s", c.url, c.real, warned, c.warn, logged.String())
		}
	}
}

// TestAClaimTimeThatOutlastsThePayWindowIsWarnedOf: a warning, never a
// refusal, when an order can wait for its claim longer than its shopper
// has to pay.
func TestAClaimTimeThatOutlastsThePayWindowIsWarnedOf(t *testing.T) {
	for _, c := range []struct {
		claim, pay string
		warn       bool
	}{{"30s", "5s", true}, {"30s", "30s", true}, {"30s", "15m", false}, {"2s", "5s", false}} {
		cfg, err := LoadConfig(env(map[string]string{"SECKILL_CLAIM_MIN_IDLE": c.claim, "SECKILL_PAY_WINDOW": c.pay}))
		if err != nil {
			t.Fatalf("claim %s, pay window %s: refused (%v), want at most a warning", c.claim, c.pay, err)
		}
		if got := claimOutlastsPayWindow(cfg); (got != "") != c.warn || (c.warn && !strings.Contains(got, "SECKILL_CLAIM_MIN_IDLE")) {
			t.Errorf("claim %s, pay window %s: warning %q, want one: %v", c.claim, c.pay, got, c.warn)
		}
	}
}

// TestAConfigForAnotherQueueDerivesItsExpiryAgain: the lab runs one
// configuration on every backend; a derived deadlines expiry carried to
// sync stopped its server at start (make bench's sync side). A given
// SECKILL_EXPIRY is kept as given.
func TestAConfigForAnotherQueueDerivesItsExpiryAgain(t *testing.T) {
	cfg, err := LoadConfig(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Expiry != ExpiryDeadlines || cfg.ForQueue("sync").Expiry != ExpirySweep || cfg.ForQueue("sync").ForQueue("list").Expiry != ExpiryDeadlines {
		t.Fatalf("expiry %q, for sync %q: want deadlines, then sweep", cfg.Expiry, cfg.ForQueue("sync").Expiry)
	}
	env := cfg.ForQueue("sync").Environment()
	if _, err := LoadConfig(func(name string) (string, bool) { v, ok := env[name]; return v, ok && v != "" }); err != nil {
		t.Fatalf("a sync server from the lab's environment: %v", err)
	}
	given := cfg.MustWith("SECKILL_EXPIRY", "sweep")
	if given.ForQueue("list").Expiry != ExpirySweep {
		t.Fatal("a given SECKILL_EXPIRY was derived again")
	}
}
