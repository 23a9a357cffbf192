-- See the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS tb_voucher_room (
  voucher_id       INTEGER PRIMARY KEY,
  opens_at         TIMESTAMP NOT NULL,
  admit_per_second INTEGER NOT NULL,
  admission_ttl_ms INTEGER NOT NULL,
  seed             BLOB NOT NULL,
  create_time      TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
);
