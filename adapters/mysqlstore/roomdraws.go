package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/core/room"
)

// RoomDraws keeps the waiting rooms' draws (room.DrawStore).
type RoomDraws struct{ db *bun.DB }

// RoomDraws is the store's side of the rooms' draws.
func (s *Store) RoomDraws() *RoomDraws { return &RoomDraws{db: s.db} }

type roomDrawRow struct {
	bun.BaseModel `bun:"table:tb_room_draw"`
	VoucherID     int64  `bun:"voucher_id,pk"`
	Rank          int    `bun:"draw_rank,pk"`
	Key           string `bun:"draw_key"`
	UserID        int64  `bun:"user_id"`
}

// drawChunk is the rows one INSERT carries.
const drawChunk = 1000

// SaveDraw implements room.DrawStore: one transaction, and a draw
// already saved is kept (the first writer's), whoever saves again; its
// beacon value is written once, beside the room.
func (d *RoomDraws) SaveDraw(ctx context.Context, voucherID int64, draw room.KeptDraw) error {
	return d.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		n, err := tx.NewSelect().Model((*roomDrawRow)(nil)).Where("voucher_id = ?", voucherID).Limit(1).Count(ctx)
		if err != nil || n > 0 {
			return err
		}
		if draw.Beacon != "" {
			if _, err := tx.NewUpdate().Table("tb_voucher_room").Set("beacon_value = ?", draw.Beacon).
				Where("voucher_id = ? AND beacon_value IS NULL", voucherID).Exec(ctx); err != nil {
				return fmt.Errorf("mysqlstore: save room draw's beacon: %w", err)
			}
		}
		entries := draw.Entries
		for from := 0; from < len(entries); from += drawChunk {
			rows := make([]roomDrawRow, 0, drawChunk)
			for i, e := range entries[from:min(from+drawChunk, len(entries))] {
				rows = append(rows, roomDrawRow{VoucherID: voucherID, Rank: from + i + 1, Key: e.Key, UserID: e.UserID})
			}
			if _, err := tx.NewInsert().Model(&rows).Ignore().Returning("").Exec(ctx); err != nil {
				return fmt.Errorf("mysqlstore: save room draw: %w", err)
			}
		}
		return nil
	})
}

// LoadDraw implements room.DrawStore.
func (d *RoomDraws) LoadDraw(ctx context.Context, voucherID int64) (room.KeptDraw, error) {
	var rows []roomDrawRow
	if err := d.db.NewSelect().Model(&rows).Where("voucher_id = ?", voucherID).Order("draw_rank").Scan(ctx); err != nil {
		return room.KeptDraw{}, fmt.Errorf("mysqlstore: load room draw: %w", err)
	}
	var beacon sql.NullString
	err := d.db.NewSelect().Table("tb_voucher_room").Column("beacon_value").Where("voucher_id = ?", voucherID).
		Scan(ctx, &beacon)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return room.KeptDraw{}, fmt.Errorf("mysqlstore: load room draw's beacon: %w", err)
	}
	out := room.KeptDraw{Entries: make([]room.DrawEntry, len(rows))}
	for i, r := range rows {
		out.Entries[i] = room.DrawEntry{Key: r.Key, UserID: r.UserID}
	}
	out.Beacon = beacon.String
	return out, nil
}
