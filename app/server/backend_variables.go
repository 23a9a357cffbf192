package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/seckill-lab/seckill/adapters/amqpqueue"
	"github.com/seckill-lab/seckill/adapters/kafkaqueue"
	"github.com/seckill-lab/seckill/adapters/memqueue"
)

// The built-in backends' own variables (Backend.Variables): each backend
// declares what it reads, parsed at start, and reads it back with
// settingOf.

// The names of the backends' variables.
const (
	natsURLVar        = "SECKILL_NATS_URL"
	natsCredsVar      = "SECKILL_NATS_CREDS"
	amqpURLVar        = "SECKILL_AMQP_URL"
	kafkaBrokersVar   = "SECKILL_KAFKA_BROKERS"
	kafkaTLSVar       = "SECKILL_KAFKA_TLS"
	kafkaTLSCAVar     = "SECKILL_KAFKA_TLS_CA"
	kafkaSASLVar      = "SECKILL_KAFKA_SASL"
	kafkaUserVar      = "SECKILL_KAFKA_USER"
	kafkaPasswordVar  = "SECKILL_KAFKA_PASSWORD"
	memoryCapacityVar = "SECKILL_MEMORY_CAPACITY"
	listReliableVar   = "SECKILL_LIST_RELIABLE"
)

var memoryVariables = []Variable{
	{Name: memoryCapacityVar, Default: "`10000`",
		Summary: "memory backend: the channel's capacity",
		Meaning: "memory: the channel's capacity",
		Parse:   intSetting(10000, 1, 10_000_000)},
}

// checkMemory refuses a memory queue without a consumer in the process:
// the queue is this process's memory, which no other process can drain,
// and what it holds is gone when this one stops.
func checkMemory(c Config) error {
	if c.Queue == memqueue.Name && c.Consumers == 0 {
		return &configError{"SECKILL_CONSUMERS", "0", "SECKILL_QUEUE=memory needs a consumer in this process: its queue is this process's memory, which no other process can drain, so every order would stay queued and be lost at stop"}
	}
	return nil
}

var listVariables = []Variable{
	{Name: listReliableVar, Default: "`0`",
		Summary: "list backend: 1 for processing lists and the reaper",
		Meaning: "list: `1` for processing lists, heartbeats and the reaper",
		Parse:   boolSetting(false)},
}

var natsVariables = []Variable{
	{Name: natsURLVar, Default: "real servers: `nats://127.0.0.1:4222`; on the stand-ins a JetStream server embedded in the process",
		Summary: "nats backend: the NATS server (JetStream)",
		Meaning: "`nats`: the NATS server (JetStream enabled); its stream `<prefix>orders` (subjects `<prefix>orders.<voucher id>`), the dead-letter stream `<prefix>orders_dead` and the durable consumer `seckill-persisters` are created at start (`:` in `SECKILL_KEY_PREFIX` becomes `_`); unreachable: the start stops with one line",
		Parse:   brokerURL("nats://127.0.0.1:4222", "nats", "tls", "ws", "wss")},
	{Name: natsCredsVar, Default: "unset: none, or what the URL carries",
		Summary: "nats backend: a credentials file (user JWT and nkey seed)",
		Meaning: "`nats`: a NATS credentials file (a user JWT and its nkey seed) to connect with; a user and password or a token can also be written in `SECKILL_NATS_URL` (`nats://user:password@host:4222`), which is redacted wherever it is printed",
		Parse:   readableFile("cannot read the credentials file: ")},
}

var rabbitmqVariables = []Variable{
	{Name: amqpURLVar, Default: "real servers: `amqp://guest:guest@127.0.0.1:5672/`; on the stand-ins required (refused at start without it: nothing to embed)",
		Summary: "rabbitmq backend: the broker",
		Meaning: "`rabbitmq`: the broker; its quorum queue `<prefix>orders` (`x-delivery-limit` 20, dead-lettering at least once through the exchange `<prefix>orders_dead` to the queue of that name) is declared at start; unreachable: the start stops with one line. On one node a quorum queue has no fault tolerance: run three for that",
		Parse:   brokerURL("amqp://guest:guest@127.0.0.1:5672/", "amqp", "amqps")},
}

// checkRabbitMQ refuses the stand-ins without a broker: there is none to
// embed.
func checkRabbitMQ(c Config) error {
	if c.Queue == amqpqueue.Name && c.EmbeddedRedis() && c.EmbeddedSQL() && settingOf[string](c, amqpURLVar) == "" {
		return &configError{amqpURLVar, "", "SECKILL_QUEUE=rabbitmq needs a RabbitMQ to talk to, and the stand-ins have none to embed: set SECKILL_AMQP_URL (e.g. amqp://guest:guest@127.0.0.1:5672/)"}
	}
	return nil
}

var kafkaVariables = []Variable{
	{Name: kafkaBrokersVar, Default: "none: required (there is no Kafka to embed)",
		Summary: "kafka backend: the seed brokers, host:port comma-separated",
		Meaning: "`kafka`: the seed brokers, `host:port` comma-separated; the topics `<prefix>orders` (12 partitions, keyed by voucher) and `<prefix>orders_dead` are created at start when missing, and the consumer group is `<prefix>orders_persisters` (named from the prefix, as groups are the Kafka cluster's; session timeout 10 s: a killed process's partitions move after it); unreachable: the start stops with one line",
		Parse:   parseKafkaBrokers},
	{Name: kafkaTLSVar, Default: "`0`",
		Summary: "kafka backend: 1 for TLS to the brokers (the system's roots)",
		Meaning: "`kafka`: `1` connects to the brokers over TLS, verified against the system's roots (TLS 1.2 at least)",
		Parse:   boolSetting(false)},
	{Name: kafkaTLSCAVar, Default: "unset",
		Summary: "kafka backend: a PEM file of the CA the brokers' certificates chain to (implies TLS)",
		Meaning: "`kafka`: a PEM file of the certificate authorities the brokers' certificates are verified against, instead of the system's (implies TLS); unreadable, or no certificate in it: the start stops",
		Parse:   parseCertPool},
	{Name: kafkaSASLVar, Default: "unset: no SASL",
		Summary: "kafka backend: SASL mechanism, PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
		Meaning: "`kafka`: the SASL mechanism every connection authenticates with, `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512` (PLAIN only over TLS in production: it sends the password as is), with `SECKILL_KAFKA_USER` and `SECKILL_KAFKA_PASSWORD`; one of the three without the others stops the start",
		Parse:   parseSASLMechanism},
	{Name: kafkaUserVar, Default: "unset",
		Summary: "kafka backend: the SASL user",
		Meaning: "`kafka`: the SASL user (with `SECKILL_KAFKA_SASL`)"},
	{Name: kafkaPasswordVar, Default: "unset",
		Summary: "kafka backend: the SASL password (never logged)",
		Meaning: "`kafka`: the SASL password (with `SECKILL_KAFKA_SASL`); never logged"},
}

// checkKafka refuses kafka without its brokers (there is no Kafka to
// embed) and a SASL mechanism without its user and password, or either
// without the mechanism.
func checkKafka(c Config) error {
	if c.Queue == kafkaqueue.Name && len(settingOf[[]string](c, kafkaBrokersVar)) == 0 {
		return &configError{kafkaBrokersVar, "", "SECKILL_QUEUE=kafka needs the brokers (host:port, comma-separated); there is no Kafka to embed"}
	}
	mechanism, user, password := settingOf[string](c, kafkaSASLVar), settingOf[string](c, kafkaUserVar), settingOf[string](c, kafkaPasswordVar)
	if (mechanism != "" || user != "") && (mechanism == "" || user == "" || password == "") {
		return &configError{kafkaSASLVar, mechanism, "SASL needs the mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), SECKILL_KAFKA_USER and SECKILL_KAFKA_PASSWORD together"}
	}
	return nil
}

// kafkaSecurity is the TLS (nil: none) and SASL (nil: none) every Kafka
// connection uses.
func kafkaSecurity(c Config) (*tls.Config, sasl.Mechanism) {
	var t *tls.Config
	if roots := settingOf[*x509.CertPool](c, kafkaTLSCAVar); roots != nil {
		t = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	} else if settingOf[bool](c, kafkaTLSVar) {
		t = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	user, password := settingOf[string](c, kafkaUserVar), settingOf[string](c, kafkaPasswordVar)
	switch settingOf[string](c, kafkaSASLVar) {
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

// readableFile is a file's path, refused when the file cannot be read
// (why prefixes the error).
func readableFile(why string) func(string) (any, error) {
	return func(v string) (any, error) {
		if v == "" {
			return "", nil
		}
		if _, err := os.Stat(v); err != nil {
			return nil, errors.New(why + err.Error())
		}
		return v, nil
	}
}

// brokerURL reads an outside broker's URL: empty, or a URL of one of the
// schemes with a host (example shows one in the error, which shows the
// value without its credentials).
func brokerURL(example string, schemes ...string) func(string) (any, error) {
	return func(v string) (any, error) {
		if v == "" {
			return "", nil
		}
		u, err := url.Parse(v)
		if err != nil || u.Host == "" || !slices.Contains(schemes, u.Scheme) {
			return nil, &configError{"", redactURL(v), "want a URL such as " + example}
		}
		return v, nil
	}
}
