// Package redisclock keeps an instance's estimate of Redis's clock. The
// scripts judge time on Redis's clock (a request's deadline, a voucher's
// window, a room's admissions), so whatever the instance judges by the
// same rules it judges on the same clock: its own clock plus the offset
// measured here. An instance whose clock was two seconds behind Redis's
// answered every seckill 503 (its deadlines had passed by Redis's clock),
// and one thirty seconds ahead refused valid admissions.
//
// The offset is measured with TIME every few seconds (the sample of the
// shortest round trip of three: its error is at most half that trip), and
// an instance off Redis's clock by more than a second is warned of: it
// still sells, but its logs and its database records (an order's payBy)
// are on its own clock.
package redisclock

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
)

// Interval is how often the offset is measured.
const Interval = 2 * time.Second

// WarnAt is the offset past which the instance is warned of.
const WarnAt = time.Second

// Clock is Redis's clock as this instance estimates it.
type Clock struct {
	rdb    redis.UniversalClient
	log    *slog.Logger
	offset atomic.Int64 // nanoseconds, Redis's less this instance's
	warned atomic.Bool
	now    func() time.Time
}

// New estimates rdb's clock; the offset is zero until Measure.
func New(rdb redis.UniversalClient, log *slog.Logger) *Clock {
	return &Clock{rdb: rdb, log: log, now: time.Now}
}

// Now is Redis's time now, as estimated.
func (c *Clock) Now() time.Time { return c.now().Add(c.Offset()) }

// Offset is Redis's clock less this instance's.
func (c *Clock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Measure takes three TIME samples and keeps the offset of the one with
// the shortest round trip, and warns (once a crossing) when it is past
// WarnAt.
func (c *Clock) Measure(ctx context.Context) error {
	best, bestTrip := time.Duration(0), time.Duration(-1)
	for range 3 {
		before := c.now()
		t, err := c.rdb.Time(ctx).Result()
		if err != nil {
			return fmt.Errorf("redisclock: TIME: %w", err)
		}
		after := c.now()
		trip := after.Sub(before)
		if bestTrip < 0 || trip < bestTrip {
			best, bestTrip = t.Sub(before.Add(trip/2)), trip
		}
	}
	c.offset.Store(int64(best))
	off := best.Abs() > WarnAt
	if off && !c.warned.Swap(true) {
		c.log.Warn("this instance's clock is off Redis's: the sale judges time on Redis's clock and goes on, but logs and the database's records (payBy) are on this one's; set its clock (NTP)",
			"offset", best.Round(time.Millisecond).String())
	} else if !off && c.warned.Swap(false) {
		c.log.Info("this instance's clock is back within a second of Redis's", "offset", best.Round(time.Millisecond).String())
	}
	return nil
}

// Duty measures the offset every Interval.
func (c *Clock) Duty() core.Duty {
	return core.Duty{Name: "redis clock", Every: Interval, Do: c.Measure}
}
