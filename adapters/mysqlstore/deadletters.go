package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
)

// DeadLetters is the operator's register of dead letters
// (deadletters.Register): tb_dead_letter, and how far each source was read
// (tb_dead_letter_source).
type DeadLetters struct{ db *bun.DB }

// DeadLetters is the store's register of dead letters.
func (s *Store) DeadLetters() *DeadLetters { return &DeadLetters{db: s.db} }

type deadLetterRow struct {
	bun.BaseModel `bun:"table:tb_dead_letter"`
	ID            int64          `bun:"id,pk,autoincrement"`
	Source        string         `bun:"source"`
	Position      string         `bun:"position"`
	Backend       string         `bun:"backend"`
	Reason        string         `bun:"reason"`
	Error         string         `bun:"error"`
	OrderID       sql.NullInt64  `bun:"order_id"`
	UserID        sql.NullInt64  `bun:"user_id"`
	VoucherID     sql.NullInt64  `bun:"voucher_id"`
	Body          []byte         `bun:"body"`
	Signature     string         `bun:"signature"`
	Deliveries    int            `bun:"deliveries"`
	Consumer      string         `bun:"consumer"`
	FirstFailed   time.Time      `bun:"first_failed"`
	LastFailed    time.Time      `bun:"last_failed"`
	Redriven      int            `bun:"redriven"`
	Resolved      sql.NullString `bun:"resolved"`
	ResolvedTime  bun.NullTime   `bun:"resolved_time"`
	Note          sql.NullString `bun:"note"`
}

type deadLetterSourceRow struct {
	bun.BaseModel `bun:"table:tb_dead_letter_source"`
	Source        string    `bun:"source,pk"`
	Position      string    `bun:"position"`
	ReadTime      time.Time `bun:"read_time"`
}

func nullID(id int64) sql.NullInt64 { return sql.NullInt64{Int64: id, Valid: id != 0} }

func deadLetterRowOf(l deadletters.Letter) deadLetterRow {
	return deadLetterRow{Source: l.Source, Position: l.Position, Backend: l.Backend, Reason: string(l.Reason),
		Error: l.Error, OrderID: nullID(l.Order.ID), UserID: nullID(l.Order.UserID), VoucherID: nullID(l.Order.VoucherID),
		Body: l.Body, Signature: l.Signature, Deliveries: l.Deliveries, Consumer: l.Consumer, FirstFailed: l.FirstFailed.UTC(),
		LastFailed: l.LastFailed.UTC()}
}

func (r deadLetterRow) letter() deadletters.Letter {
	l := deadletters.Letter{ID: r.ID, Source: r.Source, Position: r.Position, Backend: r.Backend,
		Reason: core.DeadLetterReason(r.Reason), Error: r.Error, Body: r.Body, Signature: r.Signature, Deliveries: r.Deliveries,
		Consumer: r.Consumer, FirstFailed: r.FirstFailed.UTC(), LastFailed: r.LastFailed.UTC(), Redriven: r.Redriven,
		Resolved: deadletters.Resolution(r.Resolved.String), Note: r.Note.String,
		Order: core.Order{ID: r.OrderID.Int64, UserID: r.UserID.Int64, VoucherID: r.VoucherID.Int64}}
	if !r.ResolvedTime.IsZero() {
		l.ResolvedAt = r.ResolvedTime.UTC()
	}
	return l
}

// Cursor implements deadletters.Register.
func (s *DeadLetters) Cursor(ctx context.Context, source string) (string, error) {
	var row deadLetterSourceRow
	err := s.db.NewSelect().Model(&row).Where("source = ?", source).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("mysqlstore: dead-letter cursor of %s: %w", source, err)
	}
	return row.Position, nil
}

// Collect implements deadletters.Register: the cursor moves from from to
// to (inserted for a source read for the first time), or nothing happens;
// the letters are inserted in the same transaction, each at most once.
func (s *DeadLetters) Collect(ctx context.Context, source, from, to string, letters []deadletters.Letter) error {
	err := retryConflicts(ctx, func() error {
		return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			now := time.Now().UTC()
			var res sql.Result
			var err error
			if from == "" {
				row := deadLetterSourceRow{Source: source, Position: to, ReadTime: now}
				res, err = tx.NewInsert().Model(&row).Ignore().Exec(ctx)
			} else {
				res, err = tx.NewUpdate().Model((*deadLetterSourceRow)(nil)).Set("position = ?", to).Set("read_time = ?", now).
					Where("source = ?", source).Where("position = ?", from).Exec(ctx)
			}
			if err != nil {
				return fmt.Errorf("move the cursor: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return err // another process moved it: it keeps these
			}
			if len(letters) == 0 {
				return nil
			}
			for _, rows := range insertChunks(letters) {
				if _, err := tx.NewInsert().Model(&rows).Ignore().Returning("").Exec(ctx); err != nil {
					return fmt.Errorf("keep %d dead letters: %w", len(rows), err)
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("mysqlstore: dead letters of %s: %w", source, err)
	}
	return nil
}

// insertBytes bounds one insert of letters: a batch of bodies at the cap
// (core.MaxDeadLetterBody) in one statement passed MariaDB's default
// max_allowed_packet (16 MB), and the collection failed every second.
const insertBytes = 4 << 20

// insertChunks splits letters into rows of inserts of about insertBytes
// each (one letter at least).
func insertChunks(letters []deadletters.Letter) [][]deadLetterRow {
	var out [][]deadLetterRow
	var chunk []deadLetterRow
	size := 0
	for _, l := range letters {
		n := len(l.Body) + len(l.Error) + len(l.Consumer) + len(l.Position) + 512
		if len(chunk) > 0 && size+n > insertBytes {
			out, chunk, size = append(out, chunk), nil, 0
		}
		chunk, size = append(chunk, deadLetterRowOf(l)), size+n
	}
	if len(chunk) > 0 {
		out = append(out, chunk)
	}
	return out
}

// filtered narrows q to the letters f selects, open or resolved.
func filtered(q *bun.SelectQuery, f deadletters.Filter, resolved bool) *bun.SelectQuery {
	if resolved {
		q = q.Where("resolved_time IS NOT NULL")
	} else {
		q = q.Where("resolved_time IS NULL")
	}
	if f.Reason != "" {
		q = q.Where("reason = ?", string(f.Reason))
	}
	if f.VoucherID != 0 {
		q = q.Where("voucher_id = ?", f.VoucherID)
	}
	if !f.Since.IsZero() {
		q = q.Where("first_failed >= ?", f.Since.UTC())
	}
	if !f.Until.IsZero() {
		q = q.Where("first_failed < ?", f.Until.UTC())
	}
	if len(f.IDs) > 0 {
		q = q.Where("id IN (?)", bun.List(f.IDs))
	}
	return q
}

// List implements deadletters.Register.
func (s *DeadLetters) List(ctx context.Context, f deadletters.Filter, after int64, limit int) (deadletters.Page, error) {
	var rows []deadLetterRow
	err := filtered(s.db.NewSelect().Model(&rows), f, f.Resolved).Where("id > ?", after).
		Order("id").Limit(int64(limit) + 1).Scan(ctx)
	if err != nil {
		return deadletters.Page{}, fmt.Errorf("mysqlstore: dead letters: %w", err)
	}
	var page deadletters.Page
	if len(rows) > limit {
		rows = rows[:limit]
		page.Next = rows[limit-1].ID
	}
	page.Letters = make([]deadletters.Letter, len(rows))
	for i, r := range rows {
		page.Letters[i] = r.letter()
	}
	open, err := filtered(s.db.NewSelect().Model((*deadLetterRow)(nil)), f, false).Count(ctx)
	if err != nil {
		return deadletters.Page{}, fmt.Errorf("mysqlstore: open dead letters: %w", err)
	}
	page.Open = int64(open)
	return page, nil
}

// Letter implements deadletters.Register.
func (s *DeadLetters) Letter(ctx context.Context, id int64) (deadletters.Letter, error) {
	row, err := findOne[deadLetterRow](ctx, s.db, "id", id, deadletters.ErrNotFound)
	if err != nil {
		return deadletters.Letter{}, fmt.Errorf("mysqlstore: dead letter %d: %w", id, err)
	}
	return row.letter(), nil
}

// Open implements deadletters.Register.
func (s *DeadLetters) Open(ctx context.Context) (int64, error) {
	n, err := s.db.NewSelect().Model((*deadLetterRow)(nil)).Where("resolved_time IS NULL").Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("mysqlstore: open dead letters: %w", err)
	}
	return int64(n), nil
}

// Resolve implements deadletters.Register.
func (s *DeadLetters) Resolve(ctx context.Context, ids []int64, how deadletters.Resolution, note string, at time.Time) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	q := s.db.NewUpdate().Model((*deadLetterRow)(nil)).Set("resolved = ?", string(how)).Set("resolved_time = ?", at.UTC()).
		Set("note = ?", note).Where("id IN (?)", bun.List(ids)).Where("resolved_time IS NULL")
	if how == deadletters.Redriven {
		q = q.Set("redriven = redriven + 1")
	}
	res, err := q.Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("mysqlstore: resolve %d dead letters: %w", len(ids), err)
	}
	return res.RowsAffected()
}

// Failed implements deadletters.Register.
func (s *DeadLetters) Failed(ctx context.Context, id int64, detail string, at time.Time) error {
	_, err := s.db.NewUpdate().Model((*deadLetterRow)(nil)).Set("redriven = redriven + 1").Set("last_failed = ?", at.UTC()).
		Set("error = ?", detail).Where("id = ?", id).Exec(ctx)
	if err != nil {
		return fmt.Errorf("mysqlstore: dead letter %d: %w", id, err)
	}
	return nil
}

// PersistedOrders implements deadletters.Register.
func (s *DeadLetters) PersistedOrders(ctx context.Context, orderIDs []int64) (map[int64]bool, error) {
	found := map[int64]bool{}
	if len(orderIDs) == 0 {
		return found, nil
	}
	var ids []int64
	if err := s.db.NewSelect().Table("tb_voucher_order").Column("id").Where("id IN (?)", bun.List(orderIDs)).Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("mysqlstore: orders persisted: %w", err)
	}
	for _, id := range ids {
		found[id] = true
	}
	return found, nil
}

var _ deadletters.Register = (*DeadLetters)(nil)

// notAnOrder are the kinds whose letters name no order of ours: a body
// that did not verify or did not decode.
var notAnOrder = []string{string(core.DeadLetterUnauthenticated), string(core.DeadLetterPoison)}

// holdsNoUnit are the kinds whose letters hold no unit of the live sale:
// notAnOrder's, and a refused second order's (its unit went back when it
// was dead-lettered).
var holdsNoUnit = append(slices.Clone(notAnOrder), string(core.DeadLetterBuyerHoldsAnother))

// HeldOrder implements core.DeadLettered.
func (s *DeadLetters) HeldOrder(ctx context.Context, orderID int64) (core.Order, bool, error) {
	return s.held(ctx, s.db.NewSelect().Where("order_id = ?", orderID))
}

// HeldOrderOf implements core.DeadLettered.
func (s *DeadLetters) HeldOrderOf(ctx context.Context, userID, voucherID int64) (core.Order, bool, error) {
	return s.held(ctx, s.db.NewSelect().Where("voucher_id = ?", voucherID).Where("user_id = ?", userID))
}

// held is the newest open letter q matches that names an order of ours,
// as the order held for review.
func (s *DeadLetters) held(ctx context.Context, q *bun.SelectQuery) (core.Order, bool, error) {
	var row deadLetterRow
	err := q.Model(&row).Where("resolved_time IS NULL").Where("order_id IS NOT NULL").
		Where("reason NOT IN (?)", bun.List(notAnOrder)).OrderExpr("id DESC").Limit(1).Scan(ctx)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return core.Order{}, false, nil
	case err != nil:
		return core.Order{}, false, fmt.Errorf("mysqlstore: held order: %w", err)
	}
	o := row.order()
	o.Status = core.StatusHeld
	return o, true, nil
}

// order is the order a letter's row names: its id, buyer and voucher, and
// its time from the body where the body decodes (else the first failure).
func (row deadLetterRow) order() core.Order {
	o := core.Order{ID: row.OrderID.Int64, UserID: row.UserID.Int64, VoucherID: row.VoucherID.Int64, CreatedAt: row.FirstFailed.UTC()}
	if body, err := core.DecodeOrder(row.Body); err == nil && body.ID == o.ID {
		o.CreatedAt = body.CreatedAt.UTC()
	}
	return o
}

var _ core.DeadLettered = (*DeadLetters)(nil)
