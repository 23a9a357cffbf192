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
type UnknownVouchers struct {
	lifetime time.Duration
	now      func() time.Time

	mu         sync.Mutex
	generation uint64 // rises at every Forget and Clear
	until      map[int64]time.Time
}

// DefaultUnknownLifetime keeps a voucher created on another instance
// unknown here for less than the contract's second, should the nudge be
// lost.
const DefaultUnknownLifetime = 900 * time.Millisecond

// NewUnknownVouchers remembers each unknown id for lifetime (0: never).
func NewUnknownVouchers(lifetime time.Duration) *UnknownVouchers {
	return &UnknownVouchers{lifetime: lifetime, now: time.Now, until: map[int64]time.Time{}}
}

// Unknown reports whether the database was found without the voucher less
// than lifetime ago (and nothing was created since). A nil set knows
// nothing.
func (u *UnknownVouchers) Unknown(voucherID int64) bool {
	if u == nil {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.until[voucherID]
	return ok && u.now().Before(t)
}

// Find looks the voucher up with find unless it is remembered unknown, and
// remembers it when find reports ErrVoucherNotFound. A lookup that started
// before a Forget is not remembered after it: it may have missed the
// voucher created then.
func (u *UnknownVouchers) Find(ctx context.Context, voucherID int64, find func(context.Context, int64) (Voucher, error)) (Voucher, error) {
	if u == nil {
		return find(ctx, voucherID)
	}
	if u.Unknown(voucherID) {
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

// Forget drops the id: a voucher of that id was just created.
func (u *UnknownVouchers) Forget(voucherID int64) {
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.generation++
	delete(u.until, voucherID)
}

// Clear drops everything (a reconnect of the nudge channel: nudges may
// have been missed).
func (u *UnknownVouchers) Clear() {
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.generation++
	clear(u.until)
}
