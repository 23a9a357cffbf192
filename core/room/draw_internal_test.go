package room

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// drawBoard is a live store of one closed early set: it lists joiners and
// records the draws placed.
type drawBoard struct {
	Board
	users  []int64
	late   time.Duration
	mu     sync.Mutex
	placed [][]DrawEntry
}

func (b *drawBoard) Close(context.Context, core.Voucher) (Closed, bool, error) {
	return Closed{Users: b.users, Late: b.late}, true, nil
}

func (b *drawBoard) Place(_ context.Context, _ core.Voucher, d []DrawEntry) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.placed = append(b.placed, d)
	return nil
}

// memoryDraws keeps draws as the database does: the first save stays;
// down, it answers nothing.
type memoryDraws struct {
	mu    sync.Mutex
	draws map[int64]KeptDraw
	down  bool
}

func (m *memoryDraws) SaveDraw(_ context.Context, id int64, d KeptDraw) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errors.New("database down")
	}
	if _, ok := m.draws[id]; !ok {
		m.draws[id] = d
	}
	return nil
}

func (m *memoryDraws) LoadDraw(_ context.Context, id int64) (KeptDraw, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return KeptDraw{}, errors.New("database down")
	}
	return m.draws[id], nil
}

// stubBeacon answers a round once ready is set.
type stubBeacon struct {
	mu         sync.Mutex
	randomness []byte
	reads      int
}

func (s *stubBeacon) Randomness(context.Context, core.RoomBeacon) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.randomness == nil {
		return nil, errors.New("round not out yet")
	}
	return s.randomness, nil
}

// voucherRepo has one voucher.
type voucherRepo struct {
	core.VoucherRepository
	v core.Voucher
}

func (r voucherRepo) FindVoucher(_ context.Context, id int64) (core.Voucher, error) {
	if id != r.v.ID {
		return core.Voucher{}, core.ErrVoucherNotFound
	}
	return r.v, nil
}

func beaconRooms(t *testing.T, v core.Voucher, b Board, draws DrawStore, beacon BeaconReader, now time.Time) *Rooms {
	t.Helper()
	c := core.NewCatalog(core.CatalogConfig{Vouchers: voucherRepo{v: v}, Board: stockBoard{}})
	r := New(Config{Board: b, Catalog: c, Passes: NewPassSigner([]byte("k")), Draws: draws, Beacons: beacon})
	r.now = func() time.Time { return now }
	return r
}

// TestABeaconsRoundIsMixedIntoTheDraw: a room naming a beacon publishes
// no draw (and places none) while the round cannot be read; once it can,
// the keys are HMACs keyed with SHA-256(seed + randomness), the answer
// names the round and its randomness, and another instance publishes the
// same draw from the store without reading the beacon.
func TestABeaconsRoundIsMixedIntoTheDraw(t *testing.T) {
	ctx := context.Background()
	begin := time.Now().Add(-time.Second)
	v := core.Voucher{ID: 5, BeginAt: begin, EndAt: begin.Add(time.Hour), Room: &core.Room{OpensAt: begin.Add(-time.Hour), AdmitPerSecond: 5,
		AdmissionTTL: time.Minute, SaltKey: make([]byte, 32), Beacon: core.RoomBeacon{URL: "https://beacon.example", Round: 9}}}
	v.Room.Seed[0] = 1
	live := &drawBoard{users: []int64{3, 1, 4, 15, 9, 2, 6}}
	draws := &memoryDraws{draws: map[int64]KeptDraw{}}
	beacon := &stubBeacon{}
	r := beaconRooms(t, v, live, draws, beacon, begin.Add(time.Second))
	if _, err := r.Draw(ctx, v.ID); core.CodeOf(err) != core.CodeNotStarted || len(live.placed) != 0 {
		t.Fatalf("the draw while the beacon is awaited: %v, %d placed; want not started, nothing placed", err, len(live.placed))
	}
	beacon.randomness = make([]byte, 32)
	beacon.randomness[31] = 7
	d, err := r.Draw(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append(v.Room.Seed[:], beacon.randomness...))
	if d.Beacon.Randomness != hex.EncodeToString(beacon.randomness) || d.Beacon.MixedSeed != hex.EncodeToString(sum[:]) ||
		d.Beacon.Round != 9 || d.Beacon.Missed || d.KeyedWith != `HMAC-SHA256(SHA-256(seed + beacon.randomness), userId + ":" + salt)` {
		t.Fatalf("the published beacon %+v, keyed with %q", d.Beacon, d.KeyedWith)
	}
	var want []string
	for _, u := range live.users {
		want = append(want, KeyIn(*v.Room, sum, u))
		if slices.Contains(d.Keys, DrawKey(*v.Room, u)) {
			t.Fatalf("shopper %d's key is the seed's alone: the beacon was not mixed in", u)
		}
	}
	slices.Sort(want)
	if !slices.Equal(d.Keys, want) || len(live.placed) != 1 || len(live.placed[0]) != len(want) {
		t.Fatalf("keys %v, want %v; %d placed", d.Keys, want, len(live.placed))
	}
	reads := beacon.reads
	other := beaconRooms(t, v, &drawBoard{}, draws, beacon, begin.Add(time.Minute))
	if again, err := other.Draw(ctx, v.ID); err != nil || !slices.Equal(again.Keys, d.Keys) || again.Beacon != d.Beacon || beacon.reads != reads {
		t.Fatalf("another instance published %+v (%v) after %d more beacon reads", again, err, beacon.reads-reads)
	}
}

// TestABeaconNeverReadIsSaidMissed: past BeaconWait without the round,
// the draw is keyed with the seed alone and says the beacon was missed.
func TestABeaconNeverReadIsSaidMissed(t *testing.T) {
	begin := time.Now().Add(-time.Minute)
	v := core.Voucher{ID: 6, BeginAt: begin, EndAt: begin.Add(time.Hour), Room: &core.Room{OpensAt: begin.Add(-time.Hour), AdmitPerSecond: 5,
		AdmissionTTL: time.Minute, Beacon: core.RoomBeacon{URL: "https://beacon.example", Round: 9}}}
	live := &drawBoard{users: []int64{8, 4}}
	r := beaconRooms(t, v, live, &memoryDraws{draws: map[int64]KeptDraw{}}, &stubBeacon{}, begin.Add(BeaconWait+time.Second))
	d, err := r.Draw(context.Background(), v.ID)
	if err != nil || !d.Beacon.Missed || d.Beacon.Randomness != "" || d.KeyedWith != "HMAC-SHA256(seed, userId)" {
		t.Fatalf("a missed beacon's draw: %+v, %v", d, err)
	}
	if want := []string{DrawKey(*v.Room, 8), DrawKey(*v.Room, 4)}; !slices.Equal(d.Keys, slices.Sorted(slices.Values(want))) {
		t.Fatalf("keys %v, want the seed's %v", d.Keys, want)
	}
}

// TestAnAdmissionIsJudgedOnTheLiveStoresClock: an admission expires at a
// time on the live store's clock; an instance whose own clock is ahead
// (30 s: the fault run refused 62 valid admissions) judges it on the live
// store's, as Rooms is given it.
func TestAnAdmissionIsJudgedOnTheLiveStoresClock(t *testing.T) {
	redisNow := time.Now().Add(-30 * time.Second) // this instance is 30 s ahead
	v := core.Voucher{ID: 8, BeginAt: redisNow.Add(-time.Minute), EndAt: redisNow.Add(time.Hour), Room: &core.Room{OpensAt: redisNow.Add(-time.Hour),
		AdmitPerSecond: 5, AdmissionTTL: 10 * time.Second}}
	c := core.NewCatalog(core.CatalogConfig{Vouchers: voucherRepo{v: v}, Board: stockBoard{}})
	passes := NewPassSigner([]byte("k"))
	token := passes.Token(Pass{VoucherID: 8, UserID: 3, Position: 1, Expires: redisNow.Add(10 * time.Second)})
	r := New(Config{Board: &drawBoard{}, Catalog: c, Passes: passes, Now: func() time.Time { return redisNow }})
	if _, _, err := r.pass(context.Background(), 3, 8, token); err != nil {
		t.Fatalf("an admission valid on the live store's clock was refused: %v", err)
	}
	local := New(Config{Board: &drawBoard{}, Catalog: c, Passes: passes})
	if _, _, err := local.pass(context.Background(), 3, 8, token); err == nil {
		t.Fatal("the same admission judged on a clock 30 s ahead passed: the test shows nothing")
	}
}

// TestADrawTheDatabaseCouldNotKeepIsHeldUntilItCan: with the database
// down at the opening, the draw is made and held (none published, nobody
// placed); the live store then loses the room; once the database is back
// the held draw is kept and published, never an empty one (the fault run
// published an empty draw: the early joiners lost their places).
func TestADrawTheDatabaseCouldNotKeepIsHeldUntilItCan(t *testing.T) {
	ctx := context.Background()
	begin := time.Now().Add(-time.Second)
	v := core.Voucher{ID: 9, BeginAt: begin, EndAt: begin.Add(time.Hour), Room: &core.Room{OpensAt: begin.Add(-time.Hour), AdmitPerSecond: 5,
		AdmissionTTL: time.Minute}}
	live := &drawBoard{users: []int64{3, 1, 4}}
	draws := &memoryDraws{draws: map[int64]KeptDraw{}, down: true}
	r := beaconRooms(t, v, live, draws, &stubBeacon{}, time.Now())
	if _, err := r.Draw(ctx, v.ID); err == nil || len(live.placed) != 0 {
		t.Fatalf("a draw published with the database down (%v), %d placed", err, len(live.placed))
	}
	live.users = nil // the live store lost the room
	draws.mu.Lock()
	draws.down = false
	draws.mu.Unlock()
	d, err := r.Draw(ctx, v.ID)
	if err != nil || len(d.Keys) != 3 || len(draws.draws[v.ID].Entries) != 3 || len(live.placed) != 1 || len(live.placed[0]) != 3 {
		t.Fatalf("once the database is back: %+v (%v), kept %d, placed %d; want the held draw of 3", d, err, len(draws.draws[v.ID].Entries), len(live.placed))
	}
}

// stockBoard is live stock by voucher (core.StockBoard).
type stockBoard map[int64]int64

func (b stockBoard) LoadVoucher(context.Context, core.Voucher) error { return nil }
func (b stockBoard) RemainingStock(_ context.Context, id int64) (int64, error) {
	s, ok := b[id]
	if !ok {
		return 0, core.ErrVoucherNotFound
	}
	return s, nil
}

// TestAnEmptySetClosedLateIsSaidLost: the database down at the opening,
// the live store lost the room after the begin and every instance that
// held the draw restarted: the first close of the fresh room state comes
// long after the begin and finds nobody. The draw is said lost, never
// published as an empty one; a set closed on time with nobody in it is
// an empty draw, as before.
func TestAnEmptySetClosedLateIsSaidLost(t *testing.T) {
	ctx := context.Background()
	begin := time.Now().Add(-time.Minute)
	v := core.Voucher{ID: 11, BeginAt: begin, EndAt: begin.Add(time.Hour), Room: &core.Room{OpensAt: begin.Add(-time.Hour), AdmitPerSecond: 5,
		AdmissionTTL: time.Minute}}
	for _, tc := range []struct {
		late time.Duration
		lost bool
	}{{time.Minute, true}, {200 * time.Millisecond, false}, {-1, false}} {
		live := &drawBoard{late: tc.late}
		r := beaconRooms(t, v, live, &memoryDraws{draws: map[int64]KeptDraw{}}, &stubBeacon{}, time.Now())
		d, err := r.Draw(ctx, v.ID)
		if err != nil || d.Lost != tc.lost || len(d.Keys) != 0 {
			t.Fatalf("closed %v after the begin with nobody: %+v, %v; want lost %v", tc.late, d, err, tc.lost)
		}
		if len(live.placed) != 1 {
			t.Fatalf("closed %v late: placed %d times, want once (later joiners queue from place 1)", tc.late, len(live.placed))
		}
	}
	live := &drawBoard{users: []int64{3}, late: time.Minute}
	r := beaconRooms(t, v, live, &memoryDraws{draws: map[int64]KeptDraw{}}, &stubBeacon{}, time.Now())
	if d, err := r.Draw(ctx, v.ID); err != nil || d.Lost || len(d.Keys) != 1 {
		t.Fatalf("a late close with a joiner: %+v, %v; want their draw", d, err)
	}
}
