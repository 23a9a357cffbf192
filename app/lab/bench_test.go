package lab

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
)

// TestPairedRatio: the bench's ratios are the median of per-round ratios,
// not a ratio of medians, which can pair a fast round of one side with a
// slow round of the other.
func TestPairedRatio(t *testing.T) {
	endpoint, bare := []float64{120, 60, 100}, []float64{100, 70, 50}
	if got := pairedRatio(endpoint, bare); math.Abs(got-1.2) > 1e-9 {
		t.Fatalf("paired ratio %.3f, want the median round's 1.2", got)
	}
	if ofMedians := medianOf(endpoint) / medianOf(bare); math.Abs(ofMedians-1.2) < 0.1 {
		t.Fatalf("the example does not tell the two statistics apart (%.3f)", ofMedians)
	}
}

// TestMedianCPUTakesEachProcessOnItsOwn: the full sale's CPU per request
// is each process's median over rounds, not one round's three figures
// (a round slow on the server can be fast on Redis).
func TestMedianCPUTakesEachProcessOnItsOwn(t *testing.T) {
	runs := []cpuShare{
		{Server: 30 * time.Microsecond, Redis: 1 * time.Microsecond, Load: 25 * time.Microsecond},
		{Server: 10 * time.Microsecond, Redis: 3 * time.Microsecond, Load: 20 * time.Microsecond},
		{Server: 20 * time.Microsecond, Redis: 2 * time.Microsecond, Load: 30 * time.Microsecond},
	}
	want := cpuShare{Server: 20 * time.Microsecond, Redis: 2 * time.Microsecond, Load: 25 * time.Microsecond}
	if got := medianCPU(runs); got != want {
		t.Fatalf("median CPU %v, want %v", got, want)
	}
}

// TestTheBenchCountsTheVouchersOnSaleItFinds: the warning the bench gives
// before a run counts the database's vouchers whose sale has not ended,
// and those only.
func TestTheBenchCountsTheVouchersOnSaleItFinds(t *testing.T) {
	dsn, ok := testenv.MySQLDatabase(t)
	if !ok {
		t.Skipf("%s is not set", testenv.MySQLDSNEnv)
	}
	ctx := context.Background()
	st, err := mysqlstore.OpenMySQL(ctx, dsn, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, end := range []time.Time{time.Now().Add(-time.Minute), time.Now().Add(time.Hour), time.Now().Add(2 * time.Hour)} {
		v := core.Voucher{Title: "v", PayValue: 1, ActualValue: 2, Stock: 1, BeginAt: time.Now().Add(-time.Hour), EndAt: end}
		if err := st.CreateVoucher(ctx, &v); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := vouchersOnSale(dsn); err != nil || n != 2 {
		t.Fatalf("vouchers on sale: %d, %v; want the 2 whose sale has not ended", n, err)
	}
}
