package mysqlstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/core"
)

// legacyUser writes a user as a server from before normalisation did: the
// phone as typed, no E.164 form.
func legacyUser(t *testing.T, s *mysqlstore.Store, phone string, created time.Time) int64 {
	t.Helper()
	var id int64
	err := s.DB().NewRaw("INSERT INTO tb_user (phone, nick_name, create_time, update_time) VALUES (?, 'legacy', ?, ?) RETURNING id",
		phone, created, created).Scan(context.Background(), &id)
	if err != nil {
		// MySQL before 8.0.22 / MariaDB has no RETURNING on INSERT.
		res, err := s.DB().NewRaw("INSERT INTO tb_user (phone, nick_name, create_time, update_time) VALUES (?, 'legacy', ?, ?)",
			phone, created, created).Exec(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		id, _ = res.LastInsertId()
	}
	return id
}

func normalizeCN(p string) (string, error) { return core.NormalizePhone(p, "CN") }

func TestLegacyPhonesAreNormalisedAndCollisionsReported(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		t0 := time.Now().UTC().Add(-time.Hour)
		forms := []string{"13811112222", "8613811112222", "+8613811112222", "008613811112222"}
		var ids []int64
		for i, f := range forms {
			ids = append(ids, legacyUser(t, s, f, t0.Add(time.Duration(i)*time.Minute)))
		}
		alone := legacyUser(t, s, "13922223333", t0)
		broken := legacyUser(t, s, "12ab", t0)
		rep, err := s.Users().NormalizePhones(ctx, normalizeCN)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Unreadable != 1 {
			t.Errorf("unreadable = %d, want 1 (user %d's 12ab)", rep.Unreadable, broken)
		}
		if len(rep.Collisions) != 1 || rep.Collisions[0].Phone != "+8613811112222" || !slices.Equal(rep.Collisions[0].UserIDs, ids) {
			t.Fatalf("collisions %+v, want +8613811112222 shared by %v", rep.Collisions, ids)
		}
		// The phone logs in as the oldest of its users, whatever form it
		// is stored in.
		if got, err := s.Users().UserIDByPhone(ctx, "+8613811112222"); err != nil || got != ids[0] {
			t.Fatalf("the shared phone logs in as %d (%v), want the oldest, %d", got, err, ids[0])
		}
		// A phone nobody shares is stored in E.164 now, and is its user.
		if got, _ := s.Users().UserIDByPhone(ctx, "+8613922223333"); got != alone {
			t.Fatalf("+8613922223333 logs in as %d, want %d", got, alone)
		}
		var stored string
		if err := s.DB().NewRaw("SELECT phone FROM tb_user WHERE id = ?", alone).Scan(ctx, &stored); err != nil || stored != "+8613922223333" {
			t.Fatalf("user %d's phone is stored as %q (%v), want the E.164 form", alone, stored, err)
		}
		// Running again changes nothing and reports the same.
		again, err := s.Users().NormalizePhones(ctx, normalizeCN)
		if err != nil || again.Normalized != 0 || again.Unreadable != 0 || len(again.Collisions) != 1 {
			t.Fatalf("second run: %+v, %v; want nothing new and the same collision", again, err)
		}
	})
}

func TestOrderOfBuyerFindsThePersistedOrder(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		v := newVoucher(t, s, 5)
		o := core.Order{ID: 4242, UserID: 7, VoucherID: v.ID, CreatedAt: time.Now().UTC()}
		if _, err := s.SaveOrders(ctx, []core.Order{o}); err != nil {
			t.Fatal(err)
		}
		got, err := s.OrderOfBuyer(ctx, 7, v.ID)
		if err != nil || got.ID != 4242 {
			t.Fatalf("OrderOfBuyer = %+v, %v; want order 4242", got, err)
		}
		if _, err := s.OrderOfBuyer(ctx, 8, v.ID); err != core.ErrOrderNotFound {
			t.Fatalf("a user without an order: %v, want ErrOrderNotFound", err)
		}
	})
}

// TestTheBuyersLastOrderIsTheLastReserved: a shopper who cancelled, bought
// again at once on another instance and cancelled again is shown the
// second order, though its id is the smaller (each instance takes its
// ids in blocks: ids of one second do not follow the time). Found by the
// lifecycle checker: the order read showed the first.
func TestTheBuyersLastOrderIsTheLastReserved(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		v := newVoucher(t, s, 5)
		at := time.Now().UTC().Truncate(time.Second)
		first := core.Order{ID: 5001, UserID: 7, VoucherID: v.ID, CreatedAt: at.Add(10 * time.Millisecond)}
		second := core.Order{ID: 4001, UserID: 7, VoucherID: v.ID, CreatedAt: at.Add(14 * time.Millisecond)}
		for _, o := range []core.Order{first, second} {
			if _, err := s.SaveOrders(ctx, []core.Order{o}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Lifecycle().CancelOrder(ctx, o.ID, 7, core.CancelShopper, at.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := s.OrderOfBuyer(ctx, 7, v.ID); err != nil || got.ID != second.ID {
			t.Fatalf("OrderOfBuyer = order %d, %v; want the last reserved, %d", got.ID, err, second.ID)
		}
		if got, err := s.Users().OrdersOfUser(ctx, 7, 10); err != nil || len(got) != 2 || got[0].ID != second.ID {
			t.Fatalf("OrdersOfUser = %+v, %v; want the last reserved first", got, err)
		}
	})
}
