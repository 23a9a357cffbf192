package mysqlstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/adapters/testenv"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
)

// BenchmarkDeadLetters100k: 100,000 dead letters of one voucher,
// collected into the register, are listed by paging through every one
// (1,000 a page) and re-driven in one call. It reports the seconds of each
// (list-s, redrive-s) and fails if a letter was listed twice or missed, an
// order was persisted twice, or a letter was left open. On the real MySQL
// when SECKILL_TEST_MYSQL_DSN is set; else on the embedded SQLite, which
// the name says (a stand-in's figure never replaces a real one). Run with
// -benchtime 1x (make bench does).
func BenchmarkDeadLetters100k(b *testing.B) {
	const n = 100_000
	for range b.N {
		b.StopTimer()
		ctx := context.Background()
		var s *mysqlstore.Store
		var err error
		if dsn, ok := testenv.MySQLDatabase(b); ok {
			s, err = mysqlstore.OpenMySQL(ctx, dsn, 0)
		} else {
			b.Log("on the embedded SQLite: SECKILL_TEST_MYSQL_DSN is not set")
			s, err = mysqlstore.OpenEmbedded(ctx)
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		v := core.Voucher{Title: "bench", PayValue: 1, ActualValue: 2, Stock: n,
			BeginAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}
		if err := s.CreateVoucher(ctx, &v); err != nil {
			b.Fatal(err)
		}
		reg := s.DeadLetters()
		fillRegister(b, reg, v.ID, n)
		b.StartTimer()
		start := time.Now()
		listed := listAll(b, reg)
		listTook := time.Since(start)
		desk := deadletters.NewDesk(deadletters.DeskConfig{Register: reg, Store: s, Orders: s, PayWindow: time.Minute, Batch: 1000})
		start = time.Now()
		out, err := desk.Redrive(ctx, deadletters.Filter{}, time.Time{})
		redriveTook := time.Since(start)
		b.StopTimer()
		if err != nil || listed != n || out.Redriven != n || out.Skipped != 0 {
			b.Fatalf("listed %d, re-drive %+v %v; want %d each", listed, out, err, n)
		}
		checkPersistedOnce(b, s, reg, v.ID, n)
		b.ReportMetric(listTook.Seconds(), "list-s")
		b.ReportMetric(redriveTook.Seconds(), "redrive-s")
		s.Close()
	}
}

// fillRegister collects n letters, each an order of voucher, as a source
// would hand them over.
func fillRegister(b *testing.B, reg *mysqlstore.DeadLetters, voucher int64, n int) {
	ctx := context.Background()
	at := time.Now().UTC()
	prev := ""
	for from := 0; from < n; from += 1000 {
		letters := make([]deadletters.Letter, 0, 1000)
		for i := from + 1; i <= min(from+1000, n); i++ {
			o := core.Order{ID: int64(i), UserID: int64(i), VoucherID: voucher, CreatedAt: at}
			letters = append(letters, deadletters.LetterOf("bench:dead", core.DeadLetter{Body: core.EncodeOrder(o),
				Reason: "max_deliveries: delivered 6 times", Queue: "streamgroup", Attempt: 6, At: at, Position: strconv.Itoa(i)}))
		}
		next := letters[len(letters)-1].Position
		if err := reg.Collect(ctx, "bench:dead", prev, next, letters); err != nil {
			b.Fatal(err)
		}
		prev = next
	}
}

// listAll pages through every open letter and counts each once.
func listAll(b *testing.B, reg *mysqlstore.DeadLetters) int {
	seen := map[int64]bool{}
	for after := int64(0); ; {
		page, err := reg.List(context.Background(), deadletters.Filter{}, after, 1000)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range page.Letters {
			if seen[l.ID] {
				b.Fatalf("letter %d listed twice", l.ID)
			}
			seen[l.ID] = true
		}
		if after = page.Next; after == 0 {
			return len(seen)
		}
	}
}

// checkPersistedOnce: n rows of the voucher, n distinct ids, the stock
// column taken n times, nothing left open.
func checkPersistedOnce(b *testing.B, s *mysqlstore.Store, reg *mysqlstore.DeadLetters, voucher int64, n int) {
	ctx := context.Background()
	var rows, distinct, stock int64
	if err := s.DB().NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*), COUNT(DISTINCT id)").
		Where("voucher_id = ?", voucher).Scan(ctx, &rows, &distinct); err != nil {
		b.Fatal(err)
	}
	if err := s.DB().NewSelect().Table("tb_seckill_voucher").Column("stock").Where("voucher_id = ?", voucher).Scan(ctx, &stock); err != nil {
		b.Fatal(err)
	}
	open, err := reg.Open(ctx)
	if err != nil || rows != int64(n) || distinct != rows || stock != 0 || open != 0 {
		b.Fatalf("%d rows (%d ids), stock column %d, %d open (%v); want %d once each, 0, 0", rows, distinct, stock, open, err, n)
	}
}
