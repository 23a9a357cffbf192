package redisreserve

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/lua"
)

// The Reserver is also the live side of recovery (core.LiveSale): each
// voucher's window hash records the incarnation of Redis (Identity) its
// state was written in, a rebuild fences the voucher by removing its stock
// while it holds the fence (two fields of the window hash: see
// fence_voucher.lua), and restore_voucher.lua writes the rebuilt state and
// lifts the fence at once.

var (
	fenceScript         = redis.NewScript(lua.FenceVoucher)
	restoreScript       = redis.NewScript(lua.RestoreVoucher)
	restoreBuyersScript = redis.NewScript(lua.RestoreBuyers)
	unfenceScript       = redis.NewScript(lua.Unfence)
)

// Incarnation implements core.LiveSale.
func (r *Reserver) Incarnation(ctx context.Context) (string, error) {
	if r.cfg.Identity == nil {
		return "", nil
	}
	return r.cfg.Identity.Current(ctx)
}

// VerifiedIn implements core.LiveSale: the incarnation recorded with the
// voucher's window, if its state is whole: the stock exists, and the
// buyers and the stock left add up to the window's total (a Redis that
// evicts keys can drop one of them under an unchanged run_id).
func (r *Reserver) VerifiedIn(ctx context.Context, voucherID int64) (string, bool, error) {
	var stock *redis.StringCmd
	var window *redis.SliceCmd
	var buyers *redis.IntCmd
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		stock = p.Get(ctx, r.keys.Stock(voucherID))
		window = p.HMGet(ctx, r.keys.Window(voucherID), "epoch", "total")
		buyers = p.HLen(ctx, r.keys.Orders(voucherID))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", false, fmt.Errorf("redisreserve: verified in: %w", err)
	}
	left, serr := stock.Int64()
	epoch, ok := window.Val()[0].(string)
	if serr != nil || !ok {
		return "", false, nil
	}
	if total, ok := window.Val()[1].(string); ok {
		if n, err := strconv.ParseInt(total, 10, 64); err == nil && buyers.Val()+left != n {
			return "", false, nil
		}
	}
	return epoch, true, nil
}

// DrainedIn implements core.LiveSale.
func (r *Reserver) DrainedIn(ctx context.Context) (string, bool, error) {
	inc, err := r.rdb.Get(ctx, r.keys.Drained()).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("redisreserve: drained in: %w", err)
	}
	return inc, true, nil
}

// MarkDrained implements core.LiveSale. The key never expires: it is only
// believed while its incarnation is the current one.
func (r *Reserver) MarkDrained(ctx context.Context, incarnation string) error {
	if err := r.rdb.Set(ctx, r.keys.Drained(), incarnation, 0).Err(); err != nil {
		return fmt.Errorf("redisreserve: mark drained: %w", err)
	}
	return nil
}

// Fence implements core.LiveSale.
func (r *Reserver) Fence(ctx context.Context, voucherID int64, ttl time.Duration) (string, bool, error) {
	token := rand.Text()
	n, err := fenceScript.Run(ctx, r.rdb, []string{r.keys.Window(voucherID), r.keys.Stock(voucherID)},
		token, ttl.Milliseconds()).Int()
	if err != nil {
		return "", false, fmt.Errorf("redisreserve: fence voucher %d: %w", voucherID, err)
	}
	return token, n == 1, nil
}

// restoreChunk is how many buyers one restore_buyers.lua call stages: a
// short script (a few milliseconds) that shoppers of other vouchers wait
// behind, where 100,000 buyers in one call held Redis for the whole list.
const restoreChunk = 2000

// Restore implements core.LiveSale: the buyers are staged in chunks under
// the fence, then one script swaps them in with the stock and window and
// lifts the fence. Every call checks the fence token, so a rebuild that
// outlived its fence changes nothing.
func (r *Reserver) Restore(ctx context.Context, s core.RestoredSale, token string) error {
	v := s.Voucher
	staging := r.keys.Orders(v.ID) + ":restoring:" + token
	window := r.keys.Window(v.ID)
	args := make([]any, 0, 1+2*min(len(s.Buyers), restoreChunk))
	stage := func() error {
		if len(args) == 1 {
			return nil
		}
		n, err := restoreBuyersScript.Run(ctx, r.rdb, []string{window, staging}, args...).Int()
		if err != nil {
			return fmt.Errorf("redisreserve: restore voucher %d: stage buyers: %w", v.ID, err)
		}
		if n != 1 {
			return fmt.Errorf("redisreserve: restore voucher %d: the fence expired while the buyers were staged", v.ID)
		}
		args = args[:1]
		return nil
	}
	args = append(args, token)
	for user, order := range s.Buyers {
		args = append(args, strconv.FormatInt(user, 10), strconv.FormatInt(order, 10))
		if len(args) == 1+2*restoreChunk {
			if err := stage(); err != nil {
				return err
			}
		}
	}
	if err := stage(); err != nil {
		return err
	}
	n, err := restoreScript.Run(ctx, r.rdb,
		[]string{r.keys.Stock(v.ID), window, r.keys.Orders(v.ID), staging},
		token, v.BeginAt.UnixMilli(), v.EndAt.UnixMilli(), v.Stock, s.Incarnation, len(s.Buyers)).Int()
	if err != nil {
		return fmt.Errorf("redisreserve: restore voucher %d: %w", v.ID, err)
	}
	switch n {
	case 1:
		return nil
	case -1:
		return fmt.Errorf("redisreserve: restore voucher %d: fewer buyers staged than sent", v.ID)
	}
	return fmt.Errorf("redisreserve: restore voucher %d: the fence expired before the restore", v.ID)
}

// Unfence implements core.LiveSale.
func (r *Reserver) Unfence(ctx context.Context, voucherID int64, token string) error {
	return unfenceScript.Run(ctx, r.rdb, []string{r.keys.Window(voucherID)}, token).Err()
}

// Fenced implements core.LiveSale.
func (r *Reserver) Fenced(ctx context.Context, voucherID int64) (bool, error) {
	var fence *redis.SliceCmd
	var now *redis.TimeCmd
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		fence = p.HMGet(ctx, r.keys.Window(voucherID), "fence", "fenceUntil")
		now = p.Time(ctx)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("redisreserve: fenced: %w", err)
	}
	return fencedAt(fence.Val(), now.Val()), nil
}

// fencedAt reads a window's fence fields against Redis's clock.
func fencedAt(fields []any, now time.Time) bool {
	if len(fields) != 2 || fields[0] == nil {
		return false
	}
	until, _ := fields[1].(string)
	ms, err := strconv.ParseInt(until, 10, 64)
	return err == nil && ms > now.UnixMilli()
}

var _ core.LiveSale = (*Reserver)(nil)

// LiveState implements core.LiveSale.
func (r *Reserver) LiveState(ctx context.Context, voucherID int64) (core.LiveState, error) {
	var (
		stock  *redis.StringCmd
		epoch  *redis.StringCmd
		buyers *redis.MapStringStringCmd
		fence  *redis.SliceCmd
		now    *redis.TimeCmd
	)
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		stock = p.Get(ctx, r.keys.Stock(voucherID))
		epoch = p.HGet(ctx, r.keys.Window(voucherID), "epoch")
		buyers = p.HGetAll(ctx, r.keys.Orders(voucherID))
		fence = p.HMGet(ctx, r.keys.Window(voucherID), "fence", "fenceUntil")
		now = p.Time(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return core.LiveState{}, fmt.Errorf("redisreserve: live state: %w", err)
	}
	s := core.LiveState{Buyers: map[int64]int64{}, Fenced: fencedAt(fence.Val(), now.Val()), VerifiedIn: epoch.Val()}
	if n, err := stock.Int64(); err == nil {
		s.Present, s.Stock = true, n
	}
	for u, o := range buyers.Val() {
		user, err1 := strconv.ParseInt(u, 10, 64)
		order, err2 := strconv.ParseInt(o, 10, 64)
		if err1 == nil && err2 == nil {
			s.Buyers[user] = order
		}
	}
	return s, nil
}

var repairScript = redis.NewScript(lua.RepairOrder)

// RefreshIncarnation implements core.LiveSale.
func (r *Reserver) RefreshIncarnation(ctx context.Context) (string, error) {
	if r.cfg.Identity == nil {
		return "", nil
	}
	return r.cfg.Identity.Refresh(ctx)
}

// Repair implements core.LiveSale: repair_order.lua for each order, in one
// pipeline. EVAL, not EVALSHA: repairs follow a Redis that lost its
// script cache too, and they are rare.
func (r *Reserver) Repair(ctx context.Context, orders []core.Order) ([]core.Order, error) {
	cmds, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, o := range orders {
			repairScript.Eval(ctx, p, []string{r.keys.Stock(o.VoucherID), r.keys.Orders(o.VoucherID)}, o.UserID, o.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisreserve: repair: %w", err)
	}
	var again []core.Order
	for i, c := range cmds {
		switch code, _ := c.(*redis.Cmd).Int(); code {
		case 2:
			again = append(again, orders[i])
		case 3:
			r.log().Error("repair: the buyer holds another order of the voucher in Redis", "order", orders[i].ID,
				"user", orders[i].UserID, "voucher", orders[i].VoucherID)
		case 4:
			r.log().Error("repair: no stock left to take for an order persisted across Redis's loss: its unit was sold again, and the database will refuse one order",
				"order", orders[i].ID, "voucher", orders[i].VoucherID)
		}
	}
	return again, nil
}
