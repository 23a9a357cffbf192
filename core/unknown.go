package core

import (
	"context"
	"errors"
	"sync"
	"time"
)

// UnknownVouchers remembers, briefly, the voucher ids the database does not
// have, so that requests for made-up ids (a scanner, a typo in a loop) cost
// the database one look-up per id per lifetime instead of one each. A
// voucher created meanwhile is forgotten here at once on this instance,
// and on the others by a nudge (the stock-back channel), or when the entry
// lapses: lifetime bounds how long an instance that missed the nudge keeps
// answering voucher_not_found for it (the contract allows 1 s).
//
// With a ceiling (HighestVoucher), an id above the highest voucher the
// database has is unknown without a look-up of its own: a scanner walking
// made-up ids costs the database one query for the highest id per
// lifetime, whatever the number of ids, instead of one per id. Vouchers
// created raise the ceiling at once (Forget: here, and on the others by
// the nudge), and a ceiling older than lifetime is read again before it
// refuses anything.
type UnknownVouchers struct {
	lifetime time.Duration
	now      func() time.Time
	highest  HighestVoucher

	mu         sync.Mutex
	generation uint64 // rises at every Forget and Clear
	until      map[int64]time.Time
	// ceiling is the highest voucher id known to exist, as of ceilingAt
	// (zero: not read since the start or the last Clear).
	ceiling   int64
	ceilingAt time.Time
	// reading is held while the ceiling is read, so a crowd of misses
	// shares one query.
	reading sync.Mutex
}

// HighestVoucher returns the highest voucher id the database holds (0:
// none).
type HighestVoucher func(ctx context.Context) (int64, error)

// DefaultUnknownLifetime keeps a voucher created on another instance
// unknown here for less than the contract's second, should the nudge be
// lost.
const DefaultUnknownLifetime = 900 * time.Millisecond

// NewUnknownVouchers remembers each unknown id for lifetime (0: never),
// and, with highest, every id above the highest voucher (nil: no ceiling).
func NewUnknownVouchers(lifetime time.Duration, highest HighestVoucher) *UnknownVouchers {
	return &UnknownVouchers{lifetime: lifetime, highest: highest, now: time.Now, until: map[int64]time.Time{}}
}

// Unknown reports whether the database was found without the voucher less
// than lifetime ago (and nothing was created since), or the id is above a
// ceiling read less than lifetime ago. A nil set knows nothing.
func (u *UnknownVouchers) Unknown(voucherID int64) bool {
	if u == nil {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.aboveFreshCeilingLocked(voucherID) {
		return true
	}
	t, ok := u.until[voucherID]
	return ok && u.now().Before(t)
}

func (u *UnknownVouchers) aboveFreshCeilingLocked(voucherID int64) bool {
	return u.highest != nil && !u.ceilingAt.IsZero() && u.now().Sub(u.ceilingAt) < u.lifetime && voucherID > u.ceiling
}

// aboveCeiling reports whether the id is above the highest voucher, reading
// the ceiling again when it is older than lifetime. A failed read refuses
// nothing: the look-up that follows meets the same database.
func (u *UnknownVouchers) aboveCeiling(ctx context.Context, voucherID int64) bool {
	if u.highest == nil || u.lifetime <= 0 {
		return false
	}
	u.mu.Lock()
	fresh := !u.ceilingAt.IsZero() && u.now().Sub(u.ceilingAt) < u.lifetime
	below := voucherID <= u.ceiling
	u.mu.Unlock()
	if below {
		return false
	}
	if fresh {
		return true
	}
	u.reading.Lock()
	defer u.reading.Unlock()
	u.mu.Lock()
	if !u.ceilingAt.IsZero() && u.now().Sub(u.ceilingAt) < u.lifetime {
		// Read by another caller while this one waited.
		defer u.mu.Unlock()
		return voucherID > u.ceiling
	}
	generation := u.generation
	u.mu.Unlock()
	read := u.now()
	h, err := u.highest(ctx)
	if err != nil {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ceiling = max(u.ceiling, h)
	if u.generation == generation {
		// A Clear during the read may have dropped a nudge: only a
		// read that saw no Clear counts as fresh.
		u.ceilingAt = read
	}
	return voucherID > u.ceiling
}

// RuledOut reports whether voucherID is remembered unknown or lies above
// the highest voucher (the ceiling read at most once a lifetime): what
// Find answers without a look-up, remembering nothing new.
func (u *UnknownVouchers) RuledOut(ctx context.Context, voucherID int64) bool {
	return u != nil && (u.Unknown(voucherID) || u.aboveCeiling(ctx, voucherID))
}

// Find looks the voucher up with find unless it is remembered unknown, and
// remembers it when find reports ErrVoucherNotFound. A lookup that started
// before a Forget is not remembered after it: it may have missed the
// voucher created then.
func (u *UnknownVouchers) Find(ctx context.Context, voucherID int64, find func(context.Context, int64) (Voucher, error)) (Voucher, error) {
	if u == nil {
		return find(ctx, voucherID)
	}
	if u.Unknown(voucherID) || u.aboveCeiling(ctx, voucherID) {
		return Voucher{}, ErrVoucherNotFound
	}
	u.mu.Lock()
	generation := u.generation
	u.mu.Unlock()
	v, err := find(ctx, voucherID)
	if errors.Is(err, ErrVoucherNotFound) && u.lifetime > 0 {
		u.mu.Lock()
		if u.generation == generation {
			if len(u.until) >= maxMemoEntries {
				u.sweepLocked()
			}
			u.until[voucherID] = u.now().Add(u.lifetime)
		}
		u.mu.Unlock()
	}
	return v, err
}

func (u *UnknownVouchers) sweepLocked() {
	now := u.now()
	for id, t := range u.until {
		if !now.Before(t) {
			delete(u.until, id)
		}
	}
	if len(u.until) >= maxMemoEntries {
		clear(u.until) // all live: start over rather than grow
	}
}

// Forget drops the id: a voucher of that id was just created (the
// ceiling rises to it).
func (u *UnknownVouchers) Forget(voucherID int64) {
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.generation++
	delete(u.until, voucherID)
	u.ceiling = max(u.ceiling, voucherID)
}

// Clear drops everything (a reconnect of the nudge channel: nudges may
// have been missed); the ceiling is read again before it refuses an id.
func (u *UnknownVouchers) Clear() {
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.generation++
	clear(u.until)
	u.ceilingAt = time.Time{}
}
