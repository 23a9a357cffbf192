-- See the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS tb_payment (
  id          TEXT PRIMARY KEY,
  order_id    INTEGER NOT NULL,
  provider    TEXT NOT NULL,
  amount      INTEGER NOT NULL,
  create_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
);
--bun:split
CREATE INDEX IF NOT EXISTS idx_payment_order ON tb_payment (order_id);
--bun:split
CREATE TABLE IF NOT EXISTS tb_payment_txn (
  provider      TEXT NOT NULL,
  txn_id        TEXT NOT NULL,
  payment_id    TEXT NOT NULL,
  order_id      INTEGER NOT NULL,
  amount        INTEGER NOT NULL,
  succeeded     INTEGER NOT NULL,
  result        TEXT NOT NULL,
  refunded_time TIMESTAMP NULL,
  create_time   TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (provider, txn_id)
);
--bun:split
CREATE INDEX IF NOT EXISTS idx_txn_order ON tb_payment_txn (order_id);
