package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// drawBoard is a live store of one closed early set: it lists joiners and
// records the draws placed.
type drawBoard struct {
	RoomBoard
	users  []int64
	mu     sync.Mutex
	placed [][]DrawEntry
}

func (b *drawBoard) Close(context.Context, Voucher) ([]int64, bool, error) { return b.users, true, nil }

func (b *drawBoard) Place(_ context.Context, _ Voucher, d []DrawEntry) error {
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

func (s *stubBeacon) Randomness(context.Context, RoomBeacon) ([]byte, error) {
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
	VoucherRepository
	v Voucher
}

func (r voucherRepo) FindVoucher(_ context.Context, id int64) (Voucher, error) {
	if id != r.v.ID {
		return Voucher{}, ErrVoucherNotFound
	}
	return r.v, nil
}

func beaconRooms(t *testing.T, v Voucher, b RoomBoard, draws RoomDrawStore, beacon BeaconReader, now time.Time) *Rooms {
	t.Helper()
	c := NewCatalog(CatalogConfig{Vouchers: voucherRepo{v: v}, Board: board{}})
	r := NewRooms(RoomsConfig{Board: b, Catalog: c, Passes: NewPassSigner([]byte("k")), Draws: draws, Beacons: beacon})
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
	v := Voucher{ID: 5, BeginAt: begin, EndAt: begin.Add(time.Hour), Room: &Room{OpensAt: begin.Add(-time.Hour), AdmitPerSecond: 5,
		AdmissionTTL: time.Minute, SaltKey: make([]byte, 32), Beacon: RoomBeacon{URL: "https://beacon.example", Round: 9}}}
	v.Room.Seed[0] = 1
	live := &drawBoard{users: []int64{3, 1, 4, 15, 9, 2, 6}}
	draws := &memoryDraws{draws: map[int64]KeptDraw{}}
	beacon := &stubBeacon{}
	r := beaconRooms(t, v, live, draws, beacon, begin.Add(time.Second))
	if _, err := r.Draw(ctx, v.ID); CodeOf(err) != CodeNotStarted || len(live.placed) != 0 {
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
		want = append(want, v.Room.KeyIn(sum, u))
		if slices.Contains(d.Keys, v.Room.DrawKey(u)) {
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
	v := Voucher{ID: 6, BeginAt: begin, EndAt: begin.Add(time.Hour), Room: &Room{OpensAt: begin.Add(-time.Hour), AdmitPerSecond: 5,
		AdmissionTTL: time.Minute, Beacon: RoomBeacon{URL: "https://beacon.example", Round: 9}}}
	live := &drawBoard{users: []int64{8, 4}}
	r := beaconRooms(t, v, live, &memoryDraws{draws: map[int64]KeptDraw{}}, &stubBeacon{}, begin.Add(BeaconWait+time.Second))
	d, err := r.Draw(context.Background(), v.ID)
	if err != nil || !d.Beacon.Missed || d.Beacon.Randomness != "" || d.KeyedWith != "HMAC-SHA256(seed, userId)" {
		t.Fatalf("a missed beacon's draw: %+v, %v", d, err)
	}
	if want := []string{v.Room.DrawKey(8), v.Room.DrawKey(4)}; !slices.Equal(d.Keys, slices.Sorted(slices.Values(want))) {
		t.Fatalf("keys %v, want the seed's %v", d.Keys, want)
	}
}

// TestABeaconIsValidatedAtCreation: a beacon's URL and round are checked
// when the room is created.
func TestABeaconIsValidatedAtCreation(t *testing.T) {
	for _, b := range []RoomBeacon{{URL: "ftp://x/y", Round: 1}, {URL: "https://x", Round: 0}, {URL: "https://u:p@x", Round: 1},
		{URL: "https://x/?q=1", Round: 1}, {Round: 3}, {URL: "https://", Round: 1}} {
		if CodeOf(b.validate()) != CodeBadRequest {
			t.Errorf("the beacon %+v was accepted", b)
		}
	}
	if err := (RoomBeacon{URL: "https://api.drand.sh/52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971", Round: 1000}).validate(); err != nil {
		t.Errorf("drand's quicknet refused: %v", err)
	}
}

// TestAnAdmissionIsJudgedOnTheLiveStoresClock: an admission expires at a
// time on the live store's clock; an instance whose own clock is ahead
// (30 s: the fault run refused 62 valid admissions) judges it on the live
// store's, as Rooms is given it.
func TestAnAdmissionIsJudgedOnTheLiveStoresClock(t *testing.T) {
	redisNow := time.Now().Add(-30 * time.Second) // this instance is 30 s ahead
	v := Voucher{ID: 8, BeginAt: redisNow.Add(-time.Minute), EndAt: redisNow.Add(time.Hour), Room: &Room{OpensAt: redisNow.Add(-time.Hour),
		AdmitPerSecond: 5, AdmissionTTL: 10 * time.Second}}
	c := NewCatalog(CatalogConfig{Vouchers: voucherRepo{v: v}, Board: board{}})
	passes := NewPassSigner([]byte("k"))
	token := passes.Token(RoomPass{VoucherID: 8, UserID: 3, Position: 1, Expires: redisNow.Add(10 * time.Second)})
	r := NewRooms(RoomsConfig{Board: &drawBoard{}, Catalog: c, Passes: passes, Now: func() time.Time { return redisNow }})
	if _, err := r.Pass(context.Background(), 3, 8, token); err != nil {
		t.Fatalf("an admission valid on the live store's clock was refused: %v", err)
	}
	local := NewRooms(RoomsConfig{Board: &drawBoard{}, Catalog: c, Passes: passes})
	if _, err := local.Pass(context.Background(), 3, 8, token); err == nil {
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
	v := Voucher{ID: 9, BeginAt: begin, EndAt: begin.Add(time.Hour), Room: &Room{OpensAt: begin.Add(-time.Hour), AdmitPerSecond: 5,
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
