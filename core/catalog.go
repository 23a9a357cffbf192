package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Catalog creates vouchers and answers what is on sale. A voucher is
// durable in the repository and live in the stock board (Redis); Create
// returns only once both hold it.
type Catalog struct {
	repo  VoucherRepository
	board StockBoard
	// buckets lets a voucher be split over several shards (nil: every
	// voucher is one bucket).
	buckets BucketBoard
	// A voucher's details are cached (cachedVoucher): the crowd polling a
	// sale then reads only the live stock. An operator may change them (a
	// pause, the window: core/steer): the instance that does forgets them
	// at once (Forget), the others when told, or within detailsTTL.
	cache sync.Map // int64 -> cachedVoucher
	// lookups joins the concurrent first look-ups of one voucher (the
	// opening second's crowd on an instance that has not seen it yet)
	// into one query.
	lookups singleflight.Group
	// recovery, if set, verifies a voucher's live state before its stock
	// is read, and rebuilds what the live store forgot.
	recovery LiveGuard
	// unknown answers ids the repository was just found without; nudger
	// tells the other instances when one is created (both may be nil).
	unknown *UnknownVouchers
	nudger  StockNudger

	lister   VoucherLister
	creating func(ctx context.Context) (Pause, func(), error)
	// listing is the last answer of Current, shared by every caller for
	// listingTTL: a crowd watching the storefront costs the stores one
	// listing per interval, however large it is.
	listingMu sync.Mutex
	listing   []Voucher
	listedAt  time.Time
	now       func() time.Time
}

// listingTTL is how long one listing answers every storefront.
const listingTTL = time.Second

// maxListing bounds the storefront's listing.
const maxListing = 50

// Current lists the vouchers on sale or upcoming, soonest first, each with
// its remaining stock, as of at most a second ago. A voucher whose stock
// cannot be read for the moment (Redis busy or away: a stock read across
// masters may answer busy while units move) keeps the stock of the last
// listing it was in, rather than vanishing from the storefront for a
// second; one never listed, or no longer found, is left out rather than
// failing the list.
func (c *Catalog) Current(ctx context.Context) ([]Voucher, error) {
	if c.lister == nil {
		return nil, E(CodeUnavailable, "this catalog cannot list vouchers")
	}
	c.listingMu.Lock()
	defer c.listingMu.Unlock()
	now := c.now()
	if c.listing != nil && now.Sub(c.listedAt) < listingTTL {
		return c.listing, nil
	}
	found, err := c.lister.CurrentVouchers(ctx, now, maxListing)
	if err != nil {
		return nil, Wrap("list vouchers", CodeUnavailable, err)
	}
	last := make(map[int64]Voucher, len(c.listing))
	for _, v := range c.listing {
		last[v.ID] = v
	}
	out := make([]Voucher, 0, len(found))
	for _, v := range found {
		c.remember(v) // as the database has it now
		live, err := c.Get(ctx, v.ID)
		if err != nil {
			before, listed := last[v.ID]
			if !listed || CodeOf(err) == CodeVoucherNotFound {
				continue
			}
			live = before
		}
		out = append(out, live)
	}
	c.listing, c.listedAt = out, now
	return out, nil
}

// OpenAt lists the vouchers whose sale was open at t that this catalog
// knows of: those on sale or upcoming (Current, shared by the
// storefront), and those it has looked up since it started. A second's
// leeway either side: t may come from an order id, which tells whole
// seconds. A listing that fails leaves the looked-up ones.
func (c *Catalog) OpenAt(ctx context.Context, t time.Time) []int64 {
	open := func(v Voucher) bool {
		return !v.BeginAt.After(t.Add(time.Second)) && v.EndAt.After(t.Add(-time.Second))
	}
	seen := map[int64]bool{}
	var out []int64
	if current, err := c.Current(ctx); err == nil {
		for _, v := range current {
			if open(v) && !seen[v.ID] {
				seen[v.ID] = true
				out = append(out, v.ID)
			}
		}
	}
	c.cache.Range(func(_, value any) bool {
		if v := value.(cachedVoucher).v; open(v) && !seen[v.ID] {
			seen[v.ID] = true
			out = append(out, v.ID)
		}
		return true
	})
	return out
}

// CatalogConfig is what the catalog is made of.
type CatalogConfig struct {
	// Vouchers is the durable catalogue, Board the live stock; both
	// required.
	Vouchers VoucherRepository
	Board    StockBoard
	// Buckets, if the board can split a voucher over shards, says how far
	// (nil: it keeps every voucher whole, and Create refuses buckets).
	Buckets BucketBoard
	// Lister answers Current (nil: Current answers unavailable).
	Lister VoucherLister
	// Creating is what a voucher being created starts as (the kill
	// switch's pause while it holds), with the release to call once its
	// live state is written (nil: on sale, nothing to release).
	Creating func(ctx context.Context) (Pause, func(), error)
	// Unknown answers ids the repository was just found without, and
	// Nudger tells every instance to forget an id when a voucher of that
	// id is created (either may be nil).
	Unknown *UnknownVouchers
	Nudger  StockNudger
	// Recovery verifies live stock before it is read (nil: NoRecovery).
	Recovery LiveGuard
}

// NewCatalog builds the catalog, whole: it panics without Vouchers or a
// Board (a wiring mistake, found at start).
func NewCatalog(cfg CatalogConfig) *Catalog {
	if cfg.Vouchers == nil || cfg.Board == nil {
		panic("core: NewCatalog needs Vouchers and a Board")
	}
	if cfg.Creating == nil {
		cfg.Creating = func(context.Context) (Pause, func(), error) { return NotPaused, func() {}, nil }
	}
	return &Catalog{repo: cfg.Vouchers, board: cfg.Board, buckets: cfg.Buckets, lister: cfg.Lister, unknown: cfg.Unknown,
		nudger: cfg.Nudger, recovery: GuardOr(cfg.Recovery), creating: cfg.Creating, now: time.Now}
}

// Create validates, stores and loads a voucher; v.ID is set on success.
func (c *Catalog) Create(ctx context.Context, v *Voucher) error {
	if v.Room != nil {
		room := *v.Room
		if room.AdmissionTTL == 0 {
			room.AdmissionTTL = DefaultAdmissionTTL
		}
		seed, err := NewRoomSeed()
		if err != nil {
			return Wrap("room seed", CodeInternal, err)
		}
		room.Seed = seed
		saltKey, err := NewRoomSeed()
		if err != nil {
			return Wrap("room salt key", CodeInternal, err)
		}
		room.SaltKey = saltKey[:]
		v.Room = &room
	}
	if err := v.Validate(); err != nil {
		return err
	}
	v.Buckets = v.BucketCount()
	if v.Buckets > 1 {
		switch {
		case c.buckets == nil:
			return E(CodeBadRequest, "buckets: this backend keeps every voucher in one bucket")
		case v.Buckets > c.buckets.MaxBuckets():
			return E(CodeBadRequest, fmt.Sprintf("buckets must be from 1 to %d here (a bucket per shard: SECKILL_SHARDS)", c.buckets.MaxBuckets()))
		}
	}
	pause, release, err := c.creating(ctx)
	if err != nil {
		return err
	}
	defer release()
	v.Pause = pause
	if err := c.repo.CreateVoucher(ctx, v); err != nil {
		return Wrap("create voucher", CodeUnavailable, err)
	}
	if err := c.board.LoadVoucher(ctx, *v); err != nil {
		// A voucher in the database but not in Redis could never be sold;
		// undo it so the admin can simply retry.
		derr := c.repo.DeleteVoucher(context.WithoutCancel(ctx), v.ID)
		return Wrap("load voucher", CodeUnavailable, errors.Join(err, derr))
	}
	c.remember(*v)
	c.forgetListing() // shown on this instance's storefront at once
	c.recovery.Verified(ctx, v.ID)
	c.unknown.Forget(v.ID)
	if c.nudger != nil {
		// Best effort: the others' entries lapse within a second anyway.
		_ = c.nudger.NudgeStockBack(ctx, v.ID)
	}
	return nil
}

// Details returns a voucher as created (Stock is its initial or the
// database's, not the live one): after the first look-up on this
// instance, a map read.
func (c *Catalog) Details(ctx context.Context, id int64) (Voucher, error) {
	if cached, known := c.cached(id); known {
		return cached.v, nil
	}
	found, err, _ := c.lookups.Do(strconv.FormatInt(id, 10), func() (any, error) {
		v, err := c.unknown.Find(ctx, id, c.repo.FindVoucher)
		if err == nil {
			c.remember(v)
		}
		return v, err
	})
	if err != nil {
		return Voucher{}, Wrap("get voucher", CodeUnavailable, err)
	}
	return found.(Voucher), nil
}

// detailsTTL is how long a voucher's details are kept before they are
// read again: how long an instance that missed an operator's change (its
// nudge lost) may show the voucher as it was. The reservation never reads
// them: it refuses by the live state at once, on every instance.
const detailsTTL = time.Second

// cachedVoucher is a voucher's details as read at at; refreshing is set
// while they are read again.
type cachedVoucher struct {
	v          Voucher
	at         time.Time
	refreshing *atomic.Bool
}

// cached is the voucher's details as last read, if known. Details read
// longer than detailsTTL ago are read again in the background, and the
// caller meanwhile has the last read: a database slow or away must not
// hold up a sale the live store runs.
func (c *Catalog) cached(id int64) (cachedVoucher, bool) {
	got, ok := c.cache.Load(id)
	if !ok {
		return cachedVoucher{}, false
	}
	cv := got.(cachedVoucher)
	if c.now().Sub(cv.at) >= detailsTTL && cv.refreshing.CompareAndSwap(false, true) {
		go c.refresh(cv)
	}
	return cv, true
}

// refreshTimeout bounds a background read of a voucher's details.
const refreshTimeout = 2 * time.Second

func (c *Catalog) refresh(cv cachedVoucher) {
	ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
	defer cancel()
	v, err := c.repo.FindVoucher(ctx, cv.v.ID)
	switch {
	case err == nil:
		c.remember(v)
	case errors.Is(err, ErrVoucherNotFound):
		c.cache.CompareAndDelete(cv.v.ID, cv)
	default:
		cv.refreshing.Store(false) // the next caller tries again
	}
}

func (c *Catalog) remember(v Voucher) {
	c.cache.Store(v.ID, cachedVoucher{v: v, at: c.now(), refreshing: &atomic.Bool{}})
}

// Forget drops what this catalog keeps of the voucher: an operator
// changed it (here, or on another instance that said so).
func (c *Catalog) Forget(voucherID int64) {
	c.cache.Delete(voucherID)
	c.forgetListing()
}

func (c *Catalog) forgetListing() {
	c.listingMu.Lock()
	c.listing = nil
	c.listingMu.Unlock()
}

// Peek is Details for a caller that must not decide a voucher unknown
// (the room check before a seckill): ok is false for a voucher the
// unknown-voucher memo rules out, or the repository does not have, and
// nothing is remembered of it; the seckill answers such an id itself, as
// it did before rooms.
func (c *Catalog) Peek(ctx context.Context, id int64) (v Voucher, ok bool, err error) {
	if cached, known := c.cached(id); known {
		return cached.v, true, nil
	}
	if c.unknown.RuledOut(ctx, id) {
		return Voucher{}, false, nil
	}
	found, err, _ := c.lookups.Do("peek:"+strconv.FormatInt(id, 10), func() (any, error) {
		v, err := c.repo.FindVoucher(ctx, id)
		if err == nil {
			c.remember(v)
		}
		return v, err
	})
	switch {
	case errors.Is(err, ErrVoucherNotFound):
		return Voucher{}, false, nil
	case err != nil:
		return Voucher{}, false, Wrap("get voucher", CodeUnavailable, err)
	}
	return found.(Voucher), true, nil
}

// Get returns a voucher with its remaining stock.
func (c *Catalog) Get(ctx context.Context, id int64) (Voucher, error) {
	v, err := c.Details(ctx, id)
	if err != nil {
		return Voucher{}, err
	}
	if err := c.recovery.Ensure(ctx, id, Wait); err != nil {
		return Voucher{}, err
	}
	stock, err := c.board.RemainingStock(ctx, id)
	if errors.Is(err, ErrVoucherNotFound) {
		// In the database, verified, yet gone from the live store (its keys
		// deleted, or a rebuild's fence holds it).
		if err := c.recovery.Lost(ctx, id, Wait); err != nil {
			return Voucher{}, err
		}
		stock, err = c.board.RemainingStock(ctx, id)
		if errors.Is(err, ErrVoucherNotFound) {
			// Rebuilt, and fenced again by another rebuild since: the
			// voucher exists, its stock is not to be had this moment.
			return Voucher{}, ErrBusy
		}
	}
	if err != nil {
		return Voucher{}, Wrap("get voucher stock", CodeUnavailable, err)
	}
	v.Stock = stock
	return v, nil
}
