package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/steer"
)

// Steering is the database's side of steering a live sale (steer.Store):
// the voucher's columns an action changes, and the record of actions
// (tb_operator_action).
type Steering struct{ s *Store }

// NewSteering is the store's steering side.
func NewSteering(s *Store) *Steering { return &Steering{s} }

// actionRow is a recorded action.
type actionRow struct {
	bun.BaseModel    `bun:"table:tb_operator_action"`
	ID               int64         `bun:"id,pk,autoincrement"`
	At               time.Time     `bun:"at"`
	Operator         string        `bun:"operator"`
	TokenFingerprint string        `bun:"token_fingerprint"`
	Action           string        `bun:"action"`
	VoucherID        sql.NullInt64 `bun:"voucher_id"`
	BeforeState      string        `bun:"before_state"`
	AfterState       string        `bun:"after_state"`
	Note             string        `bun:"note"`
	State            string        `bun:"state"`
}

const (
	actionPending = "pending"
	actionDone    = "done"
)

// pendingRow is a's record, pending (a voucher id of 0: none).
func pendingRow(a steer.Action) actionRow {
	return actionRow{At: a.At.UTC(), Operator: truncate(a.Operator.Name, 128), TokenFingerprint: a.Operator.TokenFingerprint,
		Action: string(a.Kind), VoucherID: sql.NullInt64{Int64: a.VoucherID, Valid: a.VoucherID != 0},
		BeforeState: string(a.Before), AfterState: string(a.After), Note: truncate(a.Note, 512), State: actionPending}
}

func (r actionRow) action() steer.Action {
	return steer.Action{ID: r.ID, At: r.At.UTC(), Operator: steer.Operator{Name: r.Operator, TokenFingerprint: r.TokenFingerprint},
		Kind: steer.Kind(r.Action), VoucherID: r.VoucherID.Int64, Before: rawJSON(r.BeforeState),
		After: rawJSON(r.AfterState), Note: r.Note}
}

// rawJSON is a recorded JSON object, null when none was recorded.
func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// Steer implements steer.Store: the voucher's row locked (MySQL; SQLite
// has one writer at a time), decide's settings written with the action.
func (st *Steering) Steer(ctx context.Context, voucherID int64, decide func(core.Voucher) (core.Voucher, steer.Action, error)) (core.Voucher, int64, error) {
	var after core.Voucher
	var id int64
	err := st.s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		lock := tx.NewSelect().Model((*seckillVoucherRow)(nil)).Column("voucher_id").Where("voucher_id = ?", voucherID)
		if st.s.dialect == dialectMySQL {
			lock = lock.For("UPDATE")
		}
		var locked int64
		if err := lock.Scan(ctx, &locked); errors.Is(err, sql.ErrNoRows) {
			return core.ErrVoucherNotFound
		} else if err != nil {
			return err
		}
		before, err := findVoucher(ctx, tx, voucherID)
		if err != nil {
			return err
		}
		v, a, err := decide(before)
		if err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model((*seckillVoucherRow)(nil)).Set("paused = ?", int(v.Pause)).
			Set("begin_time = ?", v.BeginAt.UTC()).Set("end_time = ?", v.EndAt.UTC()).Set("update_time = ?", time.Now().UTC()).
			Where("voucher_id = ?", voucherID).Exec(ctx); err != nil {
			return err
		}
		row := pendingRow(a)
		if _, err := tx.NewInsert().Model(&row).Exec(ctx); err != nil {
			return err
		}
		after, id = v, row.ID
		return nil
	})
	switch {
	case err == nil:
		return after, id, nil
	case errors.Is(err, core.ErrVoucherNotFound), core.CodeOf(err) != core.CodeInternal, steer.IsConflict(err):
		return core.Voucher{}, 0, err // a refusal, as decided
	}
	return core.Voucher{}, 0, fmt.Errorf("mysqlstore: steer voucher %d: %w", voucherID, err)
}

// truncate keeps the first n bytes of s, cut at a rune's start.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// Done implements steer.Store.
func (st *Steering) Done(ctx context.Context, actionID int64) error {
	_, err := st.s.db.NewUpdate().Model((*actionRow)(nil)).Set("state = ?", actionDone).Where("id = ?", actionID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("mysqlstore: action done: %w", err)
	}
	return nil
}

// Pending implements steer.Store.
func (st *Steering) Pending(ctx context.Context, before time.Time, limit int) ([]steer.Action, error) {
	var rows []actionRow
	err := st.s.db.NewSelect().Model(&rows).Where("state = ?", actionPending).Where("at < ?", before.UTC()).
		Order("id").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: pending actions: %w", err)
	}
	out := make([]steer.Action, len(rows))
	for i, r := range rows {
		out[i] = r.action()
	}
	return out, nil
}

// Actions implements steer.Store.
func (st *Steering) Actions(ctx context.Context, f steer.Filter) ([]steer.Action, error) {
	var rows []actionRow
	q := st.s.db.NewSelect().Model(&rows).OrderExpr("id DESC").Limit(int64(f.Limit))
	if f.VoucherID != 0 {
		q = q.Where("voucher_id = ?", f.VoucherID)
	}
	if !f.Since.IsZero() {
		q = q.Where("at >= ?", f.Since.UTC())
	}
	if f.Before > 0 {
		q = q.Where("id < ?", f.Before)
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("mysqlstore: actions: %w", err)
	}
	out := make([]steer.Action, len(rows))
	for i, r := range rows {
		out[i] = r.action()
	}
	return out, nil
}

// FindVoucher implements steer.Store.
func (st *Steering) FindVoucher(ctx context.Context, id int64) (core.Voucher, error) {
	return st.s.FindVoucher(ctx, id)
}

// switchRow is the kill switch's one row.
type switchRow struct {
	bun.BaseModel `bun:"table:tb_sale_switch"`
	ID            int       `bun:"id,pk"`
	Paused        int       `bun:"paused"`
	UpdateTime    time.Time `bun:"update_time"`
}

// SwitchOn implements steer.Store.
func (st *Steering) SwitchOn(ctx context.Context) (bool, error) {
	var paused int
	err := st.s.db.NewSelect().Model((*switchRow)(nil)).Column("paused").Where("id = 1").Scan(ctx, &paused)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mysqlstore: the kill switch: %w", err)
	}
	return paused != 0, nil
}

// Switch implements steer.Store: the switch set, and every voucher whose
// sale has not ended paused by it (on) or resumed from it (off), with the
// action recorded, in one transaction; the vouchers changed are returned.
func (st *Steering) Switch(ctx context.Context, on bool, a steer.Action) ([]int64, int64, error) {
	var ids []int64
	var actionID int64
	err := st.s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		now := time.Now().UTC()
		if err := setSwitch(ctx, tx, on, now); err != nil {
			return err
		}
		from, to := int(core.NotPaused), int(core.PausedBySwitch)
		if !on {
			from, to = to, from
		}
		q := tx.NewSelect().Model((*seckillVoucherRow)(nil)).Column("voucher_id").Where("paused = ?", from).Where("end_time > ?", now)
		if st.s.dialect == dialectMySQL {
			q = q.For("UPDATE")
		}
		if err := q.Scan(ctx, &ids); err != nil {
			return err
		}
		if len(ids) > 0 {
			if _, err := tx.NewUpdate().Model((*seckillVoucherRow)(nil)).Set("paused = ?", to).Set("update_time = ?", now).
				Where("voucher_id IN (?)", bun.List(ids)).Exec(ctx); err != nil {
				return err
			}
		}
		a.After = json.RawMessage(fmt.Sprintf(`{"switch":%t,"vouchers":%d}`, on, len(ids)))
		ar := pendingRow(a)
		if _, err := tx.NewInsert().Model(&ar).Exec(ctx); err != nil {
			return err
		}
		actionID = ar.ID
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("mysqlstore: the kill switch: %w", err)
	}
	return ids, actionID, nil
}

// setSwitch writes the switch's row (made at its first use; the steering's
// lock keeps two switches from making it at once).
func setSwitch(ctx context.Context, tx bun.Tx, on bool, now time.Time) error {
	row := switchRow{ID: 1, Paused: map[bool]int{true: 1}[on], UpdateTime: now}
	res, err := tx.NewUpdate().Model(&row).Column("paused", "update_time").WherePK().Exec(ctx)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	if _, err = tx.NewInsert().Model(&row).Exec(ctx); isDuplicateKey(err) {
		return nil // there, and as wanted: MySQL counts an unchanged row as unaffected
	}
	return err
}

// Unended implements steer.Store: every voucher whose sale has not ended.
func (st *Steering) Unended(ctx context.Context, now time.Time) ([]core.Voucher, error) {
	var rows []voucherWithRoom
	if err := selectVouchers(st.s.db).Where("sv.end_time > ?", now.UTC()).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("mysqlstore: vouchers not ended: %w", err)
	}
	out := make([]core.Voucher, len(rows))
	for i, r := range rows {
		out[i] = r.voucher()
	}
	return out, nil
}

// BeginStock implements steer.Store.
func (st *Steering) BeginStock(ctx context.Context, a steer.Action) (int64, error) {
	row := pendingRow(a)
	if _, err := st.s.db.NewInsert().Model(&row).Exec(ctx); err != nil {
		return 0, fmt.Errorf("mysqlstore: record a stock action: %w", err)
	}
	return row.ID, nil
}

// actionRefused is a stock action that would have taken more than remains.
const actionRefused = "refused"

// FinishStock implements steer.Store: the record leaves pending and the
// column moves in one transaction, so a second finisher finds it done.
func (st *Steering) FinishStock(ctx context.Context, actionID, voucherID, delta int64, applied bool) (refused, ok bool, err error) {
	err = st.s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		state := actionRefused
		if applied {
			res, err := tx.NewUpdate().Model((*seckillVoucherRow)(nil)).Set("stock = stock + ?", delta).
				Set("update_time = ?", time.Now().UTC()).Where("voucher_id = ?", voucherID).Where("stock + ? >= 0", delta).Exec(ctx)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				state = actionDone
			}
		}
		var stock int64
		if err := tx.NewSelect().Model((*seckillVoucherRow)(nil)).Column("stock").Where("voucher_id = ?", voucherID).Scan(ctx, &stock); err != nil {
			return err
		}
		after, _ := json.Marshal(map[string]any{"delta": delta, "applied": state == actionDone, "stockColumn": stock})
		res, err := tx.NewUpdate().Model((*actionRow)(nil)).Set("state = ?", state).Set("after_state = ?", string(after)).
			Where("id = ?", actionID).Where("state = ?", actionPending).Exec(ctx)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			ok = false
			if err == nil {
				err = errFinished // roll the column back: another finished it
			}
			return err
		}
		ok, refused = true, state == actionRefused
		return nil
	})
	if errors.Is(err, errFinished) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("mysqlstore: finish a stock action: %w", err)
	}
	return refused, ok, nil
}

// errFinished rolls back a finish that found its action finished already.
var errFinished = errors.New("finished already")
