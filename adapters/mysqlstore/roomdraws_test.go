package mysqlstore_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/room"
)

// TestARoomsDrawIsKeptOnceAsFirstSaved: a draw larger than one INSERT is
// read back in order with its beacon value; a second save (another
// instance's, or after Redis lost the room and drew again) changes
// nothing.
func TestARoomsDrawIsKeptOnceAsFirstSaved(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		draws := s.RoomDraws()
		draw := make([]room.DrawEntry, 2500)
		for i := range draw {
			draw[i] = room.DrawEntry{Key: fmt.Sprintf("%064x", i), UserID: int64(1000 + i)}
		}
		v := roomVoucherIn(t, s, core.RoomBeacon{URL: "https://beacon.example/chain", Round: 42})
		if kept, err := draws.LoadDraw(ctx, v.ID); err != nil || len(kept.Entries) != 0 || kept.Beacon != "" {
			t.Fatalf("a room never drawn: %+v, %v", kept, err)
		}
		beacon := fmt.Sprintf("%064x", 99)
		if err := draws.SaveDraw(ctx, v.ID, room.KeptDraw{Entries: draw, Beacon: beacon}); err != nil {
			t.Fatal(err)
		}
		other := slices.Clone(draw[:10])
		other[0].UserID = 1
		if err := draws.SaveDraw(ctx, v.ID, room.KeptDraw{Entries: other, Beacon: room.BeaconMissed}); err != nil {
			t.Fatal(err)
		}
		kept, err := draws.LoadDraw(ctx, v.ID)
		if err != nil || !slices.Equal(kept.Entries, draw) || kept.Beacon != beacon {
			t.Fatalf("kept %d entries and beacon %q (%v), want the first save's %d in order and its beacon", len(kept.Entries), kept.Beacon, err, len(draw))
		}
	})
}

// roomVoucherIn creates a room voucher naming beacon.
func roomVoucherIn(t *testing.T, s *mysqlstore.Store, beacon core.RoomBeacon) core.Voucher {
	t.Helper()
	seed, _ := core.NewRoomSeed()
	saltKey, _ := core.NewRoomSeed()
	v := core.Voucher{Title: "r", PayValue: 1, ActualValue: 2, Stock: 5,
		BeginAt: time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond), EndAt: time.Now().Add(2 * time.Hour).UTC().Truncate(time.Millisecond),
		Room: &core.Room{OpensAt: time.Now().UTC().Truncate(time.Millisecond), AdmitPerSecond: 7, AdmissionTTL: 90 * time.Second, Seed: seed,
			SaltKey: saltKey[:], Beacon: beacon}}
	if err := s.CreateVoucher(context.Background(), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAVoucherKeepsItsRoom: a room voucher reads back with its settings,
// seed, salt key and beacon; a plain one without a room.
func TestAVoucherKeepsItsRoom(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		v := roomVoucherIn(t, s, core.RoomBeacon{URL: "https://api.drand.sh/52db9ba7", Round: 1 << 40})
		got, err := s.FindVoucher(ctx, v.ID)
		if err != nil || got.Room == nil || !reflect.DeepEqual(*got.Room, *v.Room) {
			t.Fatalf("read back %+v (%v), want the room %+v", got.Room, err, v.Room)
		}
		plain := newVoucher(t, s, 3)
		if got, _ := s.FindVoucher(ctx, plain.ID); got.Room != nil {
			t.Fatalf("a plain voucher reads back with a room %+v", got.Room)
		}
		listed, err := s.CurrentVouchers(ctx, time.Now(), 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range listed {
			if (l.ID == v.ID) != (l.Room != nil) {
				t.Fatalf("listed %d with room %+v", l.ID, l.Room)
			}
		}
	})
}
