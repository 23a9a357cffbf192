-- A hot voucher's live stock split over buckets (core.Voucher.Buckets),
-- fixed at creation: a rebuild of its live state splits it the same way.
ALTER TABLE tb_seckill_voucher ADD COLUMN buckets INT NOT NULL DEFAULT 1 COMMENT 'live-stock buckets, each on its own shard';
