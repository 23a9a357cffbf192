-- The key of a room's per-shopper salts (core.Room.SaltKey): a shopper's
-- key in the draw is made over their id and a salt only they are shown, so
-- the published keys prove the order without naming anyone (with the seed
-- public, HMAC over the ids 1..5000 named every early joiner). Never
-- published. NULL: a room made before salts, keyed over the id alone.
ALTER TABLE tb_voucher_room ADD COLUMN salt_key BINARY(32) NULL COMMENT 'keys the shoppers'' salts; never published';
