-- See the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS tb_dead_letter (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  source          TEXT    NOT NULL,
  position        TEXT    NOT NULL,
  backend         TEXT    NOT NULL,
  reason          TEXT    NOT NULL,
  error           TEXT    NOT NULL,
  order_id        INTEGER NULL,
  user_id         INTEGER NULL,
  voucher_id      INTEGER NULL,
  body            BLOB    NOT NULL,
  deliveries      INTEGER NOT NULL DEFAULT 0,
  consumer        TEXT    NOT NULL DEFAULT '',
  first_failed    TIMESTAMP NOT NULL,
  last_failed     TIMESTAMP NOT NULL,
  redriven        INTEGER NOT NULL DEFAULT 0,
  resolved        TEXT    NULL,
  resolved_time   TIMESTAMP NULL,
  note            TEXT    NULL,
  UNIQUE (source, position)
);
--bun:split
CREATE INDEX IF NOT EXISTS idx_dead_letter_open ON tb_dead_letter (resolved_time, id);
--bun:split
CREATE INDEX IF NOT EXISTS idx_dead_letter_reason ON tb_dead_letter (reason, id);
--bun:split
CREATE INDEX IF NOT EXISTS idx_dead_letter_voucher ON tb_dead_letter (voucher_id, id);
--bun:split
CREATE INDEX IF NOT EXISTS idx_dead_letter_order ON tb_dead_letter (order_id);
--bun:split
CREATE TABLE IF NOT EXISTS tb_dead_letter_source (
  source    TEXT PRIMARY KEY,
  position  TEXT NOT NULL,
  read_time TIMESTAMP NOT NULL
);
