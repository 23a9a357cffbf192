-- The order lifecycle: an unpaid order has a deadline (pay_by; NULL for
-- orders from before payments, which never expire), a cancelled one says
-- why, and a buyer holds at most one *live* order (created or paid) per
-- voucher, so one whose order was cancelled may buy again: the unique key
-- moves from (user_id, voucher_id) to (voucher_id, live_buyer), live_buyer
-- being the user id while the order is live and NULL after (NULLs never
-- collide in a unique key).
ALTER TABLE tb_voucher_order
  ADD COLUMN pay_by DATETIME(3) NULL COMMENT 'unpaid past this: cancelled (expired)' AFTER status,
  ADD COLUMN cancel_reason VARCHAR(16) NULL COMMENT 'expired or shopper' AFTER pay_by,
  ADD COLUMN live_buyer BIGINT AS (IF(status IN (1, 2), user_id, NULL)) STORED COMMENT 'user_id while created or paid',
  ADD UNIQUE KEY uk_order_live_buyer (voucher_id, live_buyer),
  ADD KEY idx_order_buyer (user_id, voucher_id),
  ADD KEY idx_order_status_pay_by (status, pay_by);
--bun:split
ALTER TABLE tb_voucher_order DROP KEY uk_order_user_voucher;
--bun:split
-- A unit cancelled in MySQL (its stock column already +1) and not yet given
-- back in Redis: written in the cancelling transaction, deleted once Redis
-- has it back, re-driven by the sweep after a crash or while the voucher
-- was being rebuilt.
CREATE TABLE IF NOT EXISTS tb_order_release (
  order_id    BIGINT      NOT NULL,
  voucher_id  BIGINT      NOT NULL,
  user_id     BIGINT      NOT NULL,
  create_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (order_id),
  KEY idx_release_time (create_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
