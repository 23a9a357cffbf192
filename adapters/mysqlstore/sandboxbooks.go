package mysqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/core"
)

// SandboxBooks are the built-in sandbox provider's own books
// (paysandbox.Books): each payment, the money it took (one charge per
// transaction) and gave back (one refund per idempotency key), apart from
// the shop's record of them, so that the shop can ask the provider what
// its lost notices would have said. A real provider keeps these on its own
// servers; the sandbox keeps them here so that every instance and a
// restart see one provider.
type SandboxBooks struct{ db *bun.DB }

// NewSandboxBooks returns the sandbox's books in the store's database.
func NewSandboxBooks(s *Store) *SandboxBooks { return &SandboxBooks{db: s.db} }

type sandboxPaymentRow struct {
	bun.BaseModel `bun:"table:tb_paysandbox_payment"`
	ID            string    `bun:"id,pk"`
	OrderID       int64     `bun:"order_id"`
	Amount        int64     `bun:"amount"`
	FailedTxn     string    `bun:"failed_txn"`
	CreateTime    time.Time `bun:"create_time"`
}

type sandboxChargeRow struct {
	bun.BaseModel `bun:"table:tb_paysandbox_charge"`
	TxnID         string    `bun:"txn_id,pk"`
	PaymentID     string    `bun:"payment_id"`
	Amount        int64     `bun:"amount"`
	CreateTime    time.Time `bun:"create_time"`
}

type sandboxRefundRow struct {
	bun.BaseModel `bun:"table:tb_paysandbox_refund"`
	PaymentID     string    `bun:"payment_id,pk"`
	IdemKey       string    `bun:"idem_key,pk"`
	Amount        int64     `bun:"amount"`
	CreateTime    time.Time `bun:"create_time"`
}

// Open records a payment the sandbox was asked to start; one it has is
// left as it is.
func (b *SandboxBooks) Open(ctx context.Context, p core.Payment) error {
	_, err := b.db.NewInsert().Model(&sandboxPaymentRow{ID: p.ID, OrderID: p.OrderID, Amount: p.Amount,
		CreateTime: time.Now().UTC()}).Ignore().Exec(ctx)
	if err != nil {
		return fmt.Errorf("mysqlstore: sandbox: open payment: %w", err)
	}
	return nil
}

// Attempt records a shopper's attempt to pay under the transaction txnID
// at at: a success takes the payment's amount, once (a payment that took
// it answers as it is, and takes nothing more); a failure is recorded on a
// payment nothing succeeded on. ErrPaymentUnknown: no such payment.
func (b *SandboxBooks) Attempt(ctx context.Context, paymentID string, succeeded bool, txnID string, at time.Time) (core.ProviderPayment, error) {
	var out core.ProviderPayment
	err := b.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		now, err := look(ctx, tx, paymentID)
		switch {
		case err != nil:
			return err
		case now.Taken > 0: // nothing more is taken
		case succeeded:
			if _, err := tx.NewInsert().Model(&sandboxChargeRow{TxnID: txnID, PaymentID: paymentID, Amount: now.Amount,
				CreateTime: at.UTC()}).Exec(ctx); err != nil {
				return err
			}
		default:
			if _, err := tx.NewUpdate().Model((*sandboxPaymentRow)(nil)).Set("failed_txn = ?", txnID).
				Where("id = ?", paymentID).Exec(ctx); err != nil {
				return err
			}
		}
		out, err = look(ctx, tx, paymentID)
		return err
	})
	if err != nil {
		return core.ProviderPayment{}, fmt.Errorf("mysqlstore: sandbox: attempt: %w", err)
	}
	return out, nil
}

// Charged records a charge the sandbox's own signature proves (a notice
// it signed, which the shop verified): once per transaction.
func (b *SandboxBooks) Charged(ctx context.Context, paymentID, txnID string, amount int64, at time.Time) error {
	if _, err := b.db.NewInsert().Model(&sandboxChargeRow{TxnID: txnID, PaymentID: paymentID, Amount: amount,
		CreateTime: at.UTC()}).Ignore().Exec(ctx); err != nil {
		return fmt.Errorf("mysqlstore: sandbox: charged: %w", err)
	}
	return nil
}

// Look is the sandbox's word on a payment. ErrPaymentUnknown: none.
func (b *SandboxBooks) Look(ctx context.Context, paymentID string) (core.ProviderPayment, error) {
	p, err := look(ctx, b.db, paymentID)
	if err != nil {
		return core.ProviderPayment{}, fmt.Errorf("mysqlstore: sandbox: look: %w", err)
	}
	return p, nil
}

// look reads a payment's books: its state follows from its charges and
// refunds (refunded once all it took went back).
func look(ctx context.Context, db bun.IDB, paymentID string) (core.ProviderPayment, error) {
	row, err := findOne[sandboxPaymentRow](ctx, db, "id", paymentID, core.ErrPaymentUnknown)
	if err != nil {
		return core.ProviderPayment{}, err
	}
	var charges []sandboxChargeRow
	if err := db.NewSelect().Model(&charges).Where("payment_id = ?", paymentID).Order("create_time", "txn_id").Scan(ctx); err != nil {
		return core.ProviderPayment{}, err
	}
	var refunds []sandboxRefundRow
	if err := db.NewSelect().Model(&refunds).Where("payment_id = ?", paymentID).Order("create_time", "idem_key").Scan(ctx); err != nil {
		return core.ProviderPayment{}, err
	}
	p := core.ProviderPayment{State: core.PaymentPending, OrderID: row.OrderID, Amount: row.Amount}
	for _, c := range charges {
		if p.Taken == 0 {
			p.TakenAt, p.TxnID = c.CreateTime.UTC(), c.TxnID // the first charge is the payment's
		}
		p.Taken += c.Amount
	}
	for _, r := range refunds {
		p.Refunded += r.Amount
		p.Refunds = append(p.Refunds, core.ProviderRefund{Amount: r.Amount, At: r.CreateTime.UTC()})
	}
	switch {
	case p.Taken > 0 && p.Refunded >= p.Taken:
		p.State = core.PaymentRefunded
	case p.Taken > 0:
		p.State = core.PaymentSucceeded
	case row.FailedTxn != "":
		p.State, p.TxnID = core.PaymentFailed, row.FailedTxn
	}
	return p, nil
}

// ErrNothingToRefund: a refund of more than the payment took and has not
// given back.
var ErrNothingToRefund = core.E(core.CodeNotRefundable, "the payment has not that much money taken and not given back")

// GiveBack refunds r.Amount of a payment, once per r.Key: asked again
// with the key, it answers the payment as it is. ErrNothingToRefund: more
// than it took and has not given back; ErrPaymentUnknown: no such payment.
func (b *SandboxBooks) GiveBack(ctx context.Context, r core.RefundRequest, at time.Time) (core.ProviderPayment, error) {
	var out core.ProviderPayment
	err := b.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := giveBack(ctx, tx, r, at); err != nil {
			return err
		}
		var err error
		out, err = look(ctx, tx, r.PaymentID)
		return err
	})
	if err != nil {
		return core.ProviderPayment{}, fmt.Errorf("mysqlstore: sandbox: refund: %w", err)
	}
	return out, nil
}

// Refund is GiveBack without the payment's word after it (the shop's
// refunds need none): three statements, not nine, for each of a sweep's
// thousands.
func (b *SandboxBooks) Refund(ctx context.Context, r core.RefundRequest, at time.Time) error {
	err := b.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return giveBack(ctx, tx, r, at) })
	if err != nil {
		return fmt.Errorf("mysqlstore: sandbox: refund: %w", err)
	}
	return nil
}

// giveBack records the refund unless its key has one.
func giveBack(ctx context.Context, tx bun.Tx, r core.RefundRequest, at time.Time) error {
	// The payment's row first, locked where the database can (two refunds
	// of one payment at once: the second waits, then reads the first's).
	if _, err := tx.NewUpdate().Model((*sandboxPaymentRow)(nil)).Set("amount = amount").Where("id = ?", r.PaymentID).Exec(ctx); err != nil {
		return err
	}
	var books struct {
		Known    int64 `bun:"known"`
		Taken    int64 `bun:"taken"`
		Refunded int64 `bun:"refunded"`
		Done     int64 `bun:"done"`
	}
	if err := tx.NewRaw("SELECT (SELECT COUNT(*) FROM tb_paysandbox_payment WHERE id = ?) AS known, "+
		"(SELECT COALESCE(SUM(amount), 0) FROM tb_paysandbox_charge WHERE payment_id = ?) AS taken, "+
		"(SELECT COALESCE(SUM(amount), 0) FROM tb_paysandbox_refund WHERE payment_id = ?) AS refunded, "+
		"(SELECT COUNT(*) FROM tb_paysandbox_refund WHERE payment_id = ? AND idem_key = ?) AS done",
		r.PaymentID, r.PaymentID, r.PaymentID, r.PaymentID, r.Key).Scan(ctx, &books); err != nil {
		return err
	}
	switch {
	case books.Known == 0:
		return core.ErrPaymentUnknown
	case books.Done > 0:
		return nil
	case r.Amount <= 0 || books.Taken-books.Refunded < r.Amount:
		return ErrNothingToRefund
	}
	_, err := tx.NewInsert().Model(&sandboxRefundRow{PaymentID: r.PaymentID, IdemKey: r.Key, Amount: r.Amount, CreateTime: at.UTC()}).Exec(ctx)
	return err
}
