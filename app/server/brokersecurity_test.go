package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/seckill-lab/seckill/adapters/kafkaqueue"
	"github.com/seckill-lab/seckill/adapters/natsqueue"
)

// selfSignedTLS is a certificate for 127.0.0.1 signed by itself: the
// server's TLS, and the CA file a client trusts it by.
func selfSignedTLS(t *testing.T) (*tls.Config, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafka.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, caFile
}

// TestKafkaOverTLSAndSASL: a Kafka that takes only TLS connections from
// SCRAM users (kfake, the stand-in) is reached with SECKILL_KAFKA_TLS_CA,
// SECKILL_KAFKA_SASL, _USER and _PASSWORD, and a sale goes through it;
// without the credentials the start stops.
func TestKafkaOverTLSAndSASL(t *testing.T) {
	serverTLS, caFile := selfSignedTLS(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(serverTLS), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "seckill", "a-kafka-password-0123"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	secured, err := LoadConfig(env(map[string]string{"SECKILL_QUEUE": "kafka", "SECKILL_KAFKA_BROKERS": strings.Join(cluster.ListenAddrs(), ","),
		"SECKILL_KAFKA_TLS_CA": caFile, "SECKILL_KAFKA_SASL": "scram-sha-256", "SECKILL_KAFKA_USER": "seckill", "SECKILL_KAFKA_PASSWORD": "a-kafka-password-0123"}))
	if err != nil {
		t.Fatal(err)
	}
	securedTLS, securedSASL := kafkaSecurity(secured)
	if securedTLS == nil || securedSASL == nil || securedSASL.Name() != "SCRAM-SHA-256" {
		t.Fatalf("TLS %v, SASL %v: the settings were not read", securedTLS, securedSASL)
	}
	h := startServer(t, "real", func(c *Config) {
		c.Queue = kafkaqueue.Name
		for _, name := range []string{string(kafkaBrokers), string(kafkaTLSCA), string(kafkaSASL), string(kafkaUser), string(kafkaPassword)} {
			*c = c.MustWith(name, secured.Value(name))
		}
	})
	voucher := h.openVoucher(3)
	if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(5), nil); status != 200 {
		t.Fatalf("seckill over TLS and SASL: %d %v", status, body)
	}
	if n := h.waitForRows(voucher, 1, 15*time.Second); n != 1 {
		t.Fatalf("%d rows: the order did not travel through the secured Kafka", n)
	}

	plain := testConfig()
	useRealServers(t, &plain)
	plain.Queue = kafkaqueue.Name
	plain = plain.MustWith(string(kafkaBrokers), secured.Value(string(kafkaBrokers))).MustWith(string(kafkaTLSCA), caFile)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s, err := New(ctx, plain, nil); err == nil {
		s.Close()
		t.Fatal("a server without the SASL credentials started against a Kafka that requires them")
	}
}

// TestBrokerSecuritySettingsAreChecked: a mechanism without its user or
// password, an unknown mechanism, a CA file that cannot be read or holds
// no certificate, a NATS credentials file that is not there: each stops
// the start naming its variable, and never echoes the password.
func TestBrokerSecuritySettingsAreChecked(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	for _, c := range []struct {
		vars     map[string]string
		variable string
	}{
		{map[string]string{"SECKILL_KAFKA_SASL": "PLAIN", "SECKILL_KAFKA_USER": "u"}, "SECKILL_KAFKA_SASL"},
		{map[string]string{"SECKILL_KAFKA_USER": "u", "SECKILL_KAFKA_PASSWORD": "secret-password-xyz"}, "SECKILL_KAFKA_SASL"},
		{map[string]string{"SECKILL_KAFKA_SASL": "GSSAPI", "SECKILL_KAFKA_USER": "u", "SECKILL_KAFKA_PASSWORD": "secret-password-xyz"}, "SECKILL_KAFKA_SASL"},
		{map[string]string{"SECKILL_KAFKA_TLS_CA": "/nonexistent/ca.pem"}, "SECKILL_KAFKA_TLS_CA"},
		{map[string]string{"SECKILL_KAFKA_TLS_CA": notPEM}, "SECKILL_KAFKA_TLS_CA"},
		{map[string]string{"SECKILL_KAFKA_TLS": "maybe"}, "SECKILL_KAFKA_TLS"},
		{map[string]string{"SECKILL_NATS_CREDS": "/nonexistent/user.creds"}, "SECKILL_NATS_CREDS"},
	} {
		_, err := LoadConfig(env(c.vars))
		if err == nil || !strings.Contains(err.Error(), c.variable) || strings.Contains(err.Error(), "secret-password-xyz") {
			t.Errorf("%v: err = %v, want a refusal naming %s without the password", c.vars, err, c.variable)
		}
	}
	cfg, err := LoadConfig(env(map[string]string{"SECKILL_KAFKA_TLS": "1"}))
	if tlsConfig, mechanism := kafkaSecurity(cfg); err != nil || tlsConfig == nil || mechanism != nil {
		t.Fatalf("SECKILL_KAFKA_TLS=1: %v, TLS %v, SASL %v", err, tlsConfig, mechanism)
	}
}

// TestCredentialsInBrokerURLsAreRedacted: what a log line or a refusal
// prints of a URL keeps its user and hides its password or token, also in
// NATS's comma-separated lists that net/url cannot parse.
func TestCredentialsInBrokerURLsAreRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"amqp://guest:hunter2@127.0.0.1:5672/":                           "amqp://guest:xxxxx@127.0.0.1:5672/",
		"nats://s3cr3t-token@127.0.0.1:4222":                             "nats://xxxxx@127.0.0.1:4222",
		"nats://u:hunter2@a:4222,nats://u:hunter2@b:4222":                "nats://u:xxxxx@a:4222,nats://u:xxxxx@b:4222",
		"redis://:hunter2@127.0.0.1:7001?addr=127.0.0.1:7002":            "redis://:xxxxx@127.0.0.1:7001?addr=127.0.0.1:7002",
		"rediss://default:p%40ss@redis.example:6380/2":                   "rediss://default:xxxxx@redis.example:6380/2",
		"nats://127.0.0.1:4222":                                          "nats://127.0.0.1:4222",
		"redis://:pw1@s1:26379?master_name=m&password=pw2&addr=s2:26379": "redis://:xxxxx@s1:26379?master_name=m&password=xxxxx&addr=s2:26379",
		"SECKILL_AMQP_URL=amqps://svc:pw@mq.internal/ (refused)":         "SECKILL_AMQP_URL=amqps://svc:xxxxx@mq.internal/ (refused)",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
	_, err := LoadConfig(env(map[string]string{"SECKILL_AMQP_URL": "ftp://guest:hunter2@127.0.0.1/"}))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a refused AMQP URL: %v, want a refusal without the password", err)
	}
}

// TestNATSWithAUserAndPassword: a NATS that takes only an authenticated
// user is reached with the user and password in SECKILL_NATS_URL, and a
// sale goes through it; with a wrong password the start stops, and its
// error names the setting without the password.
func TestNATSWithAUserAndPassword(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true, Username: "seckill", Password: "a-nats-password-0123"})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server did not start")
	}
	addr := strings.TrimPrefix(ns.ClientURL(), "nats://")
	h := startServer(t, "real", func(c *Config) {
		c.Queue = natsqueue.Name
		*c = c.MustWith(string(natsURL), "nats://seckill:a-nats-password-0123@"+addr)
	})
	voucher := h.openVoucher(3)
	if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(5), nil); status != 200 {
		t.Fatalf("seckill through an authenticated NATS: %d %v", status, body)
	}
	if n := h.waitForRows(voucher, 1, 15*time.Second); n != 1 {
		t.Fatalf("%d rows: the order did not travel through NATS", n)
	}

	wrong := testConfig()
	useRealServers(t, &wrong)
	wrong.Queue = natsqueue.Name
	wrong = wrong.MustWith(string(natsURL), "nats://seckill:not-the-password-987@"+addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, wrong, nil)
	if err == nil {
		s.Close()
		t.Fatal("a server with the wrong NATS password started")
	}
	if !strings.Contains(err.Error(), "SECKILL_NATS_URL") || strings.Contains(err.Error(), "not-the-password-987") {
		t.Fatalf("the refusal: %v; want it to name SECKILL_NATS_URL without the password", err)
	}
	t.Logf("refused: %v", err)
}
