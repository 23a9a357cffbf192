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
)

// TestARoomsDrawIsKeptOnceAsFirstSaved: a draw larger than one INSERT is
// read back in order; a second save (another instance's, or after Redis
// lost the room and drew again) changes nothing.
func TestARoomsDrawIsKeptOnceAsFirstSaved(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		draws := s.RoomDraws()
		draw := make([]core.DrawEntry, 2500)
		for i := range draw {
			draw[i] = core.DrawEntry{Key: fmt.Sprintf("%064x", i), UserID: int64(1000 + i)}
		}
		if kept, err := draws.LoadDraw(ctx, 7); err != nil || len(kept) != 0 {
			t.Fatalf("a room never drawn: %d entries, %v", len(kept), err)
		}
		if err := draws.SaveDraw(ctx, 7, draw); err != nil {
			t.Fatal(err)
		}
		other := slices.Clone(draw[:10])
		other[0].UserID = 1
		if err := draws.SaveDraw(ctx, 7, other); err != nil {
			t.Fatal(err)
		}
		kept, err := draws.LoadDraw(ctx, 7)
		if err != nil || !slices.Equal(kept, draw) {
			t.Fatalf("kept %d entries (%v), want the first save's %d in order", len(kept), err, len(draw))
		}
	})
}

// TestAVoucherKeepsItsRoom: a room voucher reads back with its settings,
// seed and salt key; a plain one without a room.
func TestAVoucherKeepsItsRoom(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		ctx := context.Background()
		seed, _ := core.NewRoomSeed()
		saltKey, _ := core.NewRoomSeed()
		v := core.Voucher{Title: "r", PayValue: 1, ActualValue: 2, Stock: 5,
			BeginAt: time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond), EndAt: time.Now().Add(2 * time.Hour).UTC().Truncate(time.Millisecond),
			Room: &core.Room{OpensAt: time.Now().UTC().Truncate(time.Millisecond), AdmitPerSecond: 7, AdmissionTTL: 90 * time.Second, Seed: seed, SaltKey: saltKey[:]}}
		if err := s.CreateVoucher(ctx, &v); err != nil {
			t.Fatal(err)
		}
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
