package room

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Rooms runs the vouchers' waiting rooms: a shopper joins and polls their
// place, the draw is published after the opening, a seckill on a room
// voucher is let through only with the shopper's pass, and the admission
// passes (Service) admit each open room at its rate. Its state is the
// Board's, so any number of instances serve one room.
type Rooms struct {
	board   Board
	catalog *core.Catalog
	passes  *PassSigner
	// puzzle, when on, makes a join cost a proof of work.
	puzzle *Puzzle
	// interval is the time between admission passes.
	interval time.Duration
	observer Observer
	log      *slog.Logger
	now      func() time.Time
	// draws keeps each room's draw once made; saved holds those this
	// instance has read back, pending those it made and could not keep
	// yet, published each as it is published (roomdraw.go); beacons reads
	// the rooms' beacons.
	draws     DrawStore
	beacons   BeaconReader
	saved     sync.Map // int64 -> KeptDraw
	pending   sync.Map // int64 -> KeptDraw
	published sync.Map // int64 -> RoomDraw
	// passed keeps what this instance's last pass over each room found;
	// known the rooms a request here has touched (the passes' rooms).
	passed sync.Map // int64 -> RoomReport
	known  sync.Map // int64 -> Voucher
}

// Report is a room as this instance's last admission pass found it.
type Report struct {
	Voucher core.Voucher
	Progress
	// At is when the pass was made.
	At time.Time
}

// Observer is told what each admission pass did (the metrics).
type Observer interface {
	RoomPassed(voucherID int64, p Progress)
}

// Config is what the rooms are made of.
type Config struct {
	// Board, Catalog and Passes are required.
	Board   Board
	Catalog *core.Catalog
	Passes  *PassSigner
	// Puzzle, if on (Bits > 0), asks a proof of work of each join (nil:
	// none).
	Puzzle *Puzzle
	// Draws keeps each room's draw once made, so the published draw never
	// changes and a live store that lost a room gets it back (nil: the
	// live store's only).
	Draws DrawStore
	// Beacons reads the beacons rooms name (nil: none is read, and a
	// room naming one draws without it once BeaconWait has passed).
	Beacons BeaconReader
	// Interval is the time between admission passes (default 200 ms:
	// sold out is told within a second, and an admission comes within a
	// fifth of one of its turn).
	Interval time.Duration
	Observer Observer
	Log      *slog.Logger
	// Now is the live store's clock, as this instance estimates it: an
	// admission's expiry is the live store's time, and judged on it (an
	// instance 30 s ahead refused valid admissions). Nil: this instance's
	// clock.
	Now func() time.Time
}

// DefaultInterval is Config.Interval's default.
const DefaultInterval = 200 * time.Millisecond

// New builds the rooms, whole: it panics without a Board, a Catalog
// or Passes (a wiring mistake, found at start).
func New(cfg Config) *Rooms {
	if cfg.Board == nil || cfg.Catalog == nil || cfg.Passes == nil {
		panic("room: New needs a Board, a Catalog and Passes")
	}
	if cfg.Draws == nil {
		cfg.Draws = noDrawStore{}
	}
	if cfg.Beacons == nil {
		cfg.Beacons = noBeacons{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Rooms{board: cfg.Board, catalog: cfg.Catalog, passes: cfg.Passes, puzzle: cfg.Puzzle, draws: cfg.Draws,
		beacons: cfg.Beacons, interval: cfg.Interval,
		observer: cfg.Observer, log: cfg.Log, now: cfg.Now}
}

// Status is a shopper's place in a room, as the shopper is told it.
type Status struct {
	State State
	// Position is 0 until the draw (and for a shopper without a place).
	Position int64
	// Ahead is the places before Position still waiting; Wait the
	// estimated time to admission (before the draw: to the opening). Both
	// -1 where they mean nothing (admitted, sold out, not joined).
	Ahead int64
	Wait  time.Duration
	// Pass is the admission's token, while admitted and unlapsed;
	// PassExpires when it lapses.
	Pass        string
	PassExpires time.Time
	// Puzzle is the challenge a join must solve, with PuzzleBits, for a
	// shopper not in the room while the puzzle is on ("": none).
	Puzzle     string
	PuzzleBits int
	// Salt is the shopper's salt in the draw (Room.Salt): theirs alone to
	// see, and what their key is made over with their id.
	Salt string
}

// Proof is a join's solution of the puzzle (empty: none sent).
type Proof struct{ Challenge, Nonce string }

// Draw is a room's published draw: the seed and its commitment, and
// the early joiners' keys in ascending order (their places).
type Draw struct {
	Seed, Commitment string
	// KeyedWith says what each key is the HMAC of (Room.KeyedWith).
	KeyedWith string
	Keys      []string
	// Beacon is the beacon mixed into the seed (zero: the room names
	// none).
	Beacon DrawBeacon
	// Lost: no early join is known although there may have been some
	// (KeptDraw.Lost); Keys is then empty.
	Lost bool
}

// ErrNoRoom answers a room request on a voucher sold without one.
var ErrNoRoom = core.E(core.CodeBadRequest, "this voucher has no waiting room: buy it directly")

// roomOf is the voucher with its room, or ErrNoRoom.
func (r *Rooms) roomOf(ctx context.Context, voucherID int64) (core.Voucher, error) {
	v, err := r.catalog.Details(ctx, voucherID)
	if err != nil {
		return core.Voucher{}, err
	}
	if v.Room == nil {
		return core.Voucher{}, ErrNoRoom
	}
	r.known.Store(v.ID, v)
	return v, nil
}

// Join gives the shopper a place in the voucher's room (or answers the one
// they hold), and their status. With the puzzle on, a shopper without a
// place needs a solution.
func (r *Rooms) Join(ctx context.Context, userID, voucherID int64, proof Proof) (Status, error) {
	v, err := r.roomOf(ctx, voucherID)
	if err != nil {
		return Status{}, err
	}
	if r.puzzle.On() {
		if err := r.puzzle.Check(proof.Challenge, proof.Nonce, voucherID, userID, r.now()); err != nil {
			if s, serr := r.statusOf(ctx, v, userID); serr == nil && s.State != NotJoined {
				return s, nil // their place: a re-join needs no new work
			}
			return Status{}, err
		}
	}
	drawSize := int64(-1)
	if saved, ok := r.saved.Load(voucherID); ok {
		drawSize = int64(len(saved.(KeptDraw).Entries))
	}
	if err := r.board.Join(ctx, v, userID, drawSize); err != nil {
		if core.CodeOf(err) == core.CodeNotStarted {
			return Status{}, core.E(core.CodeNotStarted, "the waiting room opens at "+v.Room.OpensAt.UTC().Format(time.RFC3339))
		}
		return Status{}, core.Wrap("join room", core.CodeUnavailable, err)
	}
	return r.statusOf(ctx, v, userID)
}

// Status is the shopper's place in the voucher's room.
func (r *Rooms) Status(ctx context.Context, userID, voucherID int64) (Status, error) {
	v, err := r.roomOf(ctx, voucherID)
	if err != nil {
		return Status{}, err
	}
	return r.statusOf(ctx, v, userID)
}

func (r *Rooms) statusOf(ctx context.Context, v core.Voucher, userID int64) (Status, error) {
	seat, err := r.board.Seat(ctx, v, userID)
	if err != nil {
		return Status{}, core.Wrap("room seat", core.CodeUnavailable, err)
	}
	s := r.status(v, userID, seat)
	if s.State == NotJoined && r.puzzle.On() {
		s.Puzzle, s.PuzzleBits = r.puzzle.Challenge(v.ID, userID, r.now()), r.puzzle.Bits
	}
	return s, nil
}

// status reads a seat as the shopper's status.
func (r *Rooms) status(v core.Voucher, userID int64, seat Seat) Status {
	out := Status{State: NotJoined, Position: seat.Position, Ahead: -1, Wait: -1, Salt: Salt(*v.Room, userID)}
	switch {
	case !seat.Joined:
		out.Position = 0
	case seat.Position == 0:
		out.State, out.Wait = Waiting, max(v.BeginAt.Sub(seat.Now), 0)
	case seat.Position <= seat.Frontier:
		// To the millisecond, as the token carries it.
		expires := time.UnixMilli(seat.AdmittedAt.Add(v.Room.AdmissionTTL).UnixMilli())
		switch {
		case seat.Now.Before(expires):
			out.State, out.PassExpires = Admitted, expires
			out.Pass = r.passes.Token(Pass{VoucherID: v.ID, UserID: userID, Position: seat.Position, Expires: expires})
		case seat.Used:
			out.State = Admitted
		default:
			// Lapsed unused: the place is given up (a join queues again).
			out.Position = 0
		}
	case seat.SoldOut:
		out.State = SoldOut
	default:
		ahead := seat.Position - 1 - seat.Frontier
		out.State, out.Ahead = Waiting, ahead
		out.Wait = time.Duration(math.Ceil(float64(ahead+1)/float64(v.Room.AdmitPerSecond)*1000)) * time.Millisecond
	}
	return out
}

// pass checks a seckill's admission: the voucher and the shopper's pass
// for a room voucher (ErrNotAdmitted without a valid one), a zero pass for
// a voucher without a room (what a plain voucher pays: a map read once the
// voucher is known).
func (r *Rooms) pass(ctx context.Context, userID, voucherID int64, token string) (core.Voucher, Pass, error) {
	v, found, err := r.catalog.Peek(ctx, voucherID)
	switch {
	case err != nil:
		// Not known to be a plain voucher: never let a room's seckill
		// through unchecked because the database did not answer.
		return core.Voucher{}, Pass{}, err
	case !found || v.Room == nil:
		return core.Voucher{}, Pass{}, nil // a plain voucher, or an id the seckill answers
	}
	r.known.Store(v.ID, v)
	p, err := r.passes.Check(token, voucherID, userID, r.now())
	return v, p, err
}

// used records that a pass bought (or found the shopper's order): its
// admission is not a no-show. Best effort: a record lost admits one more
// shopper when the admission lapses.
func (r *Rooms) used(ctx context.Context, v core.Voucher, p Pass) {
	if err := r.board.Use(ctx, v, p.Position); err != nil {
		r.log.Warn("room: admission use not recorded", "voucher", p.VoucherID, "position", p.Position, "err", err)
	}
}

// Service runs the admission passes from Start to Stop.
func (r *Rooms) Service() core.Service {
	return core.NewService("room admission", func(ctx context.Context) error {
		t := time.NewTicker(r.interval)
		defer t.Stop()
		for {
			r.AdmitOpen(ctx)
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	})
}

// AdmitOpen makes one admission pass over every room open now that this
// instance knows of: those a shopper's request here has touched (a join,
// a poll, a seckill, the draw). A room another instance passes too is no
// matter: each pass admits what the rate allows since the last, whoever
// made it. An instance that serves no room makes no call at all.
func (r *Rooms) AdmitOpen(ctx context.Context) {
	now := r.now()
	r.known.Range(func(key, value any) bool {
		v := value.(core.Voucher)
		switch {
		case !now.Before(v.EndAt.Add(time.Second)):
			r.known.Delete(key) // the sale is over
		case now.Before(v.BeginAt):
		default:
			if err := r.admit(ctx, v); err != nil && ctx.Err() == nil {
				r.log.Warn("room: admission pass failed", "voucher", v.ID, "err", err)
			}
		}
		return ctx.Err() == nil
	})
}

func (r *Rooms) admit(ctx context.Context, v core.Voucher) error {
	live, err := r.catalog.Get(ctx, v.ID)
	if err != nil {
		return fmt.Errorf("stock: %w", err)
	}
	if live.Paused() || !r.now().Before(live.EndAt) {
		// An operator paused or ended the sale (the details are at most a
		// second old): the queue stays, nobody more is admitted.
		return nil
	}
	draw, drawn, err := r.drawOf(ctx, v)
	if err != nil {
		return fmt.Errorf("draw: %w", err)
	}
	drawSize := int64(-1)
	if drawn {
		drawSize = int64(len(draw.Entries))
	}
	p, err := r.board.Advance(ctx, v, live.Stock, drawSize)
	if err != nil {
		return err
	}
	if p.Unplaced > 0 && drawn {
		// The first pass after the begin, or the live store lost the
		// room: its draw's positions, then the pass again.
		r.log.Info("room: writing the draw's positions", "voucher", v.ID, "unplaced", p.Unplaced, "draw", len(draw.Entries))
		if err := r.board.Place(ctx, v, draw.Entries); err != nil {
			return err
		}
		if p, err = r.board.Advance(ctx, v, live.Stock, drawSize); err != nil {
			return err
		}
	}
	r.passed.Store(v.ID, Report{Voucher: v, Progress: p, At: r.now()})
	if r.observer != nil {
		r.observer.RoomPassed(v.ID, p)
	}
	return nil
}

// Reports are the rooms this instance passed in the last minute, by
// voucher id (the dashboard's).
func (r *Rooms) Reports() []Report {
	var out []Report
	now := r.now()
	r.passed.Range(func(key, value any) bool {
		if rep := value.(Report); now.Sub(rep.At) < time.Minute {
			out = append(out, rep)
		} else {
			r.passed.Delete(key)
		}
		return true
	})
	slices.SortFunc(out, func(a, b Report) int { return cmp.Compare(a.Voucher.ID, b.Voucher.ID) })
	return out
}
