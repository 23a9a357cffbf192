package server

import (
	"context"
	"fmt"

	"github.com/seckill-lab/seckill/adapters/natsqueue"
	"github.com/seckill-lab/seckill/core"
)

// natsBackend is nats: NATS JetStream, an outside broker fed through the relay.
var natsBackend = Backend{
	Name:      natsqueue.Name,
	Iteration: "NATS JetStream, fed by a relay from a Redis outbox the script writes; a durable pull consumer, ack after the commit",
	Broker:    openNATS,
	Variables: natsVariables,
}

var natsVariables = []Variable{
	{Name: string(natsURL), Default: "real servers: `nats://127.0.0.1:4222`; on the stand-ins a JetStream server embedded in the process",
		Summary: "nats backend: the NATS server (JetStream)",
		Meaning: "`nats`: the NATS server (JetStream enabled); its stream `<prefix>orders` (subjects `<prefix>orders.<voucher id>`), the dead-letter stream `<prefix>orders_dead` and the durable consumer `seckill-persisters` are created at start (`:` in `SECKILL_KEY_PREFIX` becomes `_`); unreachable: the start stops with one line",
		Parse:   brokerURL("nats://127.0.0.1:4222", "nats", "tls", "ws", "wss")},
	{Name: string(natsCreds), Default: "unset: none, or what the URL carries",
		Summary: "nats backend: a credentials file (user JWT and nkey seed)",
		Meaning: "`nats`: a NATS credentials file (a user JWT and its nkey seed) to connect with; a user and password or a token can also be written in `SECKILL_NATS_URL` (`nats://user:password@host:4222`), which is redacted wherever it is printed",
		Parse:   readableFile("cannot read the credentials file: ")},
}

// openNATS opens the JetStream backend on SECKILL_NATS_URL, or, with the
// stand-ins and no URL, on a NATS server embedded in this process.
func openNATS(ctx context.Context, d Deps) (core.Queue, error) {
	cfg := natsqueue.Config{Stream: natsqueue.StreamName(d.Config.KeyPrefix),
		ConsumerPrefix: d.Config.ConsumerName, AckWait: d.Config.ClaimMinIdle, Signer: d.OrderSigner(),
		Credentials: natsCreds.of(d.Config)}
	url := natsURL.of(d.Config)
	if url == "" && d.Config.EmbeddedRedis() && d.Config.EmbeddedSQL() {
		q, err := natsqueue.NewEmbedded(ctx, cfg, d.Log)
		if err != nil {
			return nil, err
		}
		d.Log.Info("NATS: a JetStream server embedded in this process (a stand-in: its orders do not outlive the process); set SECKILL_NATS_URL for a real one")
		return q, nil
	}
	if url == "" {
		url = natsqueue.DefaultURL
	}
	cfg.URL = url
	q, err := natsqueue.New(ctx, cfg, d.Log)
	if err != nil {
		return nil, fmt.Errorf("SECKILL_NATS_URL (%s): %w", redactURL(url), err)
	}
	return q, nil
}
