package core

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Voucher is a seckill voucher: a limited stock sold inside a time window.
// Values are in the smallest currency unit.
type Voucher struct {
	ID          int64
	Title       string
	PayValue    int64
	ActualValue int64
	Stock       int64
	BeginAt     time.Time
	EndAt       time.Time
	// Buckets splits a hot voucher's live stock over this many buckets,
	// each on its own shard (so on a Redis Cluster on several masters),
	// a shopper's requests going to one bucket by user id (BucketOf).
	// 0 and 1: one, the voucher's own keys. Fixed at creation.
	Buckets int
	// Room, if set, sells the voucher through a waiting room (nil: the
	// shoppers race at the opening, as before rooms).
	Room *Room
	// Pause is who paused the sale, if anyone: no reservation succeeds
	// while it is not NotPaused (the reservation itself refuses).
	Pause Pause
}

// Pause says whether, and by whom, a voucher's sale is paused.
type Pause uint8

const (
	NotPaused Pause = iota
	// PausedByOperator: an operator paused this voucher.
	PausedByOperator
	// PausedBySwitch: the kill switch paused every voucher; its resume
	// resumes these, not those an operator paused.
	PausedBySwitch
)

// Paused reports whether the voucher's sale is paused.
func (v Voucher) Paused() bool { return v.Pause != NotPaused }

// SaleState is a voucher's sale as a shopper sees it.
type SaleState string

const (
	StateNotStarted SaleState = "not_started"
	StateOnSale     SaleState = "on_sale"
	StatePaused     SaleState = "paused"
	StateSoldOut    SaleState = "sold_out"
	StateEnded      SaleState = "ended"
)

// StateAt is the voucher's sale state at now with remaining units left:
// ended and not started before paused (a paused sale that has ended is
// ended), paused before sold out (a paused sale's units may come back and
// be sold once it resumes, but not now).
func (v Voucher) StateAt(now time.Time, remaining int64) SaleState {
	switch {
	case !now.Before(v.EndAt):
		return StateEnded
	case now.Before(v.BeginAt):
		if v.Paused() {
			return StatePaused
		}
		return StateNotStarted
	case v.Paused():
		return StatePaused
	case remaining <= 0:
		return StateSoldOut
	}
	return StateOnSale
}

// BucketCount is v.Buckets, 1 when unset.
func (v Voucher) BucketCount() int { return max(v.Buckets, 1) }

// VoucherSummary is a voucher as an operator's list shows it: Stock is
// the database's stock column (units neither persisted as a live order nor
// given back), and its orders by state.
type VoucherSummary struct {
	Voucher
	Unpaid, Paid, Cancelled, Refunded int64
}

// MaxStock bounds a voucher's stock so that Redis and SQL integers agree.
const MaxStock = 1_000_000_000

// MaxValue bounds payValue and actualValue (minor units): sums over a
// sale's orders stay far inside every integer type on the way.
const MaxValue = 1_000_000_000_000

// MaxBuckets bounds Voucher.Buckets (a store may allow fewer: one bucket
// per shard, BucketBoard).
const MaxBuckets = 64

// MaxTitleRunes caps a title's length in characters (the column holds 255
// bytes: 64 four-byte characters fit whatever the title is).
const MaxTitleRunes = 64

// The sale window must lie in these years, read in UTC: a time with an
// offset can name year 9999 and be year 10000 in UTC, which no store nor
// RFC 3339 reader takes back.
var (
	EarliestSaleTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	LatestSaleTime   = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Validate reports the first problem with a voucher an admin wants to
// create; the message names the field.
func (v Voucher) Validate() error {
	if err := validateTitle(v.Title); err != nil {
		return err
	}
	switch {
	case v.PayValue < 0 || v.PayValue > MaxValue:
		return E(CodeBadRequest, fmt.Sprintf("payValue must be from 0 to %d", int64(MaxValue)))
	case v.ActualValue < 0 || v.ActualValue > MaxValue:
		return E(CodeBadRequest, fmt.Sprintf("actualValue must be from 0 to %d", int64(MaxValue)))
	case v.PayValue > v.ActualValue:
		return E(CodeBadRequest, "payValue must not exceed actualValue (what the shopper pays, for what the voucher is worth)")
	case v.Stock <= 0 || v.Stock > MaxStock:
		return E(CodeBadRequest, "stock must be between 1 and 1000000000")
	case v.Buckets < 0 || v.Buckets > MaxBuckets:
		return E(CodeBadRequest, fmt.Sprintf("buckets must be from 1 to %d", MaxBuckets))
	}
	return v.ValidateWindow()
}

// ValidateWindow reports the first problem with a voucher's window (and
// its room's, which lies in it): what an operator moving it must keep.
func (v Voucher) ValidateWindow() error {
	switch {
	case v.BeginAt.IsZero():
		return E(CodeBadRequest, "beginTime is required")
	case v.EndAt.IsZero():
		return E(CodeBadRequest, "endTime is required")
	case !inSaleRange(v.BeginAt):
		return E(CodeBadRequest, "beginTime must be in UTC years 2000 to 2199")
	case !inSaleRange(v.EndAt):
		return E(CodeBadRequest, "endTime must be in UTC years 2000 to 2199")
	case !v.EndAt.After(v.BeginAt):
		return E(CodeBadRequest, "endTime must be after beginTime")
	case v.Room != nil:
		return v.Room.validate(v.BeginAt)
	}
	return nil
}

func inSaleRange(t time.Time) bool {
	u := t.UTC()
	return !u.Before(EarliestSaleTime) && u.Before(LatestSaleTime)
}

// validateTitle refuses titles that would not show as what they say:
// control characters, line breaks, and the bidirectional controls that
// make text display in another order than it is stored (the "Trojan
// Source" trick: a title that reads as one price and is another).
func validateTitle(title string) error {
	switch {
	case strings.TrimSpace(title) == "":
		return E(CodeBadRequest, "title is required")
	case !utf8.ValidString(title):
		return E(CodeBadRequest, "title must be UTF-8")
	case utf8.RuneCountInString(title) > MaxTitleRunes:
		return E(CodeBadRequest, fmt.Sprintf("title is longer than %d characters", MaxTitleRunes))
	}
	for _, r := range title {
		if unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp) || unicode.Is(unicode.Bidi_Control, r) || r == '\uFEFF' {
			return E(CodeBadRequest, fmt.Sprintf("title must not contain control, line-breaking or bidirectional-control characters (found U+%04X)", r))
		}
	}
	return nil
}
