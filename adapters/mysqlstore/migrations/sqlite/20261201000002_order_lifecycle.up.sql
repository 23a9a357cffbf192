-- See the MySQL migration of the same name. SQLite cannot drop a unique
-- constraint of a table, so the table is rebuilt; one live order per buyer
-- is a partial unique index.
CREATE TABLE tb_voucher_order_lifecycle (
  id            INTEGER PRIMARY KEY,
  user_id       INTEGER NOT NULL,
  voucher_id    INTEGER NOT NULL,
  status        INTEGER NOT NULL DEFAULT 1,
  pay_by        TIMESTAMP NULL,
  cancel_reason TEXT NULL,
  create_time   TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  update_time   TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
);
--bun:split
INSERT INTO tb_voucher_order_lifecycle (id, user_id, voucher_id, status, create_time, update_time)
  SELECT id, user_id, voucher_id, status, create_time, update_time FROM tb_voucher_order;
--bun:split
DROP TABLE tb_voucher_order;
--bun:split
ALTER TABLE tb_voucher_order_lifecycle RENAME TO tb_voucher_order;
--bun:split
CREATE INDEX idx_order_voucher ON tb_voucher_order (voucher_id);
--bun:split
CREATE UNIQUE INDEX uk_order_live_buyer ON tb_voucher_order (voucher_id, user_id) WHERE status IN (1, 2);
--bun:split
CREATE INDEX idx_order_buyer ON tb_voucher_order (user_id, voucher_id);
--bun:split
CREATE INDEX idx_order_status_pay_by ON tb_voucher_order (status, pay_by);
--bun:split
CREATE TABLE IF NOT EXISTS tb_order_release (
  order_id    INTEGER PRIMARY KEY,
  voucher_id  INTEGER NOT NULL,
  user_id     INTEGER NOT NULL,
  create_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
);
