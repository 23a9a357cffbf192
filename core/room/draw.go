package room

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// A room's draw is made by the first admission pass after the begin
// (Rooms.drawOf): the live store closes the early set and lists its
// joiners by arrival, the pass keys each (with the beacon's round mixed
// into the seed, where the room names one), orders them, keeps the draw in
// the database and writes the positions into the live store, and only
// then does the room admit anyone. The live store never holds the joiners
// ordered by their keys, so nobody reading it before the begin learns the
// order. From then on the draw published is the one kept, whatever the
// live store loses, and a live store that lost the room gets it back.

// beaconFetchTimeout bounds one read of a room's beacon (a pass waits on
// it; the next pass, a fifth of a second on, tries again).
const beaconFetchTimeout = 2 * time.Second

// DrawBeacon is the beacon a published draw was keyed with: the round the
// room named and the randomness read (Missed: none could be read within
// BeaconWait, and the keys are the seed's alone). Zero: the room names
// none.
type DrawBeacon struct {
	URL        string
	Round      uint64
	Randomness string
	// MixedSeed is hex SHA-256(seed + randomness), what the keys are
	// keyed with.
	MixedSeed string
	Missed    bool
}

// Draw is the voucher's published draw; not_started before the sale
// begins (and while its beacon is awaited).
func (r *Rooms) Draw(ctx context.Context, voucherID int64) (Draw, error) {
	if d, ok := r.published.Load(voucherID); ok {
		return d.(Draw), nil
	}
	v, err := r.roomOf(ctx, voucherID)
	if err != nil {
		return Draw{}, err
	}
	draw, drawn, err := r.drawOf(ctx, v)
	if err != nil {
		return Draw{}, core.Wrap("room draw", core.CodeUnavailable, err)
	}
	if !drawn {
		return Draw{}, core.E(core.CodeNotStarted, "the draw is published when the sale begins, at "+v.BeginAt.UTC().Format(time.RFC3339))
	}
	keys := make([]string, len(draw.Entries))
	for i, e := range draw.Entries {
		keys[i] = e.Key
	}
	d := Draw{Seed: hex.EncodeToString(v.Room.Seed[:]), Commitment: v.Room.Commitment(), Keys: keys, Lost: draw.Lost}
	d.Beacon, d.KeyedWith = publishedBeacon(v.Room, draw.Beacon)
	r.published.Store(voucherID, d)
	return d, nil
}

// publishedBeacon is what a draw keyed with beacon says of it.
func publishedBeacon(room *core.Room, beacon string) (DrawBeacon, string) {
	if !room.Beacon.On() {
		return DrawBeacon{}, KeyedWith(*room, false)
	}
	out := DrawBeacon{URL: room.Beacon.URL, Round: room.Beacon.Round, Missed: beacon == BeaconMissed}
	if out.Missed {
		return out, KeyedWith(*room, false)
	}
	randomness, _ := hex.DecodeString(beacon)
	mixed := MixedSeed(*room, randomness)
	out.Randomness, out.MixedSeed = beacon, hex.EncodeToString(mixed[:])
	return out, KeyedWith(*room, true)
}

// drawOf is the room's draw: the one kept, else one made now from the
// live store's closed early set (then kept, and read back: if another
// instance kept one first, that one). drawn is false before the begin by
// the live store's clock, and while the room's beacon is awaited.
func (r *Rooms) drawOf(ctx context.Context, v core.Voucher) (KeptDraw, bool, error) {
	if saved, ok := r.saved.Load(v.ID); ok {
		return saved.(KeptDraw), true, nil
	}
	kept, loadErr := r.draws.LoadDraw(ctx, v.ID)
	if loadErr == nil && (len(kept.Entries) > 0 || kept.Beacon != "") {
		r.pending.Delete(v.ID)
		r.saved.Store(v.ID, kept)
		return kept, true, nil
	}
	made, drawn, err := r.pendingOr(ctx, v)
	if err != nil || !drawn {
		return KeptDraw{}, false, errors.Join(loadErr, err)
	}
	if made.Lost {
		// Nothing to keep (no entry), and nothing kept may say otherwise:
		// every instance finds the same set, as late and as empty.
		r.pending.Delete(v.ID)
		if err := r.board.Place(ctx, v, nil); err != nil {
			return KeptDraw{}, false, err
		}
		r.saved.Store(v.ID, made)
		return made, true, nil
	}
	saveErr := loadErr
	if saveErr == nil {
		saveErr = r.draws.SaveDraw(ctx, v.ID, made)
	}
	if saveErr != nil {
		// Held here until the database takes it (nobody is admitted
		// meanwhile): the live store may lose the room in between (the
		// fault run: the database down at the opening, then Redis lost,
		// and an empty draw was published).
		r.pending.Store(v.ID, made)
		return KeptDraw{}, false, saveErr
	}
	r.pending.Delete(v.ID)
	if kept, err = r.draws.LoadDraw(ctx, v.ID); err != nil {
		return KeptDraw{}, false, err
	}
	if len(kept.Entries) == 0 && kept.Beacon == "" {
		kept = made // nobody joined early, no beacon: nothing to keep
	}
	// Placed at once, so that the early joiners read their positions as
	// soon as the draw is published (an admission pass places it too,
	// where an instance died in between).
	if err := r.board.Place(ctx, v, kept.Entries); err != nil {
		return KeptDraw{}, false, err
	}
	r.saved.Store(v.ID, kept)
	return kept, true, nil
}

// pendingOr is the draw this instance made and could not keep yet, else
// one made now.
func (r *Rooms) pendingOr(ctx context.Context, v core.Voucher) (KeptDraw, bool, error) {
	if made, ok := r.pending.Load(v.ID); ok {
		return made.(KeptDraw), true, nil
	}
	return r.makeDraw(ctx, v)
}

// makeDraw closes the room's early set and orders its joiners by their
// keys (the same joiners and seed make the same draw on any instance).
func (r *Rooms) makeDraw(ctx context.Context, v core.Voucher) (KeptDraw, bool, error) {
	set, closed, err := r.board.Close(ctx, v)
	if err != nil || !closed {
		return KeptDraw{}, false, err
	}
	users := set.Users
	beacon, ready := r.beaconOf(ctx, v)
	if !ready {
		return KeptDraw{}, false, nil
	}
	seed := v.Room.Seed
	if beacon != "" && beacon != BeaconMissed {
		randomness, _ := hex.DecodeString(beacon)
		seed = MixedSeed(*v.Room, randomness)
	}
	// An empty set first closed long after the begin: the live store may
	// have lost the room, with its joiners, after the begin (the database
	// down at the opening, every instance that held the draw restarted).
	// Said lost, never published as a draw nobody joined.
	lost := len(users) == 0 && set.Late > LostAfter
	return KeptDraw{Entries: Order(*v.Room, seed, users), Beacon: beacon, Lost: lost}, true, nil
}

// LostAfter is how long after the begin an early set first closed with
// nobody in it is taken for one the live store lost: a room with joiners
// is closed by the first admission pass after the begin (every fifth of a
// second, on every instance a join reached).
const LostAfter = 10 * time.Second

// Order is the draw of users keyed with seed: each with their key
// (KeyIn), in ascending order of the keys.
func Order(r core.Room, seed [32]byte, users []int64) []DrawEntry {
	entries := make([]DrawEntry, len(users))
	for i, u := range users {
		entries[i] = DrawEntry{Key: KeyIn(r, seed, u), UserID: u}
	}
	slices.SortFunc(entries, func(a, b DrawEntry) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.UserID, b.UserID))
	})
	return entries
}

// beaconOf is the room's beacon value for its draw: "" (none named), the
// round's randomness in hex, or BeaconMissed once BeaconWait has passed
// without it; ready is false while it is still awaited.
func (r *Rooms) beaconOf(ctx context.Context, v core.Voucher) (string, bool) {
	if !v.Room.Beacon.On() {
		return "", true
	}
	ctx, cancel := context.WithTimeout(ctx, beaconFetchTimeout)
	defer cancel()
	randomness, err := r.beacons.Randomness(ctx, v.Room.Beacon)
	if err == nil {
		return hex.EncodeToString(randomness), true
	}
	if r.now().Before(v.BeginAt.Add(BeaconWait)) {
		r.log.Debug("room: the beacon's round is not read yet", "voucher", v.ID, "err", err)
		return "", false
	}
	r.log.Error("room: the beacon's round could not be read; the draw is keyed with the seed alone, and says so",
		"voucher", v.ID, "beacon", v.Room.Beacon.URL, "round", v.Room.Beacon.Round, "err", err)
	return BeaconMissed, true
}

// noDrawStore keeps no draw: each instance makes its own from the live
// store, the same while the store keeps the room.
type noDrawStore struct{}

func (noDrawStore) SaveDraw(context.Context, int64, KeptDraw) error { return nil }

func (noDrawStore) LoadDraw(context.Context, int64) (KeptDraw, error) { return KeptDraw{}, nil }

// noBeacons reads no beacon.
type noBeacons struct{}

func (noBeacons) Randomness(context.Context, core.RoomBeacon) ([]byte, error) {
	return nil, errors.New("this server reads no beacon")
}
