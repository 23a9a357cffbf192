package mysqlstore_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// withHistory makes a voucher with live orders of users 1..live and
// cancelled orders of users after them, inserted in bulk as a long sale's
// history would have left them.
func withHistory(t testing.TB, s *mysqlstore.Store, live, cancelled int) core.Voucher {
	t.Helper()
	ctx := context.Background()
	v := newVoucher(t, s, int64(live)+10)
	var orders []core.Order
	for u := 1; u <= live; u++ {
		orders = append(orders, order(v.ID*1_000_000+int64(u), int64(u), v.ID))
	}
	if _, err := s.SaveOrders(ctx, orders); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Format("2006-01-02 15:04:05.000")
	for from := 0; from < cancelled; from += 1000 {
		var values []string
		for i := from; i < min(from+1000, cancelled); i++ {
			id := v.ID*1_000_000 + int64(live+1+i)
			values = append(values, fmt.Sprintf("(%d, %d, %d, 4, 'shopper', '%s', '%s')", id, live+1+i, v.ID, now, now))
		}
		if _, err := s.DB().ExecContext(ctx, "INSERT INTO tb_voucher_order (id, user_id, voucher_id, status, cancel_reason, create_time, update_time) VALUES "+
			strings.Join(values, ", ")); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// allocated is the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestASaleSnapshotReadsWhatIsLiveNotTheHistory: a rebuild's and an
// audit's snapshot of a voucher with 200 live orders costs what it costs
// whatever the cancelled orders behind them (the soak's heap spiked to
// 90 MB at 119k rows, mostly cancelled, at each 30 s audit): 20,000
// cancelled ones change it by less than half, where reading every row
// cost a hundred times as much.
func TestASaleSnapshotReadsWhatIsLiveNotTheHistory(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		light, heavy := withHistory(t, s, 200, 0), withHistory(t, s, 200, 20_000)
		ledger := s.Ledger()
		var lightErr, heavyErr error
		var live int
		lightBytes := allocated(func() { _, _, _, lightErr = ledger.SaleSnapshot(ctx, light.ID, nil) })
		heavyBytes := allocated(func() {
			var orders []core.Order
			_, orders, _, heavyErr = ledger.SaleSnapshot(ctx, heavy.ID, []int64{heavy.ID*1_000_000 + 500})
			live = len(orders)
		})
		if lightErr != nil || heavyErr != nil || live != 200 {
			t.Fatalf("snapshots: %v, %v; %d live orders, want 200", lightErr, heavyErr, live)
		}
		t.Logf("a snapshot of 200 live orders: %d bytes; with 20,000 cancelled behind them: %d bytes", lightBytes, heavyBytes)
		if heavyBytes > lightBytes*3/2 {
			t.Fatalf("the snapshot allocated %d bytes with 20,000 cancelled orders, %d without: it grows with the history", heavyBytes, lightBytes)
		}
	})
}

// BenchmarkSaleSnapshotOfALongSale is the figure: bytes a snapshot of 200
// live orders allocates with 0 and 100,000 cancelled orders behind them
// (go test -run '^$' -bench SaleSnapshot -benchmem ./adapters/mysqlstore).
func BenchmarkSaleSnapshotOfALongSale(b *testing.B) {
	ctx := context.Background()
	dsn, ok := testenv.MySQLDatabase(b)
	if !ok {
		b.Skipf("%s is not set: the figure is the real MySQL's", testenv.MySQLDSNEnv)
	}
	s, err := mysqlstore.OpenMySQL(ctx, dsn, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	for _, cancelled := range []int{0, 100_000} {
		v := withHistory(b, s, 200, cancelled)
		b.Run(fmt.Sprintf("cancelled=%d", cancelled), func(b *testing.B) {
			for b.Loop() {
				if _, _, _, err := s.Ledger().SaleSnapshot(ctx, v.ID, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
