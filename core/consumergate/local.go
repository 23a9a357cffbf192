package consumergate

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/seckill-lab/seckill/core"
)

// Local is a Board within one process: the setting, the acks and the cap's
// rate kept in memory. It is the conformance suite's, and a Truth of its
// own (it never loses the setting).
type Local struct {
	mu      sync.Mutex
	setting core.ConsumerSetting
	acks    map[string]int64
	limit   *rate.Limiter
}

// NewLocal is a Local, open.
func NewLocal() *Local {
	return &Local{acks: map[string]int64{}, limit: rate.NewLimiter(rate.Inf, 1)}
}

// Set writes a new setting (its version one more) and returns it.
func (l *Local) Set(paused bool, perSecond int) core.ConsumerSetting {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setting = core.ConsumerSetting{Paused: paused, PerSecond: perSecond, Version: l.setting.Version + 1}
	return l.setting
}

// Acked is the version instance last acked.
func (l *Local) Acked(instance string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks[instance]
}

// Read implements Board.
func (l *Local) Read(context.Context) (core.ConsumerSetting, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.setting, true, nil
}

// Restore implements Board: a Local never loses its setting.
func (l *Local) Restore(context.Context, core.ConsumerSetting) error { return nil }

// ConsumerSetting implements Truth.
func (l *Local) ConsumerSetting(ctx context.Context) (core.ConsumerSetting, error) {
	s, _, err := l.Read(ctx)
	return s, err
}

// Ack implements Board.
func (l *Local) Ack(_ context.Context, instance string, version int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks[instance] = version
	return nil
}

// Take implements Board with a token bucket of this process's.
func (l *Local) Take(_ context.Context, perSecond, burst, n int) (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.limit.Limit() != rate.Limit(perSecond) || l.limit.Burst() != burst {
		l.limit = rate.NewLimiter(rate.Limit(perSecond), burst)
	}
	now := time.Now()
	r := l.limit.ReserveN(now, n)
	if !r.OK() {
		return time.Second / time.Duration(perSecond), nil
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, nil
	}
	return 0, nil
}
