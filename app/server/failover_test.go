package server

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-lab/seckill/adapters/testenv"
)

// TestASaleContinuesAfterAFailover: the server finds its Redis through
// Sentinel (go-redis's failover URL); the primary is SIGKILLed mid-sale and
// the sentinels promote the replica. The server follows the new primary,
// and, since it is another incarnation (its own run_id), verifies each
// voucher against MySQL and the queue before using it: the earlier buyers
// stay refused and the rest of the sale sells exactly the stock.
func TestASaleContinuesAfterAFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("failover skipped in -short mode")
	}
	for _, queue := range recoveryBackends {
		t.Run(queue, func(t *testing.T) {
			dsn, ok := testenv.MySQLDatabase(t)
			if !ok {
				t.Skipf("%s is not set", testenv.MySQLDSNEnv)
			}
			set := testenv.StartSentinelSet(t)
			cfg := testConfig()
			cfg.RedisURL, cfg.MySQLDSN, cfg.Queue = set.URL(), dsn, queue
			h := startWith(t, cfg)
			if _, isClient := h.srv.rdb.(*redis.Client); !isClient || h.srv.clustered {
				t.Fatalf("the failover URL opened %T", h.srv.rdb)
			}
			const stock, sold = 30, 10
			voucher := h.openVoucher(stock)
			buyers(t, h, voucher, 1, sold)
			before := set.Primary()
			after := set.KillPrimary()
			t.Logf("primary on port %d killed; the sentinels promoted port %d", before, after)
			saleAfterLoss(t, h, voucher, stock, sold)
			if !strings.Contains(h.metricsText(), `seckill_rebuilds_total{queue="`+queue+`",result="ok"}`) {
				t.Fatal("no rebuild after the failover")
			}
		})
	}
}
