package streamgroup

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill-lab/seckill/adapters/internal/streamid"
	"github.com/seckill-lab/seckill/core"
)

// Trim drops entries every group has acknowledged and that are older than
// TrimRetention. It never uses MAXLEN, which drops the oldest entries
// whether acked or not: the bound is the oldest entry still pending in any
// group, or the first one not yet delivered. It returns how many entries
// were removed.
func (q *Queue) Trim(ctx context.Context) (int64, error) {
	groups, err := q.rdb.XInfoGroups(ctx, q.cfg.Stream).Result()
	if err != nil {
		return 0, fmt.Errorf("streamgroup: xinfo groups: %w", err)
	}
	if len(groups) == 0 {
		return 0, nil
	}
	// MINID removes entries strictly below the bound; "+" stands for no
	// bound yet.
	bound := "+"
	if q.cfg.TrimRetention > 0 {
		bound = streamid.At(time.Now().Add(-q.cfg.TrimRetention))
	}
	for _, g := range groups {
		// Entries up to last-delivered-id were delivered; those after it
		// were not and must stay. Keep last-delivered itself too (MINID
		// removes only entries strictly below the bound).
		if g.LastDeliveredID != "" && streamid.Less(g.LastDeliveredID, bound) {
			bound = g.LastDeliveredID
		}
		if g.Pending > 0 {
			p, err := q.rdb.XPending(ctx, q.cfg.Stream, g.Name).Result()
			if err != nil {
				return 0, fmt.Errorf("streamgroup: xpending %s: %w", g.Name, err)
			}
			if p.Count > 0 && streamid.Less(p.Lower, bound) {
				bound = p.Lower
			}
		}
	}
	if bound == "+" {
		return 0, nil // no group has read anything yet
	}
	n, err := q.rdb.XTrimMinID(ctx, q.cfg.Stream, bound).Result()
	if err != nil {
		return 0, fmt.Errorf("streamgroup: xtrim: %w", err)
	}
	return n, nil
}

// Stats is the group's core.StatsReporter: Depth is the group's
// lag in entries (Redis 7), Pending its pending entries, OldestPending the
// age of the oldest of them, Lag the time between the newest entry and the
// last one delivered to the group.
func (q *Queue) Stats(ctx context.Context) (core.QueueStats, error) {
	s := core.UnknownStats
	groups, err := q.rdb.XInfoGroups(ctx, q.cfg.Stream).Result()
	if err != nil {
		return s, fmt.Errorf("streamgroup: stats: %w", err)
	}
	for _, g := range groups {
		if g.Name != q.cfg.Group {
			continue
		}
		s.Depth, s.Pending = g.Lag, g.Pending
		if g.EntriesRead == 0 && g.LastDeliveredID != "0-0" {
			// The server does not track entries-read (before Redis 7, or
			// miniredis), so its lag is not the undelivered count: count
			// the entries after last-delivered-id, up to a cap.
			after, err := q.rdb.XRangeN(ctx, q.cfg.Stream, "("+g.LastDeliveredID, "+", depthCountCap).Result()
			if err != nil {
				return s, fmt.Errorf("streamgroup: stats: %w", err)
			}
			s.Depth = int64(len(after))
		}
		last, err := q.rdb.XRevRangeN(ctx, q.cfg.Stream, "+", "-", 1).Result()
		if err != nil {
			return s, fmt.Errorf("streamgroup: stats: %w", err)
		}
		s.Lag = 0
		if len(last) == 1 && g.LastDeliveredID != "" && streamid.Less(g.LastDeliveredID, last[0].ID) {
			// Nothing delivered yet ("0-0", or "0" on the stand-in: a group
			// made before the first entry): measured from the first entry,
			// not from 1970.
			from, err := q.firstAfter(ctx, g.LastDeliveredID)
			if err != nil {
				return s, err
			}
			s.Lag = streamid.Time(last[0].ID).Sub(streamid.Time(from))
		}
		s.OldestPending = 0
		if g.Pending > 0 {
			p, err := q.rdb.XPending(ctx, q.cfg.Stream, g.Name).Result()
			if err != nil {
				return s, fmt.Errorf("streamgroup: stats: %w", err)
			}
			s.OldestPending = time.Since(streamid.Time(p.Lower))
		}
	}
	dead, err := q.rdb.XLen(ctx, q.cfg.DeadLetterStream).Result()
	if err != nil {
		return s, fmt.Errorf("streamgroup: stats: %w", err)
	}
	s.DeadLetters = dead
	return s, nil
}

// depthCountCap bounds the entries counted when the server cannot report
// a group's lag.
const depthCountCap = 10000

// firstAfter is the id the group's lag is measured from: the last one
// delivered, or where nothing was, the stream's first entry.
func (q *Queue) firstAfter(ctx context.Context, lastDelivered string) (string, error) {
	if streamid.Time(lastDelivered).UnixMilli() > 0 {
		return lastDelivered, nil
	}
	first, err := q.rdb.XRangeN(ctx, q.cfg.Stream, "-", "+", 1).Result()
	if err != nil {
		return "", fmt.Errorf("streamgroup: stats: %w", err)
	}
	if len(first) == 0 {
		return lastDelivered, nil
	}
	return first[0].ID, nil
}
