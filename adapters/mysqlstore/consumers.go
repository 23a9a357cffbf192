package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/steer"
)

// consumerRow is the operator's hold on the consumers: one row.
type consumerRow struct {
	bun.BaseModel `bun:"table:tb_consumer_control"`
	ID            int       `bun:"id,pk"`
	Paused        int       `bun:"paused"`
	PerSecond     int       `bun:"per_second"`
	Version       int64     `bun:"version"`
	UpdateTime    time.Time `bun:"update_time"`
}

func (r consumerRow) setting() core.ConsumerSetting {
	return core.ConsumerSetting{Paused: r.Paused != 0, PerSecond: r.PerSecond, Version: r.Version}
}

// ConsumerSetting implements steer.Store (and consumergate.Truth): never
// set, the consumers run open at version 0.
func (st *Steering) ConsumerSetting(ctx context.Context) (core.ConsumerSetting, error) {
	return consumerSetting(ctx, st.s.db, false)
}

func consumerSetting(ctx context.Context, db bun.IDB, forUpdate bool) (core.ConsumerSetting, error) {
	var row consumerRow
	q := db.NewSelect().Model(&row).Where("id = 1")
	if forUpdate {
		q = q.For("UPDATE")
	}
	err := q.Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return core.ConsumerSetting{}, nil
	}
	if err != nil {
		return core.ConsumerSetting{}, fmt.Errorf("mysqlstore: the consumers' setting: %w", err)
	}
	return row.setting(), nil
}

// SetConsumers implements steer.Store: the row locked (MySQL), decide's
// setting written with its version one more and the action recorded,
// pending, in one transaction.
func (st *Steering) SetConsumers(ctx context.Context, decide func(core.ConsumerSetting) (core.ConsumerSetting, steer.Action)) (core.ConsumerSetting, int64, error) {
	var after core.ConsumerSetting
	var id int64
	err := st.s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		before, err := consumerSetting(ctx, tx, st.s.dialect == dialectMySQL)
		if err != nil {
			return err
		}
		c, a := decide(before)
		c.Version = before.Version + 1
		row := consumerRow{ID: 1, Paused: map[bool]int{true: 1}[c.Paused], PerSecond: c.PerSecond, Version: c.Version, UpdateTime: time.Now().UTC()}
		// The version always moves, so an existing row is always changed
		// (MySQL counts an unchanged row as unaffected); none: the first.
		res, err := tx.NewUpdate().Model(&row).Column("paused", "per_second", "version", "update_time").WherePK().Exec(ctx)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			if _, err := tx.NewInsert().Model(&row).Exec(ctx); err != nil {
				return err
			}
		}
		ar := pendingRow(a)
		if _, err := tx.NewInsert().Model(&ar).Exec(ctx); err != nil {
			return err
		}
		after, id = c, ar.ID
		return nil
	})
	if err != nil {
		return core.ConsumerSetting{}, 0, fmt.Errorf("mysqlstore: set the consumers: %w", err)
	}
	return after, id, nil
}
