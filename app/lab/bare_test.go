package lab

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/redisreserve"
	"github.com/seckill-lab/seckill/core"
)

// TestTheBareHandlerReserves: the bench's bare handler calls seckill.lua
// as the script now reads its keys and arguments: it kept the old arity
// after the script gained the payment deadline (KEYS[6], ARGV[5..7]) and
// answered 503 to every request, which only a full `make bench` showed.
// Two shoppers for one unit: one order handed off, the stock 0.
func TestTheBareHandlerReserves(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	const prefix = "bare:"
	res, err := redisreserve.New(rdb, redisreserve.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := res.LoadVoucher(ctx, core.Voucher{ID: 7, Stock: 1, BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	app := fiber.New()
	app.Post("/api/vouchers/:id/seckill", bareSeckill(prefix, rdb))
	for range 2 {
		resp, err := app.Test(httptest.NewRequest("POST", "/api/vouchers/7/seckill", nil))
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&body) != nil {
			t.Fatalf("status %d, body %v: the script refused the bare handler's call", resp.StatusCode, body)
		}
	}
	keys := redisreserve.Keys{Prefix: prefix}
	if n := rdb.XLen(ctx, keys.ShardKey("orders", 0)).Val(); n != 1 {
		t.Fatalf("%d orders handed off for 1 unit and 2 shoppers, want 1", n)
	}
	if left, _ := rdb.Get(ctx, keys.Stock(7)).Int64(); left != 0 {
		t.Fatalf("stock %d after the sale, want 0", left)
	}
}
