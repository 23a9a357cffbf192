package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/seckill-lab/seckill/adapters/kafkaqueue"
	"github.com/seckill-lab/seckill/core"
)

// kafkaBackend is kafka: a Kafka topic, an outside broker fed through the relay.
var kafkaBackend = Backend{
	Name:      kafkaqueue.Name,
	Iteration: "Kafka topic keyed by voucher, fed by a relay from the Redis outbox (acks=all, idempotent producer); a consumer group committing after the commit, a dead-letter topic",
	Broker:    openKafka,
	Variables: kafkaVariables,
	Check:     checkKafka,
}

var kafkaVariables = []Variable{
	{Name: string(kafkaBrokers), Default: "none: required (there is no Kafka to embed)",
		Summary: "kafka backend: the seed brokers, host:port comma-separated",
		Meaning: "`kafka`: the seed brokers, `host:port` comma-separated; the topics `<prefix>orders` (12 partitions, keyed by voucher) and `<prefix>orders_dead` are created at start when missing, and the consumer group is `<prefix>orders_persisters` (named from the prefix, as groups are the Kafka cluster's; session timeout 10 s: a killed process's partitions move after it); unreachable: the start stops with one line",
		Parse:   parseKafkaBrokers},
	{Name: string(kafkaTLS), Default: "`0`",
		Summary: "kafka backend: 1 for TLS to the brokers (the system's roots)",
		Meaning: "`kafka`: `1` connects to the brokers over TLS, verified against the system's roots (TLS 1.2 at least)",
		Parse:   boolSetting(false)},
	{Name: string(kafkaTLSCA), Default: "unset",
		Summary: "kafka backend: a PEM file of the CA the brokers' certificates chain to (implies TLS)",
		Meaning: "`kafka`: a PEM file of the certificate authorities the brokers' certificates are verified against, instead of the system's (implies TLS); unreadable, or no certificate in it: the start stops",
		Parse:   parseCertPool},
	{Name: string(kafkaSASL), Default: "unset: no SASL",
		Summary: "kafka backend: SASL mechanism, PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
		Meaning: "`kafka`: the SASL mechanism every connection authenticates with, `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512` (PLAIN only over TLS in production: it sends the password as is), with `SECKILL_KAFKA_USER` and `SECKILL_KAFKA_PASSWORD`; one of the three without the others stops the start",
		Parse:   parseSASLMechanism},
	{Name: string(kafkaUser), Default: "unset",
		Summary: "kafka backend: the SASL user",
		Meaning: "`kafka`: the SASL user (with `SECKILL_KAFKA_SASL`)"},
	{Name: string(kafkaPassword), Default: "unset",
		Summary: "kafka backend: the SASL password (never logged)",
		Meaning: "`kafka`: the SASL password (with `SECKILL_KAFKA_SASL`); never logged"},
}

// checkKafka refuses kafka without its brokers (there is no Kafka to
// embed) and a SASL mechanism without its user and password, or either
// without the mechanism.
func checkKafka(c Config) error {
	if c.Queue == kafkaqueue.Name && len(kafkaBrokers.of(c)) == 0 {
		return &configError{string(kafkaBrokers), "", "SECKILL_QUEUE=kafka needs the brokers (host:port, comma-separated); there is no Kafka to embed"}
	}
	mechanism, user, password := kafkaSASL.of(c), kafkaUser.of(c), kafkaPassword.of(c)
	if (mechanism != "" || user != "") && (mechanism == "" || user == "" || password == "") {
		return &configError{string(kafkaSASL), mechanism, "SASL needs the mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), SECKILL_KAFKA_USER and SECKILL_KAFKA_PASSWORD together"}
	}
	return nil
}

// kafkaSecurity is the TLS (nil: none) and SASL (nil: none) every Kafka
// connection uses.
func kafkaSecurity(c Config) (*tls.Config, sasl.Mechanism) {
	var t *tls.Config
	if roots := kafkaTLSCA.of(c); roots != nil {
		t = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	} else if kafkaTLS.of(c) {
		t = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	user, password := kafkaUser.of(c), kafkaPassword.of(c)
	switch kafkaSASL.of(c) {
	case "PLAIN":
		return t, plain.Auth{User: user, Pass: password}.AsMechanism()
	case "SCRAM-SHA-256":
		return t, scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return t, scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	}
	return t, nil
}

func parseKafkaBrokers(v string) (any, error) {
	var brokers []string
	for b := range strings.SplitSeq(v, ",") {
		if v == "" {
			break
		}
		b = strings.TrimSpace(b)
		if host, port, err := net.SplitHostPort(b); err != nil || host == "" || port == "" {
			return nil, errors.New("want host:port of the seed brokers, comma-separated")
		}
		brokers = append(brokers, b)
	}
	return brokers, nil
}

func parseSASLMechanism(v string) (any, error) {
	switch m := strings.ToUpper(v); m {
	case "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		return m, nil
	}
	return nil, errors.New("want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
}

// parseCertPool reads a PEM file of certificate authorities (nil when
// unset).
func parseCertPool(v string) (any, error) {
	if v == "" {
		return (*x509.CertPool)(nil), nil
	}
	pem, err := os.ReadFile(v)
	if err != nil {
		return nil, errors.New("cannot read it: " + err.Error())
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, errors.New("holds no PEM certificate")
	}
	return roots, nil
}

// openKafka opens the Kafka backend on SECKILL_KAFKA_BROKERS (LoadConfig
// requires them).
func openKafka(ctx context.Context, d Deps) (core.Queue, error) {
	brokers := kafkaBrokers.of(d.Config)
	if len(brokers) == 0 {
		return nil, &configError{string(kafkaBrokers), "", "SECKILL_QUEUE=kafka needs the brokers (host:port, comma-separated)"}
	}
	tlsConfig, mechanism := kafkaSecurity(d.Config)
	// franz-go's own instrumentation: a publish span per record in its
	// order's trace, a receive span per record that carries one (none,
	// over the provider that records nothing, when the server traces
	// nothing).
	hooks := kotel.NewKotel(kotel.WithTracer(kotel.NewTracer(kotel.TracerProvider(d.Tracer),
		kotel.TracerPropagator(propagation.TraceContext{})))).Hooks()
	q, err := kafkaqueue.New(ctx, kafkaqueue.Config{Brokers: brokers, Topic: kafkaqueue.TopicName(d.Config.KeyPrefix),
		ConsumerPrefix: d.Config.ConsumerName, Signer: d.OrderSigner(), TLS: tlsConfig, SASL: mechanism, Hooks: hooks}, d.Log)
	if err != nil {
		return nil, fmt.Errorf("SECKILL_KAFKA_BROKERS: %w", err)
	}
	return q, nil
}
