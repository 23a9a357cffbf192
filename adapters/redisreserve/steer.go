package redisreserve

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/steer"
	"github.com/seckill-lab/seckill/lua"
)

var steerWindowScript = redis.NewScript(lua.SteerWindow)

// Steering writes an operator's change of a voucher's sale into its live
// state, where the reservation reads it (core/steer's Live).
type Steering struct{ s *sale }

// Steering is the reservation's side of steering a live sale.
func (r *Reserver) Steering() *Steering { return &Steering{r.sale} }

// Apply writes the voucher's window and pause into every bucket's window
// (steer_window.lua): from its return on, every reservation this Redis
// runs reads them. endNow ends the sale by Redis's clock. A bucket with no
// live state is skipped (its load or rebuild reads the database, which
// has the change); one a rebuild holds is core.ErrBusy, and nothing is
// lost by asking again: each write sets, never adds.
func (st *Steering) Apply(ctx context.Context, v core.Voucher, endNow bool) error {
	n := v.BucketCount()
	now := "0"
	if endNow {
		now = "1"
	}
	for b := range n {
		bk := st.s.keys.Bucket(v.ID, b, n)
		res, err := steerWindowScript.Run(ctx, st.s.rdb, []string{bk.Window},
			v.BeginAt.UnixMilli(), v.EndAt.UnixMilli(), int(v.Pause), now).Int()
		if err != nil {
			return fmt.Errorf("redisreserve: steer voucher %d bucket %d: %w", v.ID, b, err)
		}
		if res < 0 {
			return core.Wrap("steer: a rebuild holds the voucher", core.CodeBusy, core.ErrBusy)
		}
	}
	return nil
}

var steerStockScript = redis.NewScript(lua.SteerStock)

// ChangeStock takes or adds delta units in the voucher's live stock, once
// for the action (steer_stock.lua): applied, or refused when more would be
// taken than remains. A voucher in several buckets is not changed here
// (core/steer refuses it first). core.ErrBusy: not loaded (a rebuild runs,
// or Redis forgot the sale); asked again, it applies once.
func (st *Steering) ChangeStock(ctx context.Context, v core.Voucher, actionID, delta int64) (steer.StockChange, error) {
	bk := st.s.keys.Bucket(v.ID, 0, 1)
	res, err := steerStockScript.Run(ctx, st.s.rdb, []string{bk.Stock, bk.Window}, actionID, delta).Int64Slice()
	if err != nil {
		return steer.StockChange{}, fmt.Errorf("redisreserve: steer the stock of voucher %d: %w", v.ID, err)
	}
	if len(res) != 2 {
		return steer.StockChange{}, fmt.Errorf("redisreserve: steer_stock.lua answered %v", res)
	}
	if res[0] < 0 {
		return steer.StockChange{}, core.Wrap("steer: the voucher is being rebuilt", core.CodeBusy, core.ErrBusy)
	}
	return steer.StockChange{Applied: res[0] == 1, Remaining: res[1]}, nil
}
