package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/core"
)

// Payments (core.PaymentStore): the payment attempts and the providers'
// notices, each recorded once by its transaction id, carried out by the
// same conditional update of the order's status that cancellations use.

type paymentRow struct {
	bun.BaseModel `bun:"table:tb_payment"`
	ID            string       `bun:"id,pk"`
	OrderID       int64        `bun:"order_id"`
	Provider      string       `bun:"provider"`
	Amount        int64        `bun:"amount"`
	State         string       `bun:"state"`
	CheckedTime   bun.NullTime `bun:"checked_time"`
	CreateTime    time.Time    `bun:"create_time"`
}

type paymentTxnRow struct {
	bun.BaseModel `bun:"table:tb_payment_txn"`
	Provider      string       `bun:"provider,pk"`
	TxnID         string       `bun:"txn_id,pk"`
	PaymentID     string       `bun:"payment_id"`
	OrderID       int64        `bun:"order_id"`
	Amount        int64        `bun:"amount"`
	Succeeded     bool         `bun:"succeeded"`
	Result        string       `bun:"result"`
	RefundedTime  bun.NullTime `bun:"refunded_time"`
	CreateTime    time.Time    `bun:"create_time"`
}

// StartPayment implements core.PaymentStore.
func (s *Payments) StartPayment(ctx context.Context, p core.Payment, owner int64) (core.Payment, error) {
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var row orderRow
		err := tx.NewSelect().Model(&row).Where("id = ?", p.OrderID).Scan(ctx)
		switch {
		case errors.Is(err, sql.ErrNoRows), err == nil && row.UserID != owner:
			return core.ErrOrderNotFound
		case err != nil:
			return err
		case row.Status != orderStatusCreated:
			return core.ErrNotPayable
		}
		var v voucherRow
		if err := tx.NewSelect().Model(&v).Column("pay_value").Where("id = ?", row.VoucherID).Scan(ctx); err != nil {
			return fmt.Errorf("the order's voucher: %w", err)
		}
		p.Amount = v.PayValue
		_, err = tx.NewInsert().Model(&paymentRow{ID: p.ID, OrderID: p.OrderID, Provider: p.Provider, Amount: p.Amount,
			State: string(core.PaymentPending), CreateTime: time.Now().UTC()}).Exec(ctx)
		return err
	})
	if err != nil {
		return core.Payment{}, fmt.Errorf("mysqlstore: start payment: %w", err) // sentinels and codes survive the wrap
	}
	return p, nil
}

// FindPayment returns a recorded payment attempt (the sandbox's page reads
// it); ErrPaymentUnknown when there is none.
func (s *Payments) FindPayment(ctx context.Context, id string) (core.Payment, error) {
	row, err := findOne[paymentRow](ctx, s.db, "id", id, core.ErrPaymentUnknown)
	if err != nil {
		return core.Payment{}, fmt.Errorf("mysqlstore: find payment: %w", err)
	}
	return core.Payment{ID: row.ID, Provider: row.Provider, OrderID: row.OrderID, Amount: row.Amount}, nil
}

// errTxnRace: another request recorded the same transaction between this
// one's read and its insert; the retry reads it.
var errTxnRace = errors.New("transaction recorded concurrently")

// RecordNotice implements core.PaymentStore.
func (s *Payments) RecordNotice(ctx context.Context, n core.PaymentNotice, now time.Time) (core.NoticeResult, error) {
	var res core.NoticeResult
	var err error
	for range 3 {
		err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			var err error
			res, err = recordNotice(ctx, tx, n, now.UTC())
			return err
		})
		if !errors.Is(err, errTxnRace) && !isTransientConflict(err) {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("mysqlstore: record payment notice: %w", err) // sentinels and codes survive the wrap
	}
	return res, nil
}

func recordNotice(ctx context.Context, tx bun.Tx, n core.PaymentNotice, now time.Time) (core.NoticeResult, error) {
	var seen paymentTxnRow
	err := tx.NewSelect().Model(&seen).Where("provider = ? AND txn_id = ?", n.Provider, n.TxnID).Scan(ctx)
	if err == nil {
		if seen.Result == string(core.NoticeRefunded) && seen.RefundedTime.IsZero() {
			return core.NoticeRefunded, nil // the refund is still owed: the caller makes it
		}
		return core.NoticeAlreadyRecorded, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", err
	}
	var pay paymentRow
	err = tx.NewSelect().Model(&pay).Where("id = ?", n.PaymentID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return "", core.ErrPaymentUnknown
	}
	if err != nil {
		return "", err
	}
	switch {
	case pay.OrderID != n.OrderID || pay.Provider != n.Provider:
		return "", core.E(core.CodeBadRequest, "the notice's order is not the payment's")
	case n.Succeeded && pay.Amount != n.Amount:
		return "", core.E(core.CodeBadRequest, fmt.Sprintf("the amount paid, %d, is not the payment's, %d", n.Amount, pay.Amount))
	}
	res := core.NoticeFailed
	if n.Succeeded {
		r, err := tx.NewUpdate().Table("tb_voucher_order").
			Set("status = ?", orderStatusPaid).Set("update_time = ?", now).
			Where("id = ?", n.OrderID).Where("status = ?", orderStatusCreated).Exec(ctx)
		if err != nil {
			return "", err
		}
		if won, err := r.RowsAffected(); err != nil {
			return "", err
		} else if won == 1 {
			res = core.NoticePaid
		} else {
			// Cancelled (or expired) first, or paid by another
			// transaction: never paid twice, never paid after a cancel.
			// A cancelled order is being refunded; its unit stays sold.
			res = core.NoticeRefunded
			if _, err := tx.NewUpdate().Table("tb_voucher_order").
				Set("status = ?", orderStatusRefunding).Set("update_time = ?", now).
				Where("id = ?", n.OrderID).Where("status = ?", orderStatusCancelled).Exec(ctx); err != nil {
				return "", err
			}
		}
	}
	_, err = tx.NewInsert().Model(&paymentTxnRow{Provider: n.Provider, TxnID: n.TxnID, PaymentID: n.PaymentID, OrderID: n.OrderID,
		Amount: n.Amount, Succeeded: n.Succeeded, Result: string(res), CreateTime: now}).Exec(ctx)
	if isDuplicateKey(err) {
		return "", errTxnRace
	}
	if err != nil {
		return "", err
	}
	return res, recordState(ctx, tx, n, now)
}

// recordState writes the provider's word into the payment's state: a
// success is final (until its refund); a failure only stands for a payment
// nothing succeeded on.
func recordState(ctx context.Context, tx bun.Tx, n core.PaymentNotice, now time.Time) error {
	q := tx.NewUpdate().Table("tb_payment").Set("checked_time = ?", now).Where("id = ?", n.PaymentID)
	if n.Succeeded {
		// The notice is the provider's word too: it took the amount (at
		// least: the answer to a status query, recorded just before a
		// notice made of it, has the sum of its charges).
		// What it took is at least the sum of its transactions the shop
		// recorded (a second one is money taken twice: its refund must
		// not read as the whole payment given back). word_taken is set
		// before txn_taken: MySQL's later assignments read the earlier
		// ones' values, SQLite's the row's; both read the old txn_taken.
		q = q.Set("state = ?", string(core.PaymentSucceeded)).Set("word = ?", string(core.PaymentSucceeded)).
			Set("word_taken = CASE WHEN word_taken < txn_taken + ? THEN txn_taken + ? ELSE word_taken END", n.Amount, n.Amount).
			Set("txn_taken = txn_taken + ?", n.Amount)
	} else {
		q = q.Set("state = ?", string(core.PaymentFailed)).Where("state = ?", string(core.PaymentPending))
	}
	_, err := q.Exec(ctx)
	return err
}

// Refunded implements core.PaymentStore: once per transaction, however
// often it is told.
func (s *Payments) Refunded(ctx context.Context, n core.PaymentNotice) error {
	now := time.Now().UTC()
	return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewUpdate().Table("tb_payment_txn").Set("refunded_time = ?", now).
			Where("provider = ? AND txn_id = ?", n.Provider, n.TxnID).Where("refunded_time IS NULL").Exec(ctx)
		if err != nil {
			return fmt.Errorf("mysqlstore: record refund: %w", err)
		}
		if first, err := res.RowsAffected(); err != nil || first == 0 {
			return err // recorded before
		}
		// A cancelled order this money came late for is refunded now; one
		// an operator is refunding is not this refund's to finish (its
		// own, of the money that paid it, may still be owed: the duty
		// finds it refunding).
		if _, err := tx.NewUpdate().Table("tb_voucher_order").Set("status = ?", orderStatusRefunded).Set("update_time = ?", now).
			Where("id = ?", n.OrderID).Where("status = ?", orderStatusRefunding).
			Where("cancel_reason IS NULL OR cancel_reason NOT IN (?)", bun.List([]string{string(core.CancelRefunded), string(core.CancelRefundedUnitKept)})).
			Exec(ctx); err != nil {
			return fmt.Errorf("mysqlstore: record refund: %w", err)
		}
		// The states before the sum: MySQL's later assignments read the
		// earlier ones' values, SQLite's the row's.
		refundedAll := "CASE WHEN word_refunded + ? >= word_taken THEN ? ELSE %s END"
		if _, err := tx.NewUpdate().Table("tb_payment").
			Set("state = "+fmt.Sprintf(refundedAll, "state"), n.Amount, string(core.PaymentRefunded)).
			Set("word = "+fmt.Sprintf(refundedAll, "word"), n.Amount, string(core.PaymentRefunded)).
			Set("word_refunded = word_refunded + ?", n.Amount).
			Where("id = ?", n.PaymentID).Exec(ctx); err != nil {
			return fmt.Errorf("mysqlstore: record refund: %w", err)
		}
		return nil
	})
}

// OpenPayments implements core.PaymentStore.
func (s *Payments) OpenPayments(ctx context.Context, orderID int64) ([]core.Payment, error) {
	var rows []paymentWithDeadline
	err := s.db.NewRaw("SELECT p.id, p.provider, p.order_id, p.amount, o.pay_by FROM tb_payment AS p "+
		"JOIN tb_voucher_order AS o ON o.id = p.order_id WHERE p.order_id = ? AND p.state IN (?, ?) ORDER BY p.create_time",
		orderID, string(core.PaymentPending), string(core.PaymentFailed)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: open payments: %w", err)
	}
	return paymentsOf(rows), nil
}

// Unsettled lists the payments the provider has said nothing final of
// (pending, or failed: a shopper may try again on the same payment), or
// with a refund owed (asking again makes it),
// started between since and before and not asked about since before, the
// longest unasked first (payreconcile.Store).
func (s *Payments) Unsettled(ctx context.Context, since, before time.Time, limit int) ([]core.Payment, error) {
	var rows []paymentWithDeadline
	err := s.db.NewRaw("SELECT p.id, p.provider, p.order_id, p.amount, o.pay_by FROM tb_payment AS p "+
		"JOIN tb_voucher_order AS o ON o.id = p.order_id WHERE (p.state IN (?, ?) OR "+refundOwed+") AND p.create_time >= ? AND p.create_time < ? "+
		"AND (p.checked_time IS NULL OR p.checked_time < ?) ORDER BY COALESCE(p.checked_time, p.create_time), p.id LIMIT ?",
		string(core.PaymentPending), string(core.PaymentFailed), before.UTC(), since.UTC(), before.UTC(), before.UTC(), limit).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: unsettled payments: %w", err)
	}
	return paymentsOf(rows), nil
}

// AfterSale lists payments of sales that ended between since and before
// that the provider was not asked about since their sale ended, the
// earliest sale first (payreconcile.Store): after a sale, every payment of
// it is asked about once.
func (s *Payments) AfterSale(ctx context.Context, since, before time.Time, limit int) ([]core.Payment, error) {
	var rows []paymentWithDeadline
	err := s.db.NewRaw("SELECT p.id, p.provider, p.order_id, p.amount, o.pay_by FROM tb_payment AS p "+
		"JOIN tb_voucher_order AS o ON o.id = p.order_id JOIN tb_seckill_voucher AS v ON v.voucher_id = o.voucher_id "+
		"WHERE v.end_time >= ? AND v.end_time < ? AND (p.checked_time IS NULL OR p.checked_time < v.end_time) "+
		"ORDER BY v.end_time, p.id LIMIT ?", since.UTC(), before.UTC(), limit).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: payments after their sale: %w", err)
	}
	return paymentsOf(rows), nil
}

// paymentWithDeadline is a payment read with its order's deadline.
type paymentWithDeadline struct {
	ID       string       `bun:"id"`
	Provider string       `bun:"provider"`
	OrderID  int64        `bun:"order_id"`
	Amount   int64        `bun:"amount"`
	PayBy    bun.NullTime `bun:"pay_by"`
}

func paymentsOf(rows []paymentWithDeadline) []core.Payment {
	out := make([]core.Payment, len(rows))
	for i, r := range rows {
		out[i] = core.Payment{ID: r.ID, Provider: r.Provider, OrderID: r.OrderID, Amount: r.Amount, PayBy: r.PayBy.Time}
	}
	return out
}

// Heard implements core.PaymentStore.
func (s *Payments) Heard(ctx context.Context, paymentID string, word core.ProviderPayment, at time.Time) error {
	_, err := s.db.NewUpdate().Table("tb_payment").Set("checked_time = ?", at.UTC()).Set("word = ?", string(word.State)).
		Set("word_taken = ?", word.Taken).Set("word_refunded = ?", word.Refunded).Where("id = ?", paymentID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("mysqlstore: the provider's word: %w", err)
	}
	return nil
}

var _ core.PaymentStore = (*Payments)(nil)
