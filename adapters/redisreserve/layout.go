package redisreserve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/lua"
)

// VoucherMove is a voucher (or one bucket of a voucher in buckets) whose
// keys lie in another layout than the current one: written under another
// number of shards, or before shards.
type VoucherMove struct {
	From, To VoucherKeys
}

// Legacy reports a move from the layout before shards.
func (m VoucherMove) Legacy() bool { return m.From.Legacy }

// FindMoves lists the vouchers and buckets whose keys are not where keys
// names them: every stock key under the prefix (on every master of a
// cluster) that parses as another layout's. A bucket's place depends on
// its voucher's bucket count, which its window records ("buckets"); a
// window without it is a voucher written before buckets, one bucket. A
// bucket b > 0 whose window is gone (evicted, say) is not moved: without
// its window it is a lost bucket, which the voucher's rebuild recounts from
// the database in the new layout.
func FindMoves(ctx context.Context, rdb redis.UniversalClient, keys Keys) ([]VoucherMove, error) {
	var (
		mu    sync.Mutex
		moves = map[string]VoucherMove{} // by the old stock key: SCAN may return a key twice
	)
	scan := func(ctx context.Context, node redis.Cmdable) error {
		var cursor uint64
		for {
			names, next, err := node.Scan(ctx, cursor, keys.StockPattern(), 1000).Result()
			if err != nil {
				return err
			}
			var found []VoucherKeys
			for _, name := range names {
				if from, ok := keys.ParseStockKey(name); ok {
					found = append(found, from)
				}
			}
			// Each one's bucket count, in one round trip per page.
			counts := make([]*redis.StringCmd, len(found))
			if len(found) > 0 {
				if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
					for i, from := range found {
						counts[i] = p.HGet(ctx, from.Window, "buckets")
					}
					return nil
				}); err != nil && !errors.Is(err, redis.Nil) {
					return err
				}
			}
			for i, from := range found {
				n, err := counts[i].Int()
				switch {
				case errors.Is(err, redis.Nil) && from.Bucket == 0:
					n = 1
				case err != nil || n <= from.Bucket:
					continue // a bucket without its window: lost, not moved (above)
				}
				to := keysOf(from.VoucherID, keys.Bucket(from.VoucherID, from.Bucket, n))
				if from != to {
					mu.Lock()
					moves[from.Stock] = VoucherMove{From: from, To: to}
					mu.Unlock()
				}
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
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
	out := make([]VoucherMove, 0, len(moves))
	for _, m := range moves {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b VoucherMove) int {
		return cmp.Or(cmp.Compare(a.From.VoucherID, b.From.VoucherID), cmp.Compare(a.From.Bucket, b.From.Bucket))
	})
	return out, nil
}

var moveVoucherScript = redis.NewScript(lua.MoveVoucher)

// MoveVoucher moves one voucher's keys (or one bucket's) to the new layout
// in one script (on one Redis only: a cluster refuses keys of two slots in
// one call). It reports false when there was nothing left to move.
func MoveVoucher(ctx context.Context, rdb redis.UniversalClient, m VoucherMove) (bool, error) {
	n, err := moveVoucherScript.Run(ctx, rdb,
		[]string{m.From.Stock, m.From.Window, m.From.Order, m.From.Transfers, m.To.Stock, m.To.Window, m.To.Order, m.To.Transfers}).Int()
	if err != nil {
		return false, fmt.Errorf("redisreserve: move voucher %d bucket %d: %w", m.From.VoucherID, m.From.Bucket, err)
	}
	return n == 1, nil
}
