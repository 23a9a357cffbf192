package redisreserve

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// StockNudges is the pub/sub channel on which instances tell each other
// that a voucher's stock may have come back (a release, a rebuild), so that
// every instance's core.AnswerMemo forgets the voucher at once instead of
// when its entry lapses. It implements core.StockNudger.
//
// Plain PUBLISH, not a sharded channel: a Redis Cluster carries it to
// every node, so one subscription per instance hears every voucher.
type StockNudges struct {
	rdb     redis.UniversalClient
	channel string
	log     *slog.Logger
}

// NewStockNudges uses the channel prefix + "stock-back".
func NewStockNudges(rdb redis.UniversalClient, prefix string, log *slog.Logger) *StockNudges {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &StockNudges{rdb: rdb, channel: prefix + "stock-back", log: log}
}

// Channel is the channel's name.
func (n *StockNudges) Channel() string { return n.channel }

// NudgeStockBack publishes the voucher id.
func (n *StockNudges) NudgeStockBack(ctx context.Context, voucherID int64) error {
	return n.rdb.Publish(ctx, n.channel, strconv.FormatInt(voucherID, 10)).Err()
}

// changedMark starts the nudge of a voucher an operator changed.
const changedMark = "changed:"

// NudgeChanged publishes that an operator changed the voucher (its pause,
// its window): every instance forgets what it keeps of it.
func (n *StockNudges) NudgeChanged(ctx context.Context, voucherID int64) error {
	return n.rdb.Publish(ctx, n.channel, changedMark+strconv.FormatInt(voucherID, 10)).Err()
}

// Nudged are what a listener does with the nudges: Forget a voucher
// whose stock came back, Changed one an operator changed (its answers
// are forgotten too), Reset all (nudges may have been missed).
type Nudged struct {
	Forget, Changed func(voucherID int64)
	Reset           func()
}

// Listen hands each nudge to its function until ctx ends. It calls Reset
// each time the subscription starts or starts again after a lost
// connection, and when it fails: nudges sent while nobody listened are
// missed, so everything remembered is in doubt.
func (n *StockNudges) Listen(ctx context.Context, on Nudged) {
	ps := n.rdb.Subscribe(ctx, n.channel)
	defer ps.Close()
	// Receive blocks in a read that ctx does not interrupt; closing the
	// subscription does.
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()
	for {
		msg, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			on.Reset()
			n.log.Warn("stock nudges: subscription lost; answers from memory lapse on their own until it is back", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond): // go-redis reconnects on the next Receive
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			on.Reset()
		case *redis.Message:
			if id, changed := strings.CutPrefix(m.Payload, changedMark); changed {
				if v, err := strconv.ParseInt(id, 10, 64); err == nil {
					on.Changed(v)
				}
			} else if v, err := strconv.ParseInt(m.Payload, 10, 64); err == nil {
				on.Forget(v)
			}
		}
	}
}
