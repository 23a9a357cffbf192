package core

import (
	"context"
	"sync"
	"time"
)

// AnswerMemo keeps, per voucher, the refusals of the reservation that
// cannot change for a while, so that an instance answers them without a
// round trip: a sale is mostly its sold-out phase, demand being many times
// the stock, and until stock comes back every answer is the same.
//
//   - Sold out: for Lifetime, or until the stock comes back (StockBack here,
//     a nudge from another instance, a rebuild), whichever is first.
//   - Not started: for Lifetime, and never within a second of the opening,
//     judged on the live store's clock (the script reports the time to the
//     opening by its own clock, so no local clock enters).
//   - Ended: for Lifetime, once the sale closed more than a second ago.
//   - Already purchased, per shopper: for Lifetime, with the order id the
//     409 carries. A buyer's mark goes away only through a release (a
//     cancellation or expiry, a failed hand-off, a rebuild, a Redis that
//     lost it), and each of those forgets the voucher here and nudges
//     every instance, or starts a new incarnation.
//
// It only ever refuses, so it cannot oversell. An entry made in another
// incarnation of the live store is ignored. Its worst case is Lifetime:
// stock that comes back while a nudge is lost is sold again by every
// instance at most Lifetime later.
type AnswerMemo struct {
	lifetime time.Duration
	nudger   StockNudger
	now      func() time.Time

	mu sync.RWMutex
	// generation rises at every Forget and Clear: an answer fetched before
	// one is not remembered after it.
	generation uint64
	entries    map[int64]memoEntry
	// buyers are the shoppers known to hold an order, per voucher.
	buyers     map[int64]map[int64]buyerEntry
	buyerCount int
}

type buyerEntry struct {
	orderID     int64
	until       time.Time
	incarnation string
}

type memoEntry struct {
	result      ReservationResult
	until       time.Time
	incarnation string
}

// StockNudger tells every instance that a voucher's stock may have come
// back, so that their memos forget it at once (a Redis pub/sub channel).
type StockNudger interface {
	NudgeStockBack(ctx context.Context, voucherID int64) error
}

// edgeMargin keeps window answers off the window's edges: clocks and
// round trips are not that exact.
const edgeMargin = time.Second

// NewAnswerMemo builds a memo whose entries live at most lifetime (0: it
// remembers nothing). nudger may be nil (a single instance, or no way to
// reach the others: lifetime alone bounds them).
func NewAnswerMemo(lifetime time.Duration, nudger StockNudger) *AnswerMemo {
	return &AnswerMemo{lifetime: lifetime, nudger: nudger, now: time.Now, entries: map[int64]memoEntry{},
		buyers: map[int64]map[int64]buyerEntry{}}
}

// Generation is read before a reservation and handed to Remember with its
// answer.
func (m *AnswerMemo) Generation() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.generation
}

// Answer is the remembered refusal for the voucher, if one holds now in
// this incarnation.
func (m *AnswerMemo) Answer(voucherID int64, incarnation string) (ReservationResult, bool) {
	m.mu.RLock()
	e, ok := m.entries[voucherID]
	m.mu.RUnlock()
	if !ok || e.incarnation != incarnation || !m.now().Before(e.until) {
		return 0, false
	}
	return e.result, true
}

// Buyer is the order the shopper is remembered to hold for the voucher,
// in this incarnation: the reservation would answer already purchased
// with it.
func (m *AnswerMemo) Buyer(voucherID, userID int64, incarnation string) (int64, bool) {
	m.mu.RLock()
	e, ok := m.buyers[voucherID][userID]
	m.mu.RUnlock()
	if !ok || e.incarnation != incarnation || !m.now().Before(e.until) {
		return 0, false
	}
	return e.orderID, true
}

// RememberBuyer keeps that the shopper holds the order (a reservation
// made, or already purchased), if nothing was forgotten since generation
// was read.
func (m *AnswerMemo) RememberBuyer(voucherID, userID, orderID int64, incarnation string, generation uint64) {
	if m.lifetime <= 0 || orderID <= 0 {
		return
	}
	until := m.now().Add(m.lifetime)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.generation != generation {
		return
	}
	of := m.buyers[voucherID]
	if of == nil {
		of = map[int64]buyerEntry{}
		m.buyers[voucherID] = of
	}
	if _, ok := of[userID]; !ok {
		m.buyerCount++
	}
	of[userID] = buyerEntry{orderID: orderID, until: until, incarnation: incarnation}
	if m.buyerCount > maxMemoBuyers {
		m.sweepBuyersLocked()
	}
}

// maxMemoBuyers bounds the buyers kept: a lifetime's worth of a busy sale
// (200 ms of 100,000 reservations a second is 20,000). Past it, expired
// entries are swept, and if all are live, forgotten.
const maxMemoBuyers = 1 << 16

func (m *AnswerMemo) sweepBuyersLocked() {
	now := m.now()
	for v, of := range m.buyers {
		for u, e := range of {
			if !now.Before(e.until) {
				delete(of, u)
				m.buyerCount--
			}
		}
		if len(of) == 0 {
			delete(m.buyers, v)
		}
	}
	if m.buyerCount > maxMemoBuyers {
		clear(m.buyers)
		m.buyerCount = 0
	}
}

// Remember keeps a reservation's answer if it cannot change for a while
// and nothing was forgotten since generation was read.
func (m *AnswerMemo) Remember(voucherID int64, incarnation string, generation uint64, r Reservation) {
	if m.lifetime <= 0 {
		return
	}
	ttl := m.lifetime
	switch r.Result {
	case SoldOut:
	case NotStarted:
		if r.WindowEdge <= edgeMargin {
			return
		}
		ttl = min(ttl, r.WindowEdge-edgeMargin)
	case Ended:
		if r.WindowEdge < edgeMargin {
			return
		}
	default:
		return
	}
	until := m.now().Add(ttl)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.generation != generation {
		return
	}
	m.entries[voucherID] = memoEntry{result: r.Result, until: until, incarnation: incarnation}
	if len(m.entries) > maxMemoEntries {
		m.sweepLocked()
	}
}

// maxMemoEntries bounds the map against requests for ever new voucher
// ids; past it, expired entries are swept.
const maxMemoEntries = 4096

func (m *AnswerMemo) sweepLocked() {
	now := m.now()
	for v, e := range m.entries {
		if !now.Before(e.until) {
			delete(m.entries, v)
		}
	}
	if len(m.entries) > maxMemoEntries {
		clear(m.entries) // all live: start over rather than grow
	}
}

// Forget drops what is remembered of the voucher (its stock came back).
func (m *AnswerMemo) Forget(voucherID int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.generation++
	delete(m.entries, voucherID)
	m.buyerCount -= len(m.buyers[voucherID])
	delete(m.buyers, voucherID)
}

// Clear drops everything (a reconnect, when nudges may have been missed).
func (m *AnswerMemo) Clear() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.generation++
	clear(m.entries)
	clear(m.buyers)
	m.buyerCount = 0
}

// StockBack forgets the voucher here and nudges every other instance to.
// A nudge that fails is logged by the caller's choice and otherwise
// harmless: Lifetime still bounds the others.
func (m *AnswerMemo) StockBack(ctx context.Context, voucherID int64) error {
	m.Forget(voucherID)
	if m.nudger == nil {
		return nil
	}
	return m.nudger.NudgeStockBack(ctx, voucherID)
}
