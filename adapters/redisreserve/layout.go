package redisreserve

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/lua"
)

// VoucherMove is a voucher whose keys lie in another layout than the
// current one: written under another number of shards, or before shards.
type VoucherMove struct {
	From, To VoucherKeys
}

// Legacy reports a move from the layout before shards.
func (m VoucherMove) Legacy() bool { return m.From.Legacy }

// FindMoves lists the vouchers whose keys are not where keys names them:
// every stock key under the prefix (on every master of a cluster) that
// parses as another layout's.
func FindMoves(ctx context.Context, rdb redis.UniversalClient, keys Keys) ([]VoucherMove, error) {
	var (
		mu    sync.Mutex
		moves []VoucherMove
	)
	scan := func(ctx context.Context, node redis.Cmdable) error {
		iter := node.Scan(ctx, 0, keys.StockPattern(), 1000).Iterator()
		for iter.Next(ctx) {
			from, ok := keys.ParseStockKey(iter.Val())
			if !ok {
				continue
			}
			to := VoucherKeys{VoucherID: from.VoucherID, Stock: keys.Stock(from.VoucherID),
				Window: keys.Window(from.VoucherID), Order: keys.Orders(from.VoucherID)}
			if from != to {
				mu.Lock()
				moves = append(moves, VoucherMove{From: from, To: to})
				mu.Unlock()
			}
		}
		return iter.Err()
	}
	var err error
	if c, ok := rdb.(*redis.ClusterClient); ok {
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	} else {
		err = scan(ctx, rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("redisreserve: scan voucher keys: %w", err)
	}
	return moves, nil
}

var moveVoucherScript = redis.NewScript(lua.MoveVoucher)

// MoveVoucher moves one voucher's keys to the new layout in one script (on
// one Redis only: a cluster refuses keys of two slots in one call). It
// reports false when there was nothing left to move.
func MoveVoucher(ctx context.Context, rdb redis.UniversalClient, m VoucherMove) (bool, error) {
	n, err := moveVoucherScript.Run(ctx, rdb,
		[]string{m.From.Stock, m.From.Window, m.From.Order, m.To.Stock, m.To.Window, m.To.Order}).Int()
	if err != nil {
		return false, fmt.Errorf("redisreserve: move voucher %d: %w", m.From.VoucherID, err)
	}
	return n == 1, nil
}
