package server

import (
	"crypto/x509"
	"errors"
	"net/url"
	"os"
	"slices"
)

// The built-in backends' own variables (Backend.Variables): each backend
// declares what it reads, parsed at start, and reads it back typed
// (setting.of). Each backend's are in its file (backend_<name>.go).

// setting is a backend's variable, named, read back as the type its Parse
// gives (of): the name and the type are declared together, once.
type setting[T any] string

// of is the setting's value in c (T's zero value where none was parsed).
func (s setting[T]) of(c Config) T {
	v, _ := c.settings[string(s)].(T)
	return v
}

// The backends' settings.
const (
	natsURL        setting[string]         = "SECKILL_NATS_URL"
	natsCreds      setting[string]         = "SECKILL_NATS_CREDS"
	amqpURL        setting[string]         = "SECKILL_AMQP_URL"
	kafkaBrokers   setting[[]string]       = "SECKILL_KAFKA_BROKERS"
	kafkaTLS       setting[bool]           = "SECKILL_KAFKA_TLS"
	kafkaTLSCA     setting[*x509.CertPool] = "SECKILL_KAFKA_TLS_CA"
	kafkaSASL      setting[string]         = "SECKILL_KAFKA_SASL"
	kafkaUser      setting[string]         = "SECKILL_KAFKA_USER"
	kafkaPassword  setting[string]         = "SECKILL_KAFKA_PASSWORD"
	memoryCapacity setting[int]            = "SECKILL_MEMORY_CAPACITY"
	listReliable   setting[bool]           = "SECKILL_LIST_RELIABLE"
)

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
