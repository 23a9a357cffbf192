-- A voucher's waiting room (core.Room), fixed at creation. The seed keys
-- the opening's draw: it is secret until the sale begins (only its SHA-256
-- is shown), and must outlive Redis, so it is kept here, not in the room's
-- live state.
CREATE TABLE IF NOT EXISTS tb_voucher_room (
  voucher_id       BIGINT      NOT NULL,
  opens_at         DATETIME(3) NOT NULL COMMENT 'shoppers join from here; the draw orders those who joined before begin_time',
  admit_per_second INT         NOT NULL,
  admission_ttl_ms BIGINT      NOT NULL,
  seed             BINARY(32)  NOT NULL COMMENT 'the draw''s key, published after begin_time',
  create_time      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (voucher_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
