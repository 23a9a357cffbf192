-- See the MySQL migration of the same name.
ALTER TABLE tb_seckill_voucher ADD COLUMN buckets INTEGER NOT NULL DEFAULT 1;
