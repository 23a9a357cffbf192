-- See the MySQL migration of the same name.
ALTER TABLE tb_seckill_voucher ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
--bun:split
CREATE TABLE IF NOT EXISTS tb_operator_action (
  id                INTEGER PRIMARY KEY AUTOINCREMENT,
  at                DATETIME NOT NULL,
  operator          TEXT NOT NULL DEFAULT '',
  token_fingerprint TEXT NOT NULL DEFAULT '',
  action            TEXT NOT NULL,
  voucher_id        INTEGER NULL,
  before_state      TEXT NOT NULL DEFAULT '',
  after_state       TEXT NOT NULL DEFAULT '',
  note              TEXT NOT NULL DEFAULT '',
  state             TEXT NOT NULL
);
--bun:split
CREATE INDEX IF NOT EXISTS idx_action_voucher ON tb_operator_action (voucher_id, id);
--bun:split
CREATE INDEX IF NOT EXISTS idx_action_pending ON tb_operator_action (state, id);
