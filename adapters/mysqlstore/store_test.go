package mysqlstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// forEachStore runs fn against the embedded SQLite and, when configured,
// a fresh database on the real MySQL server; both are migrated.
func forEachStore(t *testing.T, fn func(t *testing.T, s *mysqlstore.Store)) {
	t.Helper()
	for _, name := range []string{"sqlite", "mysql"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var s *mysqlstore.Store
			var err error
			if name == "sqlite" {
				s, err = mysqlstore.OpenEmbedded(ctx)
			} else {
				dsn, ok := testenv.MySQLDatabase(t)
				if !ok {
					t.Skipf("%s is not set: real MySQL not tested (CI sets it)", testenv.MySQLDSNEnv)
				}
				s, err = mysqlstore.OpenMySQL(ctx, dsn, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			fn(t, s)
		})
	}
}

func newVoucher(t testing.TB, s *mysqlstore.Store, stock int64) core.Voucher {
	t.Helper()
	v := core.Voucher{Title: "v", PayValue: 1, ActualValue: 2, Stock: stock,
		BeginAt: time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond),
		EndAt:   time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)}
	if err := s.CreateVoucher(context.Background(), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func dbStock(t *testing.T, s *mysqlstore.Store, voucherID int64) int64 {
	t.Helper()
	v, err := s.FindVoucher(context.Background(), voucherID)
	if err != nil {
		t.Fatal(err)
	}
	return v.Stock
}

func orderCount(t *testing.T, s *mysqlstore.Store, voucherID int64) int {
	t.Helper()
	n, err := s.DB().NewSelect().Table("tb_voucher_order").Where("voucher_id = ?", voucherID).Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func order(id, user, voucher int64) core.Order {
	return core.Order{ID: id, UserID: user, VoucherID: voucher, CreatedAt: time.Now().UTC()}
}

func TestMigrateTwiceChangesNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		v := newVoucher(t, s, 3)
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatalf("second migrate: %v", err)
		}
		if dbStock(t, s, v.ID) != 3 {
			t.Fatal("second migrate lost data")
		}
	})
}

func TestVoucherRoundTrip(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		v := newVoucher(t, s, 7)
		got, err := s.FindVoucher(ctx, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Title != v.Title || got.Stock != 7 || !got.BeginAt.Equal(v.BeginAt) || !got.EndAt.Equal(v.EndAt) {
			t.Fatalf("read back %+v, wrote %+v", got, v)
		}
		if err := s.DeleteVoucher(ctx, v.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FindVoucher(ctx, v.ID); !errors.Is(err, core.ErrVoucherNotFound) {
			t.Fatalf("after delete: err = %v, want ErrVoucherNotFound", err)
		}
	})
}

func TestSaveOrdersInsertsAndTakesStock(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		a, b := newVoucher(t, s, 10), newVoucher(t, s, 10)
		res, err := s.SaveOrders(ctx, []core.Order{order(1, 1, a.ID), order(2, 2, a.ID), order(3, 1, b.ID)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Created != 3 || res.Duplicates != 0 || len(res.Rejected) != 0 {
			t.Fatalf("result %+v, want 3 created", res)
		}
		if dbStock(t, s, a.ID) != 8 || dbStock(t, s, b.ID) != 9 {
			t.Fatalf("stock a=%d b=%d, want 8 and 9", dbStock(t, s, a.ID), dbStock(t, s, b.ID))
		}
		got, err := s.FindOrder(ctx, 2)
		if err != nil || got.UserID != 2 || got.VoucherID != a.ID {
			t.Fatalf("FindOrder(2) = %+v, %v", got, err)
		}
		if _, err := s.FindOrder(ctx, 999); !errors.Is(err, core.ErrOrderNotFound) {
			t.Fatalf("FindOrder(999) err = %v, want ErrOrderNotFound", err)
		}
	})
}

func TestSaveOrdersCountsDuplicatesAsDone(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		v := newVoucher(t, s, 10)
		if _, err := s.SaveOrders(ctx, []core.Order{order(1, 1, v.ID)}); err != nil {
			t.Fatal(err)
		}
		// The same order again (a redelivery) is no error and takes no
		// stock. (Another order id for the same buyer is not the same
		// order: TestAReusedOrderIDIsAnAnomalyNotADuplicate.)
		res, err := s.SaveOrders(ctx, []core.Order{order(1, 1, v.ID), order(2, 2, v.ID)})
		if err != nil {
			t.Fatalf("duplicates blocked the batch: %v", err)
		}
		if res.Created != 1 || res.Duplicates != 1 || len(res.Rejected) != 0 {
			t.Fatalf("result %+v, want 1 created and 1 duplicate", res)
		}
		if n := dbStock(t, s, v.ID); n != 8 {
			t.Fatalf("stock = %d, want 8", n)
		}
	})
}

func TestSaveOrdersRejectsWhatWouldOversell(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		v, ok := newVoucher(t, s, 2), newVoucher(t, s, 5)
		res, err := s.SaveOrders(ctx, []core.Order{
			order(1, 1, v.ID), order(2, 2, v.ID), order(3, 3, v.ID), order(4, 1, ok.ID), order(5, 1, 987654),
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Created != 3 || len(res.Rejected) != 2 {
			t.Fatalf("result %+v, want 3 created and 2 rejected", res)
		}
		rejected := map[int64]bool{}
		for _, r := range res.Rejected {
			rejected[r.Order.ID] = true
		}
		if !rejected[3] || !rejected[5] {
			t.Fatalf("rejected %v, want orders 3 (no stock left) and 5 (no such voucher)", rejected)
		}
		if n := dbStock(t, s, v.ID); n != 0 {
			t.Fatalf("stock = %d, want 0, never negative", n)
		}
		if n := orderCount(t, s, v.ID); n != 2 {
			t.Fatalf("%d orders for the sold-out voucher, want 2", n)
		}
	})
}

// TestConcurrentOverlappingBatchesStayExact: consumers that received the
// same orders (a claim after a stall) persist each once, and the stock
// falls by exactly the number of rows. Each worker walks the orders from
// another offset in batches of 37, so batches overlap partly: a batch is
// part new, part duplicate, and only its new rows may take stock.
func TestConcurrentOverlappingBatchesStayExact(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		const stock, orders, batchSize = 300, 400, 37
		v := newVoucher(t, s, stock)
		all := make([]core.Order, orders)
		for i := range all {
			all[i] = order(int64(i+1), int64(i+1), v.ID)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var created int
		for w := range 4 {
			wg.Go(func() {
				// Every order, rotated by a stride that no batch boundary
				// of another worker lines up with.
				rotated := append(append([]core.Order{}, all[w*13:]...), all[:w*13]...)
				for i := 0; i < orders; i += batchSize {
					res, err := s.SaveOrders(context.Background(), rotated[i:min(i+batchSize, orders)])
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					created += res.Created
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		rows := orderCount(t, s, v.ID)
		left := dbStock(t, s, v.ID)
		if rows != stock || left != 0 || created != stock {
			t.Fatalf("rows=%d stock left=%d created=%d, want %d rows, 0 left, %d created", rows, left, created, stock, stock)
		}
	})
}

// TestPartlyPersistedBatchTakesStockForItsNewRowsOnly: a batch of ten of
// which four are already rows creates six and takes six from the stock.
func TestPartlyPersistedBatchTakesStockForItsNewRowsOnly(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		v := newVoucher(t, s, 100)
		batch := make([]core.Order, 10)
		for i := range batch {
			batch[i] = order(int64(i+1), int64(i+1), v.ID)
		}
		if _, err := s.SaveOrders(context.Background(), batch[3:7]); err != nil {
			t.Fatal(err)
		}
		res, err := s.SaveOrders(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		if res.Created != 6 || res.Duplicates != 4 || orderCount(t, s, v.ID) != 10 || dbStock(t, s, v.ID) != 90 {
			t.Fatalf("created %d, duplicates %d, rows %d, stock %d; want 6, 4, 10, 90",
				res.Created, res.Duplicates, orderCount(t, s, v.ID), dbStock(t, s, v.ID))
		}
	})
}

// TestAReusedOrderIDIsAnAnomalyNotADuplicate: INSERT IGNORE skips a row
// whose id is taken, or whose buyer already holds another order of the
// voucher; neither may pass for a redelivery. Each is rejected with its
// kind, takes no stock, and the true redelivery beside them is still a
// duplicate.
func TestAReusedOrderIDIsAnAnomalyNotADuplicate(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		v := newVoucher(t, s, 10)
		if _, err := s.SaveOrders(ctx, []core.Order{order(1, 1, v.ID), order(2, 2, v.ID)}); err != nil {
			t.Fatal(err)
		}
		batch := []core.Order{
			order(1, 1, v.ID), // the same order again: a duplicate
			order(2, 3, v.ID), // id 2 is user 2's: a reused id
			order(4, 1, v.ID), // user 1 holds order 1 already
			order(5, 5, v.ID), // new
		}
		res, err := s.SaveOrders(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[int64]core.DeadLetterReason{}
		for _, r := range res.Rejected {
			kinds[r.Order.ID] = r.Kind
		}
		if res.Created != 1 || res.Duplicates != 1 || len(res.Rejected) != 2 ||
			kinds[2] != core.DeadLetterIDCollision || kinds[4] != core.DeadLetterBuyerHoldsAnother {
			t.Fatalf("created %d, duplicates %d, rejected %+v; want 1, 1, and orders 2 (id_collision) and 4 (buyer_holds_another)",
				res.Created, res.Duplicates, res.Rejected)
		}
		if rows, stock := orderCount(t, s, v.ID), dbStock(t, s, v.ID); rows != 3 || stock != 7 {
			t.Fatalf("%d rows, stock %d; want 3 and 7", rows, stock)
		}
		got, err := s.FindOrder(ctx, 2)
		if err != nil || got.UserID != 2 {
			t.Fatalf("order 2 is %+v (%v), want user 2's still", got, err)
		}
	})
}

func TestUserIDByPhoneCreatesOnceUnderRace(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ids := make([]int64, 8)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				id, err := s.Users().UserIDByPhone(context.Background(), "13800000000")
				if err != nil {
					t.Error(err)
				}
				ids[i] = id
			})
		}
		wg.Wait()
		for _, id := range ids {
			if id != ids[0] || id <= 0 {
				t.Fatalf("ids %v: want one positive id", ids)
			}
		}
		other, err := s.Users().UserIDByPhone(context.Background(), "13800000001")
		if err != nil || other == ids[0] {
			t.Fatalf("second phone got id %d (%v)", other, err)
		}
	})
}

// TestAMissingDatabaseSaysToCreateIt: the server creates its tables, not
// the database; a DSN naming a database that does not exist stops the
// start with one line that says so (and no stray driver log beside it).
func TestAMissingDatabaseSaysToCreateIt(t *testing.T) {
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set: real MySQL not tested (CI sets it)", testenv.MySQLDSNEnv)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = "seckill_missing_" + testenv.RandomSuffix()
	_, err = mysqlstore.OpenMySQL(context.Background(), cfg.FormatDSN(), 0)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "CREATE DATABASE "+cfg.DBName) {
		t.Fatalf("a missing database: %v, want it named with the CREATE DATABASE to run", err)
	}
}

// TestMaxOrderSequenceIsOfOneDayAndRange: the floor of an ID worker's lane
// is the highest sequence (an id's low 32 bits) in the lane's range among
// the day's orders — not another lane's, not another day's.
func TestMaxOrderSequenceIsOfOneDayAndRange(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		epoch := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)
		day := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
		at := func(t time.Time, seq int64) int64 { return (t.Unix()-epoch.Unix())<<32 | seq }
		const lane = 1 << 28
		v := newVoucher(t, s, 10)
		ids := []int64{
			at(day.Add(time.Hour), 100), at(day.Add(2*time.Hour), 40), // lane 0
			at(day.Add(time.Hour), 3*lane+7),  // lane 3
			at(day.Add(-time.Hour), 5000),     // the day before, lane 0
			at(day.Add(-time.Hour), 2*lane+9), // the day before, lane 2
		}
		var orders []core.Order
		for i, id := range ids {
			orders = append(orders, order(id, int64(i+1), v.ID))
		}
		if _, err := s.SaveOrders(ctx, orders); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ lo, hi, want int64 }{
			{0, lane - 1, 100}, {3 * lane, 4*lane - 1, 3*lane + 7}, {2 * lane, 3*lane - 1, 0}, {lane, 2*lane - 1, 0},
		} {
			if got, err := s.Ledger().MaxOrderSequence(ctx, epoch, day, c.lo, c.hi); err != nil || got != c.want {
				t.Errorf("MaxOrderSequence in [%d, %d]: %d, %v; want %d", c.lo, c.hi, got, err, c.want)
			}
		}
	})
}

// TestTheSameOrderSavedTwiceAtOnceIsADuplicateNotAnotherOrder: two
// consumers save one order at once (Pub/Sub's every process, or a claim
// racing a slow consumer). The one that waits on the other's row lock
// skips it, then looks it up: in a transaction whose snapshot was taken
// before the other committed (an earlier voucher of its batch looked
// something up), a plain read does not see the row, and the order was
// taken for a second order of its buyer — buyer_holds_another, whose unit
// the pipeline then gave back: one unit sold twice (the comparison lab's
// pubsub history, 67 reservations of 64 units). The look-up reads the
// committed rows: a duplicate.
func TestTheSameOrderSavedTwiceAtOnceIsADuplicateNotAnotherOrder(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		v1, v2 := newVoucher(t, s, 5), newVoucher(t, s, 5)
		earlier := core.Order{ID: 9101, UserID: 1, VoucherID: v1.ID, CreatedAt: time.Now().UTC()}
		if _, err := s.SaveOrders(ctx, []core.Order{earlier}); err != nil {
			t.Fatal(err)
		}
		x := core.Order{ID: 9201, UserID: 2, VoucherID: v2.ID, CreatedAt: time.Now().UTC()}
		// The other consumer's transaction: x inserted, not yet committed.
		other, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.ExecContext(ctx, "INSERT INTO tb_voucher_order (id, user_id, voucher_id, status, create_time, update_time) VALUES (?, ?, ?, 1, ?, ?)",
			x.ID, x.UserID, x.VoucherID, x.CreatedAt, x.CreatedAt); err != nil {
			other.Rollback()
			if s.DB().Dialect().Name().String() == "sqlite" {
				t.Skip("SQLite serializes writers: no two saves at once")
			}
			t.Fatal(err)
		}
		done := make(chan core.SaveResult, 1)
		go func() {
			// earlier again (a redelivery: looked up, the snapshot taken),
			// then x, which waits for the other transaction.
			res, err := s.SaveOrders(ctx, []core.Order{earlier, x})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		time.Sleep(300 * time.Millisecond) // the save is waiting on x's row lock
		if _, err := other.ExecContext(ctx, "UPDATE tb_seckill_voucher SET stock = stock - 1 WHERE voucher_id = ?", x.VoucherID); err != nil {
			t.Fatal(err)
		}
		if err := other.Commit(); err != nil {
			t.Fatal(err)
		}
		res := <-done
		if len(res.Rejected) != 0 || res.Duplicates != 2 || res.Created != 0 {
			t.Fatalf("saving an order another consumer just committed: %+v; want 2 duplicates and nothing refused", res)
		}
	})
}

// TestOrderCountsNameEachCancellationsReason: the dashboard's counts keep
// an operator's discard apart from a shopper's cancel (the operator's run
// saw discards counted as the shoppers'), and expiry apart from both.
func TestOrderCountsNameEachCancellationsReason(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		v := newVoucher(t, s, 10)
		var orders []core.Order
		for i := int64(1); i <= 5; i++ {
			o := order(900+i, i, v.ID)
			o.PayBy = time.Now().Add(-time.Second).UTC()
			orders = append(orders, o)
		}
		if _, err := s.SaveOrders(ctx, orders); err != nil {
			t.Fatal(err)
		}
		life := s.Lifecycle()
		for id, reason := range map[int64]core.CancelReason{901: core.CancelShopper, 902: core.CancelDiscarded, 903: core.CancelDiscarded, 904: core.CancelExpired} {
			if _, err := life.CancelOrder(ctx, id, 0, reason, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		counts, err := s.Ledger().OrderCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if counts["cancelled by shopper"] != 1 || counts["discarded by operator"] != 2 || counts["expired"] != 1 || counts["unpaid"] != 1 {
			t.Fatalf("counts %v: want 1 by shopper, 2 discarded, 1 expired, 1 unpaid", counts)
		}
	})
}
