-- See the MySQL migration of the same name.
ALTER TABLE tb_payment ADD COLUMN state TEXT NOT NULL DEFAULT 'pending';
--bun:split
ALTER TABLE tb_payment ADD COLUMN checked_time TIMESTAMP NULL;
--bun:split
CREATE INDEX IF NOT EXISTS idx_payment_state ON tb_payment (state, create_time);
--bun:split
UPDATE tb_payment SET state = 'succeeded'
  WHERE id IN (SELECT payment_id FROM tb_payment_txn WHERE succeeded = 1);
--bun:split
UPDATE tb_payment SET state = 'failed'
  WHERE state = 'pending' AND id IN (SELECT payment_id FROM tb_payment_txn WHERE succeeded = 0);
--bun:split
CREATE TABLE IF NOT EXISTS tb_paysandbox_payment (
  id          TEXT PRIMARY KEY,
  order_id    INTEGER NOT NULL,
  amount      INTEGER NOT NULL,
  failed_txn  TEXT NOT NULL DEFAULT '',
  create_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
);
--bun:split
CREATE TABLE IF NOT EXISTS tb_paysandbox_charge (
  txn_id      TEXT PRIMARY KEY,
  payment_id  TEXT NOT NULL,
  amount      INTEGER NOT NULL,
  create_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
);
--bun:split
CREATE INDEX IF NOT EXISTS idx_charge_payment ON tb_paysandbox_charge (payment_id);
--bun:split
CREATE TABLE IF NOT EXISTS tb_paysandbox_refund (
  payment_id  TEXT NOT NULL,
  idem_key    TEXT NOT NULL,
  amount      INTEGER NOT NULL,
  create_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (payment_id, idem_key)
);
