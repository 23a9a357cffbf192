package core

import (
	"context"
	"time"
)

// OrderStore persists orders. SaveOrders writes a whole batch in one
// transaction: each new order is inserted and its stock taken. It is
// idempotent: an order already persisted (same id, or same user and voucher)
// counts as a duplicate, never as an error, so redelivery is harmless.
type OrderStore interface {
	SaveOrders(ctx context.Context, orders []Order) (SaveResult, error)
}

// SaveResult tells what became of a batch.
type SaveResult struct {
	Created    int
	Duplicates int
	// Rejected orders were not persisted, because the reservation and the
	// database disagree: taking their stock would drive it below zero, their
	// id belongs to another order (a reused id), or their buyer already
	// holds another order of the voucher. Each is an anomaly to dead-letter
	// and investigate, never to ack silently as a duplicate.
	Rejected []Rejection
}

// Rejection is an order the store refused: Kind says which anomaly
// (DeadLetterStockAnomaly when empty), Reason the detail.
type Rejection struct {
	Order  Order
	Kind   DeadLetterReason
	Reason string
	// Held is, for DeadLetterBuyerHoldsAnother, the id of the live order
	// the buyer holds in the store (0: not known).
	Held int64
}

// OrderReader finds persisted orders.
type OrderReader interface {
	// FindOrder returns ErrOrderNotFound when no row has the id.
	FindOrder(ctx context.Context, orderID int64) (Order, error)
	// OrderOfBuyer returns the user's persisted order of the voucher, or
	// ErrOrderNotFound: what the database alone can tell while the live
	// store's state of the voucher is being rebuilt.
	OrderOfBuyer(ctx context.Context, userID, voucherID int64) (Order, error)
}

// VoucherRepository is the durable catalogue of vouchers.
type VoucherRepository interface {
	// CreateVoucher inserts the voucher and its seckill row and sets v.ID.
	CreateVoucher(ctx context.Context, v *Voucher) error
	// DeleteVoucher removes a voucher whose creation could not be completed.
	DeleteVoucher(ctx context.Context, id int64) error
	// FindVoucher returns ErrVoucherNotFound when there is none; Stock is the
	// database's stock column.
	FindVoucher(ctx context.Context, id int64) (Voucher, error)
}

// VoucherLister lists the vouchers a storefront shows.
type VoucherLister interface {
	// CurrentVouchers returns up to limit vouchers whose sale has not ended
	// at now, the soonest to open first; Stock is the database's column.
	CurrentVouchers(ctx context.Context, now time.Time, limit int) ([]Voucher, error)
}

// UserRepository keeps shoppers; a user is created on first login.
type UserRepository interface {
	UserIDByPhone(ctx context.Context, phone string) (int64, error)
}
