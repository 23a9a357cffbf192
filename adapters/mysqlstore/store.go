// Package mysqlstore persists vouchers, users and orders with bun: MySQL or
// MariaDB in production, an in-process SQLite as the embedded stand-in. The
// schema is applied with bun/migrate at start.
package mysqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/migrate"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/seckill-lab/seckill/core"
)

//go:embed migrations
var migrationFiles embed.FS

// Store implements the core's repositories and OrderStore.
//
// The database's other roles are views over the same pool, each its own
// type: Users (shoppers and their orders), Payments, Lifecycle (cancel,
// expiry, releases) and Ledger (what the audit, the rebuild and the
// dashboard read).
type Store struct {
	db      *bun.DB
	dialect dialect
}

// Users is the shoppers' side of the database: users by phone, a
// shopper's orders.
type Users struct{ db *bun.DB }

// Payments records payments and the provider's notices
// (core.PaymentStore).
type Payments struct{ db *bun.DB }

// Lifecycle cancels and expires orders and records the units owed back
// (core.LifecycleStore).
type Lifecycle struct{ db *bun.DB }

// Ledger reads a sale's orders as the audit, the rebuild and the
// dashboard see them (recovery.Ledger).
type Ledger struct{ db *bun.DB }

// Users is the store's shoppers' side.
func (s *Store) Users() *Users { return &Users{db: s.db} }

// Payments is the store's payments' side.
func (s *Store) Payments() *Payments { return &Payments{db: s.db} }

// Lifecycle is the store's side of the order lifecycle.
func (s *Store) Lifecycle() *Lifecycle { return &Lifecycle{db: s.db} }

// Ledger is the store's read of the sale for the audit and the rebuild.
func (s *Store) Ledger() *Ledger { return &Ledger{db: s.db} }

// DefaultMaxConns is OpenMySQL's pool size when none is given.
const DefaultMaxConns = 32

// OpenMySQL connects to MySQL or MariaDB with a go-sql-driver DSN, with a
// pool of at most maxConns connections (0: DefaultMaxConns), all kept
// open while idle. Times are read and written in UTC whatever the DSN
// says. hooks see every query (bunotel's spans, say).
func OpenMySQL(ctx context.Context, dsn string, maxConns int, hooks ...bun.QueryHook) (*Store, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: bad DSN: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	// No timeouts in the DSN means none at all: a MySQL that stops
	// answering holds a connection (and whatever waits on it) for ever.
	// Requests carry their own deadline; these bound what has none. The
	// reads outlast InnoDB's lock wait (50 s by default): a save waiting
	// for a row lock is slow, not dead.
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 60 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 60 * time.Second
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: bad DSN: %w", err)
	}
	sqldb := sql.OpenDB(connector)
	maxConns = cmp.Or(maxConns, DefaultMaxConns)
	sqldb.SetMaxOpenConns(maxConns)
	sqldb.SetMaxIdleConns(maxConns)
	sqldb.SetConnMaxLifetime(5 * time.Minute)
	// Reached before bun is: its dialect asks the server's version at once
	// and, failing, prints a bare log line beside the start's own error.
	if err := sqldb.PingContext(ctx); err != nil {
		sqldb.Close()
		var merr *mysql.MySQLError
		if errors.As(err, &merr) && merr.Number == errUnknownDatabase {
			return nil, fmt.Errorf("mysqlstore: the database %q does not exist on %s: create it first (CREATE DATABASE %s); the server creates its tables, not the database", cfg.DBName, cfg.Addr, cfg.DBName)
		}
		return nil, fmt.Errorf("mysqlstore: cannot reach MySQL at %s: %w", cfg.Addr, err)
	}
	return &Store{db: withHooks(bun.NewDB(sqldb, mysqldialect.New()), hooks), dialect: dialectMySQL}, nil
}

func withHooks(db *bun.DB, hooks []bun.QueryHook) *bun.DB {
	for _, h := range hooks {
		db = db.WithQueryHook(h)
	}
	return db
}

// errUnknownDatabase is MySQL's ER_BAD_DB_ERROR (1049).
const errUnknownDatabase = 1049

// OpenEmbedded opens an in-memory SQLite database. It starts empty and is
// gone when the process exits. One connection serialises the transactions,
// which is what keeps the conditional stock update exact. hooks see every
// query.
func OpenEmbedded(ctx context.Context, hooks ...bun.QueryHook) (*Store, error) {
	sqldb, err := sql.Open("sqlite", "file:seckill?mode=memory&_pragma=foreign_keys(1)&_time_format=sqlite")
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: open sqlite: %w", err)
	}
	sqldb.SetMaxOpenConns(1)
	sqldb.SetMaxIdleConns(1)
	sqldb.SetConnMaxLifetime(0)
	s := &Store{db: withHooks(bun.NewDB(sqldb, sqlitedialect.New()), hooks), dialect: dialectSQLite}
	if err := s.Ping(ctx); err != nil {
		sqldb.Close()
		return nil, fmt.Errorf("mysqlstore: sqlite: %w", err)
	}
	return s, nil
}

// DB exposes the bun handle (for tests and tools).
func (s *Store) DB() *bun.DB { return s.db }

func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

func (s *Store) Close() error { return s.db.Close() }

// Migrate applies the schema; running it again changes nothing. Concurrent
// starts wait for each other on bun/migrate's lock table.
func (s *Store) Migrate(ctx context.Context) error {
	sub, err := fs.Sub(migrationFiles, "migrations/"+string(s.dialect))
	if err != nil {
		return err
	}
	ms := migrate.NewMigrations()
	if err := ms.Discover(sub); err != nil {
		return fmt.Errorf("mysqlstore: migrations: %w", err)
	}
	m := migrate.NewMigrator(s.db, ms, migrate.WithTableName("seckill_migrations"),
		migrate.WithLocksTableName("seckill_migration_locks"), migrate.WithMarkAppliedOnSuccess(true))
	if err := m.Init(ctx); err != nil {
		return fmt.Errorf("mysqlstore: init migrations: %w", err)
	}
	if err := lockWithin(ctx, m, 30*time.Second); err != nil {
		return err
	}
	defer m.Unlock(context.WithoutCancel(ctx))
	if _, err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("mysqlstore: migrate: %w", err)
	}
	return nil
}

func lockWithin(ctx context.Context, m *migrate.Migrator, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := m.Lock(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mysqlstore: another process holds the migration lock "+
				"(table seckill_migration_locks; delete its row if that process died): %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

type userRow struct {
	bun.BaseModel `bun:"table:tb_user"`
	ID            int64     `bun:"id,pk,autoincrement"`
	Phone         string    `bun:"phone"`
	PhoneE164     *string   `bun:"phone_e164"`
	NickName      string    `bun:"nick_name"`
	CreateTime    time.Time `bun:"create_time"`
	UpdateTime    time.Time `bun:"update_time"`
}

type voucherRow struct {
	bun.BaseModel `bun:"table:tb_voucher"`
	ID            int64     `bun:"id,pk,autoincrement"`
	Title         string    `bun:"title"`
	PayValue      int64     `bun:"pay_value"`
	ActualValue   int64     `bun:"actual_value"`
	Type          int       `bun:"type"`
	Status        int       `bun:"status"`
	CreateTime    time.Time `bun:"create_time"`
	UpdateTime    time.Time `bun:"update_time"`
}

type seckillVoucherRow struct {
	bun.BaseModel `bun:"table:tb_seckill_voucher"`
	VoucherID     int64     `bun:"voucher_id,pk"`
	Stock         int64     `bun:"stock"`
	BeginTime     time.Time `bun:"begin_time"`
	EndTime       time.Time `bun:"end_time"`
	Buckets       int       `bun:"buckets"`
	Paused        int       `bun:"paused"`
	CreateTime    time.Time `bun:"create_time"`
	UpdateTime    time.Time `bun:"update_time"`
}

type orderRow struct {
	bun.BaseModel `bun:"table:tb_voucher_order"`
	ID            int64          `bun:"id,pk"`
	UserID        int64          `bun:"user_id"`
	VoucherID     int64          `bun:"voucher_id"`
	Status        int            `bun:"status"`
	PayBy         bun.NullTime   `bun:"pay_by"`
	CancelReason  sql.NullString `bun:"cancel_reason"`
	CreateTime    time.Time      `bun:"create_time"`
	UpdateTime    time.Time      `bun:"update_time"`
	// Traceparent is core.Order.Trace (NULL: none).
	Traceparent sql.NullString `bun:"traceparent"`
}

// order is the row as the domain's order.
func (r orderRow) order() core.Order {
	o := core.Order{ID: r.ID, UserID: r.UserID, VoucherID: r.VoucherID, CreatedAt: r.CreateTime.UTC(),
		Status: orderStatuses[r.Status], CancelReason: core.CancelReason(r.CancelReason.String), Trace: r.Traceparent.String}
	if o.Status == "" {
		o.Status = core.StatusCreated
	}
	if !r.PayBy.IsZero() {
		o.PayBy = r.PayBy.UTC()
	}
	return o
}

const (
	voucherTypeSeckill  = 1
	voucherStatusOnSale = 1
	// The classic codes of tb_voucher_order.status.
	orderStatusCreated   = 1
	orderStatusPaid      = 2
	orderStatusUsed      = 3
	orderStatusCancelled = 4
	orderStatusRefunding = 5
	orderStatusRefunded  = 6
)

// orderStatuses reads the classic codes as the lifecycle's statuses: a
// voucher used is one paid for, and a refund under way shows as refunded
// (the shopper's money is on its way back).
var orderStatuses = map[int]core.OrderStatus{
	orderStatusCreated: core.StatusCreated, orderStatusPaid: core.StatusPaid, orderStatusUsed: core.StatusPaid,
	orderStatusCancelled: core.StatusCancelled, orderStatusRefunding: core.StatusRefunded, orderStatusRefunded: core.StatusRefunded,
}

// liveStatuses are the codes of orders that hold their unit.
var liveStatuses = []int{orderStatusCreated, orderStatusPaid}

// errStockAnomaly aborts a batch transaction whose stock update would go
// below zero.
var errStockAnomaly = errors.New("stock would go below zero, or the voucher has no stock row")

// SaveOrders implements core.OrderStore. The batch is one transaction: per
// voucher, one multi-row INSERT that skips duplicates, then one conditional
// stock update by the number of rows really inserted. If a voucher's stock
// would go negative the transaction is rolled back and the orders are saved
// one by one, to single out the ones to reject.
func (s *Store) SaveOrders(ctx context.Context, orders []core.Order) (core.SaveResult, error) {
	res, err := s.saveBatch(ctx, orders)
	if !errors.Is(err, errStockAnomaly) {
		return res, err
	}
	var total core.SaveResult
	for _, o := range orders {
		r, err := s.saveBatch(ctx, []core.Order{o})
		switch {
		case errors.Is(err, errStockAnomaly):
			total.Rejected = append(total.Rejected, core.Rejection{Order: o, Reason: errStockAnomaly.Error()})
		case err != nil:
			return total, err
		default:
			total.Created += r.Created
			total.Duplicates += r.Duplicates
			total.Rejected = append(total.Rejected, r.Rejected...)
		}
	}
	return total, nil
}

// errSkippedForNothing: an insert skipped an order that no row explains
// (not the same order, not its buyer's other live order); the batch is
// tried again rather than the order refused.
var errSkippedForNothing = errors.New("mysqlstore: an order skipped for no row")

// conflictRetries bounds the immediate retries of a transaction that lost
// a deadlock: consumers saving overlapping batches (after a claim) take the
// unique-index locks in different orders, and one of them is chosen as the
// victim. The pipeline's backoff covers anything longer.
const conflictRetries = 5

func (s *Store) saveBatch(ctx context.Context, orders []core.Order) (res core.SaveResult, err error) {
	err = retryConflicts(ctx, func() error {
		res, err = s.saveBatchOnce(ctx, orders)
		return err
	})
	return res, err
}

// retryConflicts runs tx again while it loses deadlocks or lock waits.
func retryConflicts(ctx context.Context, tx func() error) error {
	for attempt := 1; ; attempt++ {
		err := tx()
		if err == nil || attempt >= conflictRetries || !isTransientConflict(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
		}
	}
}

func (s *Store) saveBatchOnce(ctx context.Context, orders []core.Order) (core.SaveResult, error) {
	byVoucher := make(map[int64][]orderRow)
	now := time.Now().UTC()
	for _, o := range orders {
		byVoucher[o.VoucherID] = append(byVoucher[o.VoucherID], orderRow{
			ID: o.ID, UserID: o.UserID, VoucherID: o.VoucherID, Status: orderStatusCreated,
			PayBy: nullTime(o.PayBy), CreateTime: o.CreatedAt.UTC(), UpdateTime: now, Traceparent: nullString(o.Trace),
		})
	}
	// Vouchers in a fixed order, so two batches never lock stock rows in
	// opposite orders (a deadlock).
	vouchers := make([]int64, 0, len(byVoucher))
	for v := range byVoucher {
		vouchers = append(vouchers, v)
	}
	slices.Sort(vouchers)

	var res core.SaveResult
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res = core.SaveResult{}
		for _, v := range vouchers {
			rows := byVoucher[v]
			r, err := tx.NewInsert().Model(&rows).Column("id", "user_id", "voucher_id", "pay_by", "create_time", "traceparent").Ignore().Returning("").Exec(ctx)
			if err != nil {
				return fmt.Errorf("insert orders: %w", err)
			}
			inserted, err := r.RowsAffected()
			if err != nil {
				return err
			}
			res.Created += int(inserted)
			if int(inserted) < len(rows) {
				// Some rows were skipped: each is a redelivery of an order
				// already persisted, or an anomaly that must not pass for one.
				rejected, err := skippedAnomalies(ctx, tx, rows, s.dialect == dialectMySQL)
				if err != nil {
					return err
				}
				res.Rejected = append(res.Rejected, rejected...)
				res.Duplicates += len(rows) - int(inserted) - len(rejected)
			}
			if inserted == 0 {
				continue
			}
			u, err := tx.NewUpdate().Table("tb_seckill_voucher").
				Set("stock = stock - ?", inserted).
				Set("update_time = ?", now).
				Where("voucher_id = ?", v).
				Where("stock >= ?", inserted).
				Exec(ctx)
			if err != nil {
				return fmt.Errorf("take stock: %w", err)
			}
			if n, err := u.RowsAffected(); err != nil {
				return err
			} else if n != 1 {
				return errStockAnomaly
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, errStockAnomaly) {
			return core.SaveResult{}, err
		}
		return core.SaveResult{}, fmt.Errorf("mysqlstore: save orders: %w", err)
	}
	return res, nil
}

// skippedAnomalies looks up the rows an INSERT IGNORE of rows skipped, in
// the same transaction, and returns those that are not the same order
// again: an id that is another (user, voucher)'s order (an id reused after
// the ID worker's counter went back), or a buyer who already holds another
// order of the voucher under another id.
//
// The look-ups read what is committed (locking reads, on MySQL), not the
// transaction's snapshot: a row skipped because another consumer's
// transaction inserted it and committed while this one waited on its lock
// is not in a snapshot taken before (an earlier voucher of the batch
// looked something up), and a plain read took the same order for a
// second order of its buyer, whose unit the pipeline then gave back.
// SQLite has one writer at a time: its reads see every commit before.
func skippedAnomalies(ctx context.Context, tx bun.Tx, rows []orderRow, lockingReads bool) ([]core.Rejection, error) {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	committed := func(q *bun.SelectQuery) *bun.SelectQuery {
		if lockingReads {
			return q.For("UPDATE")
		}
		return q
	}
	var have []orderRow
	if err := committed(tx.NewSelect().Model(&have).Column("id", "user_id", "voucher_id").
		Where("id IN (?)", bun.List(ids))).Scan(ctx); err != nil {
		return nil, fmt.Errorf("look up skipped orders: %w", err)
	}
	byID := make(map[int64]orderRow, len(have))
	for _, h := range have {
		byID[h.ID] = h
	}
	var out []core.Rejection
	for _, r := range rows {
		o := core.Order{ID: r.ID, UserID: r.UserID, VoucherID: r.VoucherID, CreatedAt: r.CreateTime}
		h, found := byID[r.ID]
		switch {
		case !found:
			var held int64
			// Rare (the buyers' hash was lost): one more look-up, for the
			// order the buyer's live mark should name instead.
			if err := committed(tx.NewSelect().Model((*orderRow)(nil)).Column("id").
				Where("user_id = ? AND voucher_id = ? AND status IN (?)", r.UserID, r.VoucherID, bun.List(liveStatuses)).
				Limit(1)).Scan(ctx, &held); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, fmt.Errorf("look up the buyer's other order: %w", err)
			}
			if held == 0 {
				// Skipped, yet neither it nor another live order of its
				// buyer is there: nothing to refuse it for. Saved again
				// later, it is whatever the database then says.
				return nil, fmt.Errorf("order %d was skipped and no order stands in its way: %w", r.ID, errSkippedForNothing)
			}
			out = append(out, core.Rejection{Order: o, Kind: core.DeadLetterBuyerHoldsAnother, Held: held,
				Reason: fmt.Sprintf("the buyer already holds another order of this voucher (%d)", held)})
		case h.UserID != r.UserID || h.VoucherID != r.VoucherID:
			out = append(out, core.Rejection{Order: o, Kind: core.DeadLetterIDCollision,
				Reason: fmt.Sprintf("order id already taken by user %d's order of voucher %d", h.UserID, h.VoucherID)})
		}
	}
	return out, nil
}

// FindOrder implements core.OrderReader.
func (s *Store) FindOrder(ctx context.Context, orderID int64) (core.Order, error) {
	row, err := findOne[orderRow](ctx, s.db, "id", orderID, core.ErrOrderNotFound)
	if errors.Is(err, core.ErrOrderNotFound) {
		return core.Order{}, err
	}
	if err != nil {
		return core.Order{}, fmt.Errorf("mysqlstore: find order: %w", err)
	}
	return row.order(), nil
}

// OrderOfBuyer implements core.OrderReader: the buyer's live order of the
// voucher, else their latest.
func (s *Store) OrderOfBuyer(ctx context.Context, userID, voucherID int64) (core.Order, error) {
	var row orderRow
	err := s.db.NewSelect().Model(&row).Where("user_id = ? AND voucher_id = ?", userID, voucherID).
		// The last reserved: by time, not id (each instance takes its ids
		// in blocks, so ids of one second do not follow the time).
		OrderExpr("CASE WHEN status IN (?) THEN 0 ELSE 1 END, create_time DESC, id DESC", bun.List(liveStatuses)).Limit(1).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return core.Order{}, core.ErrOrderNotFound
	}
	if err != nil {
		return core.Order{}, fmt.Errorf("mysqlstore: order of buyer: %w", err)
	}
	return row.order(), nil
}

// CreateVoucher implements core.VoucherRepository.
func (s *Store) CreateVoucher(ctx context.Context, v *core.Voucher) error {
	now := time.Now().UTC()
	return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		row := voucherRow{Title: v.Title, PayValue: v.PayValue, ActualValue: v.ActualValue,
			Type: voucherTypeSeckill, Status: voucherStatusOnSale, CreateTime: now, UpdateTime: now}
		if _, err := tx.NewInsert().Model(&row).Exec(ctx); err != nil {
			return fmt.Errorf("mysqlstore: insert voucher: %w", err)
		}
		sk := seckillVoucherRow{VoucherID: row.ID, Stock: v.Stock, BeginTime: v.BeginAt.UTC(),
			EndTime: v.EndAt.UTC(), Buckets: v.BucketCount(), Paused: int(v.Pause), CreateTime: now, UpdateTime: now}
		if _, err := tx.NewInsert().Model(&sk).Exec(ctx); err != nil {
			return fmt.Errorf("mysqlstore: insert seckill voucher: %w", err)
		}
		if r := v.Room; r != nil {
			room := roomRow{VoucherID: row.ID, OpensAt: r.OpensAt.UTC(), AdmitPerSecond: r.AdmitPerSecond,
				AdmissionTTLMs: r.AdmissionTTL.Milliseconds(), Seed: r.Seed[:], SaltKey: r.SaltKey, CreateTime: now,
				BeaconURL: nullString(r.Beacon.URL), BeaconRound: sql.NullInt64{Int64: int64(r.Beacon.Round), Valid: r.Beacon.On()}}
			if _, err := tx.NewInsert().Model(&room).Exec(ctx); err != nil {
				return fmt.Errorf("mysqlstore: insert voucher room: %w", err)
			}
		}
		v.ID = row.ID
		return nil
	})
}

// DeleteVoucher implements core.VoucherRepository.
func (s *Store) DeleteVoucher(ctx context.Context, id int64) error {
	return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewDelete().Model((*roomRow)(nil)).Where("voucher_id = ?", id).Exec(ctx); err != nil {
			return fmt.Errorf("mysqlstore: delete voucher room: %w", err)
		}
		if _, err := tx.NewDelete().Model((*seckillVoucherRow)(nil)).Where("voucher_id = ?", id).Exec(ctx); err != nil {
			return fmt.Errorf("mysqlstore: delete seckill voucher: %w", err)
		}
		if _, err := tx.NewDelete().Model((*voucherRow)(nil)).Where("id = ?", id).Exec(ctx); err != nil {
			return fmt.Errorf("mysqlstore: delete voucher: %w", err)
		}
		return nil
	})
}

// FindVoucher implements core.VoucherRepository.
func (s *Store) FindVoucher(ctx context.Context, id int64) (core.Voucher, error) {
	return findVoucher(ctx, s.db, id)
}

// HighestVoucherID is the highest voucher id the database holds (0:
// none): core.HighestVoucher, the ceiling above which an id is answered
// unknown without a look-up of its own.
func (s *Store) HighestVoucherID(ctx context.Context) (int64, error) {
	var highest sql.NullInt64
	if err := s.db.NewSelect().TableExpr("tb_seckill_voucher").ColumnExpr("MAX(voucher_id)").Scan(ctx, &highest); err != nil {
		return 0, fmt.Errorf("mysqlstore: highest voucher: %w", err)
	}
	return highest.Int64, nil
}

func findVoucher(ctx context.Context, db bun.IDB, id int64) (core.Voucher, error) {
	var row voucherWithRoom
	err := selectVouchers(db).Where("v.id = ?", id).Scan(ctx, &row)
	if errors.Is(err, sql.ErrNoRows) {
		return core.Voucher{}, core.ErrVoucherNotFound
	}
	if err != nil {
		return core.Voucher{}, fmt.Errorf("mysqlstore: find voucher: %w", err)
	}
	return row.voucher(), nil
}

// voucherWithRoom is a voucher as the domain has it: its row, its seckill
// row's stock, window and buckets, and its room if it has one.
type voucherWithRoom struct {
	voucherRow     `bun:",extend"`
	Stock          int64          `bun:"stock"`
	BeginTime      time.Time      `bun:"begin_time"`
	EndTime        time.Time      `bun:"end_time"`
	Buckets        int            `bun:"buckets"`
	Paused         int            `bun:"paused"`
	RoomOpensAt    bun.NullTime   `bun:"opens_at"`
	AdmitPerSecond sql.NullInt64  `bun:"admit_per_second"`
	AdmissionTTLMs sql.NullInt64  `bun:"admission_ttl_ms"`
	Seed           []byte         `bun:"seed"`
	SaltKey        []byte         `bun:"salt_key"`
	BeaconURL      sql.NullString `bun:"beacon_url"`
	BeaconRound    sql.NullInt64  `bun:"beacon_round"`
}

// selectVouchers selects voucherWithRoom's columns.
func selectVouchers(db bun.IDB) *bun.SelectQuery {
	return db.NewSelect().
		ColumnExpr("v.id, v.title, v.pay_value, v.actual_value, sv.stock, sv.begin_time, sv.end_time, sv.buckets, sv.paused").
		ColumnExpr("r.opens_at, r.admit_per_second, r.admission_ttl_ms, r.seed, r.salt_key, r.beacon_url, r.beacon_round").
		TableExpr("tb_voucher AS v").
		Join("JOIN tb_seckill_voucher AS sv ON sv.voucher_id = v.id").
		Join("LEFT JOIN tb_voucher_room AS r ON r.voucher_id = v.id")
}

func (r voucherWithRoom) voucher() core.Voucher {
	v := core.Voucher{ID: r.ID, Title: r.Title, PayValue: r.PayValue, ActualValue: r.ActualValue,
		Stock: r.Stock, BeginAt: r.BeginTime.UTC(), EndAt: r.EndTime.UTC(), Buckets: r.Buckets, Pause: core.Pause(r.Paused)}
	if !r.RoomOpensAt.IsZero() && len(r.Seed) == 32 {
		room := &core.Room{OpensAt: r.RoomOpensAt.Time.UTC(), AdmitPerSecond: int(r.AdmitPerSecond.Int64),
			AdmissionTTL: time.Duration(r.AdmissionTTLMs.Int64) * time.Millisecond}
		copy(room.Seed[:], r.Seed)
		if len(r.SaltKey) == 32 {
			room.SaltKey = r.SaltKey
		}
		if r.BeaconURL.Valid {
			room.Beacon = core.RoomBeacon{URL: r.BeaconURL.String, Round: uint64(r.BeaconRound.Int64)}
		}
		v.Room = room
	}
	return v
}

// roomRow is a voucher's waiting room (core.Room).
type roomRow struct {
	bun.BaseModel  `bun:"table:tb_voucher_room"`
	VoucherID      int64          `bun:"voucher_id,pk"`
	OpensAt        time.Time      `bun:"opens_at"`
	AdmitPerSecond int            `bun:"admit_per_second"`
	AdmissionTTLMs int64          `bun:"admission_ttl_ms"`
	Seed           []byte         `bun:"seed"`
	SaltKey        []byte         `bun:"salt_key"`
	CreateTime     time.Time      `bun:"create_time"`
	BeaconURL      sql.NullString `bun:"beacon_url"`
	BeaconRound    sql.NullInt64  `bun:"beacon_round"`
}

var (
	_ core.OrderStore        = (*Store)(nil)
	_ core.OrderReader       = (*Store)(nil)
	_ core.VoucherRepository = (*Store)(nil)
	_ core.UserRepository    = (*Users)(nil)
)

// CurrentVouchers implements core.VoucherLister.
func (s *Store) CurrentVouchers(ctx context.Context, now time.Time, limit int) ([]core.Voucher, error) {
	var rows []voucherWithRoom
	err := selectVouchers(s.db).
		Where("sv.end_time > ?", now.UTC()).
		OrderExpr("sv.begin_time, v.id").
		Limit(int64(limit)).
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: current vouchers: %w", err)
	}
	out := make([]core.Voucher, len(rows))
	for i, r := range rows {
		out[i] = r.voucher()
	}
	return out, nil
}

// nullTime is t, or NULL for the zero time.
func nullTime(t time.Time) bun.NullTime {
	if t.IsZero() {
		return bun.NullTime{}
	}
	return bun.NullTime{Time: t.UTC()}
}

// findOne is the row of T's table whose column is value, or notFound.
func findOne[T any](ctx context.Context, db bun.IDB, column string, value any, notFound error) (T, error) {
	var row T
	err := db.NewSelect().Model(&row).Where("? = ?", bun.Ident(column), value).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return row, notFound
	}
	return row, err
}

// nullString is s, NULL when empty.
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
