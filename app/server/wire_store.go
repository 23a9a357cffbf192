package server

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill-lab/seckill/adapters/mysqlstore"
	"github.com/seckill-lab/seckill/core"
)

func (s *Server) openStore(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var err error
	hooks := s.tracing.sqlHooks()
	if s.cfg.EmbeddedSQL() {
		s.store, err = mysqlstore.OpenEmbedded(pctx, hooks...)
	} else {
		s.store, err = mysqlstore.OpenMySQL(pctx, s.cfg.MySQLDSN, s.cfg.MySQLMaxConns, hooks...)
		if err == nil && s.cfg.Consumers > 0 {
			// The consumers get a pool of their own: a crowd polling its
			// order status must not starve the writes of the orders it
			// polls for, nor a long save the API.
			s.orderStore, err = mysqlstore.OpenMySQL(pctx, s.cfg.MySQLDSN, s.cfg.MySQLMaxConns, hooks...)
		}
	}
	if err != nil {
		return err
	}
	mctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := s.store.Migrate(mctx); err != nil {
		return err
	}
	return s.normalizePhones(mctx)
}

// normalizePhones brings users stored before phones were normalised to
// E.164, and tells the operator of phones several users now share.
func (s *Server) normalizePhones(ctx context.Context) error {
	region := s.cfg.PhoneRegion
	rep, err := s.store.Users().NormalizePhones(ctx, func(p string) (string, error) { return core.NormalizePhone(p, region) })
	if err != nil {
		return err
	}
	if rep.Normalized > 0 || rep.Unreadable > 0 {
		s.log.Info("users' phones normalised to E.164", "normalised", rep.Normalized, "unreadable", rep.Unreadable, "region", region)
	}
	if len(rep.Collisions) > 0 {
		s.log.Warn("several users share a phone once normalised: each such phone logs in as its oldest user; "+
			"GET /api/admin/users/phone-collisions lists them (merging is an admin's decision)", "phones", len(rep.Collisions))
	}
	return nil
}

// openDemoSale opens the demo vouchers (SECKILL_DEMO_SALE).
func (s *Server) openDemoSale(ctx context.Context) error {
	now := time.Now().Truncate(time.Second)
	for _, v := range []core.Voucher{
		{Title: "Half-price coffee voucher", PayValue: 1250, ActualValue: 2500, Stock: 100, BeginAt: now.Add(-time.Minute), EndAt: now.Add(2 * time.Hour)},
		{Title: "Cinema night for two", PayValue: 3900, ActualValue: 9000, Stock: 20, BeginAt: now.Add(2 * time.Minute), EndAt: now.Add(2 * time.Hour)},
	} {
		if err := s.catalog.Create(ctx, &v); err != nil {
			return fmt.Errorf("demo sale: %w", err)
		}
		s.log.Info("demo voucher", "id", v.ID, "title", v.Title, "stock", v.Stock, "opens", v.BeginAt.Format(time.RFC3339))
	}
	return nil
}
