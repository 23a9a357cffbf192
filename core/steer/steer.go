// Package steer is an operator steering a sale while it runs: pausing and
// resuming it, ending it now, moving its window, each recorded.
//
// An action changes the database and the live store, in that order, under
// a lock of the voucher's (two actions on one voucher never interleave
// their halves): the database's half is written with the action, pending,
// in one transaction; the live store's half (Live.Apply) makes the
// reservation itself refuse from its return on, on every instance, since
// every instance's reservation reads the one live state. The action is
// done then. An instance that dies between the halves leaves it pending,
// and any instance finishes it (Steering.Duty): it writes the database's
// settings into the live store again. A rebuild of the live state reads
// the database, which has the change from its first half on.
package steer

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/recovery"
)

// Kind is what an operator did.
type Kind string

const (
	Pause      Kind = "pause"
	Resume     Kind = "resume"
	End        Kind = "end"
	Reschedule Kind = "reschedule"
	// Stock takes or adds units with sales running.
	Stock Kind = "stock"
	// PauseAll and ResumeAll are the kill switch: every voucher at once.
	PauseAll  Kind = "pause_all"
	ResumeAll Kind = "resume_all"
)

// Operator is who acted: the name they gave (free text, may be empty) and
// the fingerprint of the admin token they used.
type Operator struct {
	Name             string
	TokenFingerprint string
}

// Action is one operator action, as recorded. Before and After are JSON
// objects: what the action changed, as it was and as it became.
type Action struct {
	ID        int64
	At        time.Time
	Operator  Operator
	Kind      Kind
	VoucherID int64
	Before    json.RawMessage
	After     json.RawMessage
	Note      string
}

// Store is the database's side of steering.
type Store interface {
	// Steer locks the voucher's row and asks decide for its new settings
	// and the action that records the change; it writes both, the action
	// pending, in one transaction, and returns the settings written and
	// the action's id. An error of decide refuses: nothing is written.
	// core.ErrVoucherNotFound: no such voucher.
	Steer(ctx context.Context, voucherID int64, decide func(core.Voucher) (core.Voucher, Action, error)) (core.Voucher, int64, error)
	// Done records the action's live half done.
	Done(ctx context.Context, actionID int64) error
	// Pending lists the actions still pending that were recorded before
	// the time given, oldest first.
	Pending(ctx context.Context, before time.Time, limit int) ([]Action, error)
	// Actions pages the record, newest first.
	Actions(ctx context.Context, f Filter) ([]Action, error)
	// FindVoucher reads a voucher as the database has it now.
	FindVoucher(ctx context.Context, id int64) (core.Voucher, error)
	// SwitchOn reads the kill switch.
	SwitchOn(ctx context.Context) (bool, error)
	// Switch sets the kill switch and, in the same transaction, pauses by
	// it every voucher whose sale has not ended and is not paused (on), or
	// resumes every voucher it paused (off), and records the action,
	// pending; it returns the vouchers it changed.
	Switch(ctx context.Context, on bool, a Action) ([]int64, int64, error)
	// Unended lists the vouchers whose sale has not ended at now.
	Unended(ctx context.Context, now time.Time) ([]core.Voucher, error)
	// BeginStock records a stock action, pending, its delta in a.After
	// (core.ErrVoucherNotFound: no such voucher).
	BeginStock(ctx context.Context, a Action) (int64, error)
	// FinishStock ends a pending stock action once: applied, the stock
	// column moves by delta (unless that would take it below zero: then
	// refused, as when not applied); ok is false when the action was
	// finished already (by another instance), and nothing is done twice.
	FinishStock(ctx context.Context, actionID, voucherID, delta int64, applied bool) (refused, ok bool, err error)
	// ConsumerSetting reads the consumers' setting (never set: open,
	// version 0).
	ConsumerSetting(ctx context.Context) (core.ConsumerSetting, error)
	// SetConsumers reads the setting, asks decide for the new one and the
	// action that records it, and writes both, the setting's version one
	// more and the action pending, in one transaction; it returns the
	// setting written and the action's id.
	SetConsumers(ctx context.Context, decide func(core.ConsumerSetting) (core.ConsumerSetting, Action)) (core.ConsumerSetting, int64, error)
}

// Filter selects recorded actions: of one voucher (0: any), at or after
// Since (zero: any), with ids below Before (0: from the newest), at most
// Limit.
type Filter struct {
	VoucherID int64
	Since     time.Time
	Before    int64
	Limit     int
}

// Live is the live store's side: it writes a voucher's window and pause
// where the reservation reads them, in every part of the voucher. endNow
// ends the sale by the live store's own clock. core.ErrBusy: the live
// state is being rebuilt; asked again, it writes.
type Live interface {
	Apply(ctx context.Context, v core.Voucher, endNow bool) error
	// ChangeStock takes or adds delta units in the live stock, once for
	// the action: a second call with its id answers as the first (unless
	// a rebuild since read the database, which lacks it: then it applies
	// afresh). Refused (not Applied) when more would be taken than
	// remains.
	ChangeStock(ctx context.Context, v core.Voucher, actionID, delta int64) (StockChange, error)
}

// StockChange is what the live store did with a stock action.
type StockChange struct {
	Applied bool
	// Remaining is the live stock after (-1: the live store is the
	// database, whose column says).
	Remaining int64
}

// Restocker changes the stock of a voucher in buckets within a
// reconcile's fence (recovery.Guard).
type Restocker interface {
	ReconcileChanging(ctx context.Context, voucherID int64, change recovery.StockChange) (recovery.Report, error)
}

// noRestock is the Restocker of a sale with no buckets (sync).
type noRestock struct{}

func (noRestock) ReconcileChanging(context.Context, int64, recovery.StockChange) (recovery.Report, error) {
	return recovery.Report{}, conflict(core.CodeNotSupported, "this sale keeps no voucher in buckets")
}

// DatabaseIsLive is the Live of a sale whose live state is its database
// (sync): the first half of an action is all of it.
var DatabaseIsLive Live = databaseIsLive{}

type databaseIsLive struct{}

func (databaseIsLive) Apply(context.Context, core.Voucher, bool) error { return nil }

// ChangeStock of a sale whose live state is its database: the column's
// own update (FinishStock) decides.
func (databaseIsLive) ChangeStock(context.Context, core.Voucher, int64, int64) (StockChange, error) {
	return StockChange{Applied: true, Remaining: -1}, nil
}

// Locker serialises the actions on one voucher across instances.
type Locker interface {
	// Lock takes the lock of name, for at most ttl, and returns its
	// release; an error when it is held beyond ctx.
	Lock(ctx context.Context, name string, ttl time.Duration) (release func(), err error)
}

// Announcer tells every instance that a voucher's settings changed: each
// forgets what it keeps of them (the voucher's details, the answers it
// remembers), at once here and on the others as soon as they hear.
type Announcer interface {
	VoucherChanged(ctx context.Context, voucherID int64)
}

// Observer counts the actions.
type Observer interface {
	Acted(kind Kind)
}

// ConflictError is an action the voucher's state refuses (its sale has
// ended, it has begun): the HTTP layer answers 409 with Err's code.
type ConflictError struct{ Err *core.Error }

func (e *ConflictError) Error() string { return e.Err.Error() }
func (e *ConflictError) Unwrap() error { return e.Err }

// conflict refuses an action with code and message.
func conflict(code core.Code, message string) error {
	return &ConflictError{Err: core.E(code, message)}
}

// IsConflict reports whether err is an action the voucher's state refused.
func IsConflict(err error) bool {
	var c *ConflictError
	return errors.As(err, &c)
}
