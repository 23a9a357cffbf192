package mysqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/reservationtest"
)

// TestRules: the sync baseline's SQL transaction keeps the same rule book
// as the Lua reservation, on SQLite and MariaDB.
func TestRules(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *mysqlstore.Store) {
		sale := s.SyncSale(15 * time.Minute)
		reservationtest.Run(t, reservationtest.Subject{
			Reserver: sale,
			Board:    sale,
			Create: func(t *testing.T, v core.Voucher) int64 {
				if err := s.CreateVoucher(context.Background(), &v); err != nil {
					t.Fatal(err)
				}
				return v.ID
			},
			// The sale judges the window by this server's clock.
			Now: func(*testing.T) time.Time { return time.Now() },
		})
	})
}
