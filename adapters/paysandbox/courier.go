package paysandbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Courier carries the sandbox's notices to the shop apart from the
// shopper's step: those delayed (until past the order's deadline) and
// those the shop did not take at once (it answered 503: a provider tries
// again). It keeps them in memory: an instance that stops loses what it
// still carried, as a provider's notice is lost; the status query still
// tells.
type Courier struct {
	deliver func(ctx context.Context, body []byte, signature string) error
	log     *slog.Logger

	mu      sync.Mutex
	parcels []parcel
}

type parcel struct {
	at              time.Time
	body, signature []byte
	tries           int
}

// courierTries bounds the deliveries of one notice; retryAfter is the
// wait between two.
const (
	courierTries = 5
	retryAfter   = time.Second
)

// NewCourier returns a courier that hands notices to deliver (the shop's
// notification path).
func NewCourier(deliver func(ctx context.Context, body []byte, signature string) error, log *slog.Logger) *Courier {
	return &Courier{deliver: deliver, log: log}
}

// Later carries a notice at at (or again, after a failed delivery).
func (c *Courier) Later(at time.Time, body []byte, signature string) {
	c.later(parcel{at: at, body: body, signature: []byte(signature)})
}

func (c *Courier) later(p parcel) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parcels = append(c.parcels, p)
}

// Carrying is how many notices the courier holds.
func (c *Courier) Carrying() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.parcels)
}

// Duty delivers the notices due, five times a second.
func (c *Courier) Duty() core.Duty {
	return core.Duty{Name: "sandbox: deliver its notices", Every: 200 * time.Millisecond, Do: c.deliverDue}
}

func (c *Courier) deliverDue(ctx context.Context) error {
	now := time.Now()
	c.mu.Lock()
	var due []parcel
	kept := c.parcels[:0]
	for _, p := range c.parcels {
		if now.Before(p.at) {
			kept = append(kept, p)
		} else {
			due = append(due, p)
		}
	}
	c.parcels = kept
	c.mu.Unlock()
	for _, p := range due {
		if err := c.deliver(ctx, p.body, string(p.signature)); err != nil {
			if p.tries++; p.tries < courierTries && ctx.Err() == nil {
				p.at = now.Add(retryAfter)
				c.later(p)
				continue
			}
			c.log.Warn("sandbox: a notice the shop did not take is lost; its status query still tells", "err", err)
		}
	}
	return nil
}
