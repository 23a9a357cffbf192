package payreconcile

import (
	"context"
	"time"
)

// Filter narrows a report: one voucher's payments (0: every voucher's),
// those started since (zero: all).
type Filter struct {
	VoucherID int64
	Since     time.Time
}

// Report is what the shop's record and the provider's word say of the
// payments, side by side.
type Report struct {
	// Payments counts them; Paid those whose money the shop kept
	// (succeeded), Refunded those it gave back, Pending those the
	// provider has said nothing of yet, Failed those it took nothing on.
	Payments, Paid, Refunded, Pending, Failed int
	// Mismatches are the payments where the two disagree (at most
	// MaxMismatches, the oldest first).
	Mismatches []Mismatch
}

// MaxMismatches bounds a report's list.
const MaxMismatches = 100

// Mismatch kinds.
const (
	// MoneyKept: the provider took money on a payment that neither paid
	// its order nor went back.
	MoneyKept = "money_kept"
	// PaidWithoutMoney: the order is paid by a payment the provider, asked
	// since, says took nothing (or gave all back).
	PaidWithoutMoney = "paid_without_money"
	// RefundOwed: a refund the shop owes (the money came for an order
	// cancelled first) not made for over a minute.
	RefundOwed = "refund_owed"
)

// Mismatch is one payment the shop's record and the provider's word
// disagree on.
type Mismatch struct {
	Kind      string
	PaymentID string
	OrderID   int64
	// OrderStatus is the shop's; State its record of the payment, Word
	// the provider's last word, with what it said it took and gave back.
	OrderStatus, State, Word string
	Taken, Refunded          int64
	At                       time.Time
}

// Reports reads the report from the database.
type Reports interface {
	Report(ctx context.Context, f Filter) (Report, error)
	// Unreconciled counts what is still unsettled past the threshold:
	// payments the provider has said nothing final of that were not asked
	// about within twice after of now (the rounds are behind, or the
	// provider does not answer), and the mismatches.
	Unreconciled(ctx context.Context, now time.Time, after time.Duration) (int, error)
}
