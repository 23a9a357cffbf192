-- The provider's word decides (issue 62). tb_payment.state is the shop's
-- record of what the provider said of each payment — by its notice, or
-- when asked (before the order expires, and by the reconciliation duty):
-- pending until it says succeeded or failed (a failed payment may yet
-- succeed: the shopper tries again on the same payment), refunded once
-- its money went back; checked_time is when the provider was last asked.
-- tb_paysandbox_payment, _charge and _refund are the built-in sandbox
-- provider's own books, apart from the shop's: each payment, the money it
-- took (one charge per transaction) and gave back (one refund per
-- idempotency key), whether or not its notices arrived (a real provider's books
-- are on its own servers; the sandbox keeps them in the shop's database so
-- that every instance and a restart see the same provider).
ALTER TABLE tb_payment
  ADD COLUMN state VARCHAR(16) NOT NULL DEFAULT 'pending' COMMENT 'pending, succeeded, failed, refunded: the provider''s word',
  ADD COLUMN checked_time DATETIME(3) NULL COMMENT 'when the provider was last asked about it',
  ADD KEY idx_payment_state (state, create_time);
--bun:split
UPDATE tb_payment SET state = 'succeeded'
  WHERE id IN (SELECT payment_id FROM tb_payment_txn WHERE succeeded = 1);
--bun:split
UPDATE tb_payment SET state = 'failed'
  WHERE state = 'pending' AND id IN (SELECT payment_id FROM tb_payment_txn WHERE succeeded = 0);
--bun:split
CREATE TABLE IF NOT EXISTS tb_paysandbox_payment (
  id          VARCHAR(32) NOT NULL,
  order_id    BIGINT      NOT NULL,
  amount      BIGINT      NOT NULL COMMENT 'minor units asked',
  failed_txn  VARCHAR(64) NOT NULL DEFAULT '' COMMENT 'the last failed attempt''s transaction, while nothing succeeded',
  create_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
--bun:split
CREATE TABLE IF NOT EXISTS tb_paysandbox_charge (
  txn_id      VARCHAR(64) NOT NULL,
  payment_id  VARCHAR(32) NOT NULL,
  amount      BIGINT      NOT NULL COMMENT 'minor units taken',
  create_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (txn_id),
  KEY idx_charge_payment (payment_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
--bun:split
CREATE TABLE IF NOT EXISTS tb_paysandbox_refund (
  payment_id  VARCHAR(32)  NOT NULL,
  idem_key    VARCHAR(128) NOT NULL COMMENT 'one refund per key, however often asked',
  amount      BIGINT       NOT NULL,
  create_time DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (payment_id, idem_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
