package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/deadletters"
)

// deadSource is a dead-letter source of n records, positions "1".."n",
// the order of record i being order i of voucher 100+i%3 and user i, its
// kind poison for every fourth, stock_anomaly otherwise, dead-lettered at
// base plus i seconds.
type deadSource struct {
	n    int
	base time.Time
}

func (s deadSource) DeadLettersAfter(_ context.Context, after string, max int64) ([]core.DeadLetter, error) {
	from := 0
	if after != "" {
		from, _ = strconv.Atoi(after)
	}
	var out []core.DeadLetter
	for i := from + 1; i <= s.n && int64(len(out)) < max; i++ {
		o := core.Order{ID: int64(i), UserID: int64(i), VoucherID: int64(100 + i%3), CreatedAt: s.base}
		reason := "stock_anomaly: the stock column is 0"
		body := core.EncodeOrder(o)
		if i%4 == 0 {
			reason, body = "poison: not an order", []byte(fmt.Sprintf("junk %d", i))
		}
		out = append(out, core.DeadLetter{Body: body, Reason: reason, Queue: "streamgroup", Attempt: 1,
			Consumer: "c", At: s.base.Add(time.Duration(i) * time.Second), Position: strconv.Itoa(i)})
	}
	return out, nil
}

// TestTheRegisterKeepsEachDeadLetterOnceUnderRacingCollectors: four
// collectors read one source of 1,000 records at once, in small batches,
// as four processes would; the register keeps each record once, its
// cursor ends at the last, and a stale collector changes nothing. The
// list pages through every letter once with no cap, filters on the
// server by reason, voucher and time, and counts the open ones.
func TestTheRegisterKeepsEachDeadLetterOnceUnderRacingCollectors(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		reg := s.DeadLetters()
		base := time.Now().UTC().Truncate(time.Second)
		source := core.DeadLetterSource{Name: "test:dead", Reader: deadSource{n: 1000, base: base}}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			c := &deadletters.Collector{Sources: []core.DeadLetterSource{source}, Register: reg, Batch: 37, Rounds: 100}
			wg.Go(func() { errs <- c.Collect(ctx) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if cur, err := reg.Cursor(ctx, source.Name); err != nil || cur != "1000" {
			t.Fatalf("cursor %q, %v; want 1000", cur, err)
		}
		if err := reg.Collect(ctx, source.Name, "500", "501", []deadletters.Letter{{Source: source.Name, Position: "9999",
			Reason: "poison", Body: []byte("x"), FirstFailed: base, LastFailed: base}}); err != nil {
			t.Fatal(err)
		}
		if open, err := reg.Open(ctx); err != nil || open != 1000 {
			t.Fatalf("%d open, %v; want the 1000 records once each (a stale collector keeps nothing)", open, err)
		}
		checkPaging(t, reg, base)
	})
}

// checkPaging pages through the register deadSource{1000} filled.
func checkPaging(t *testing.T, reg deadletters.Register, base time.Time) {
	t.Helper()
	ctx := context.Background()
	var positions []int
	after := int64(0)
	for pages := 0; ; pages++ {
		page, err := reg.List(ctx, deadletters.Filter{}, after, 300)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Letters {
			p, _ := strconv.Atoi(l.Position)
			positions = append(positions, p)
		}
		if page.Open != 1000 || pages > 4 {
			t.Fatalf("page %d: open %d; want 1000, in 4 pages", pages, page.Open)
		}
		if after = page.Next; after == 0 {
			break
		}
	}
	slices.Sort(positions)
	if len(positions) != 1000 || slices.Compact(positions)[999] != 1000 {
		t.Fatalf("paged through %d letters, want each of the 1000 once", len(positions))
	}
	f := deadletters.Filter{Reason: core.DeadLetterStockAnomaly, VoucherID: 101,
		Since: base.Add(100 * time.Second), Until: base.Add(200 * time.Second)}
	page, err := reg.List(ctx, f, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// i in [100, 200), i%3 == 1, i%4 != 0.
	want := 0
	for i := 100; i < 200; i++ {
		if i%3 == 1 && i%4 != 0 {
			want++
		}
	}
	if len(page.Letters) != want || page.Open != int64(want) {
		t.Fatalf("filtered: %d letters, %d open; want %d", len(page.Letters), page.Open, want)
	}
	l := page.Letters[0]
	if l.Order.VoucherID != 101 || l.Order.ID != l.Order.UserID || l.Reason != core.DeadLetterStockAnomaly ||
		l.Error != "the stock column is 0" || l.Backend != "streamgroup" || !l.FirstFailed.Equal(base.Add(time.Duration(l.Order.ID)*time.Second)) {
		t.Fatalf("letter %+v: want the record as the source wrote it", l)
	}
	if got, err := reg.Letter(ctx, l.ID); err != nil || string(got.Body) != string(core.EncodeOrder(core.Order{ID: l.Order.ID,
		UserID: l.Order.ID, VoucherID: 101, CreatedAt: base})) {
		t.Fatalf("letter %d: %+v, %v; want its body as delivered", l.ID, got, err)
	}
	if _, err := reg.Letter(ctx, 1<<40); !errors.Is(err, deadletters.ErrNotFound) {
		t.Fatalf("an unknown letter: %v, want ErrNotFound", err)
	}
}
