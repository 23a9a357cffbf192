-- Payments: each attempt to pay an order (tb_payment), and each
-- notification a provider sent about one, recorded once by the provider's
-- transaction id (tb_payment_txn) with what it did: paid, failed, or
-- refunded (the order was cancelled, or paid by another transaction,
-- first; refunded_time once the provider gave the money back).
CREATE TABLE IF NOT EXISTS tb_payment (
  id          VARCHAR(32) NOT NULL,
  order_id    BIGINT      NOT NULL,
  provider    VARCHAR(32) NOT NULL,
  amount      BIGINT      NOT NULL COMMENT 'minor units, the voucher pay_value',
  create_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY idx_payment_order (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
--bun:split
CREATE TABLE IF NOT EXISTS tb_payment_txn (
  provider      VARCHAR(32) NOT NULL,
  txn_id        VARCHAR(64) NOT NULL,
  payment_id    VARCHAR(32) NOT NULL,
  order_id      BIGINT      NOT NULL,
  amount        BIGINT      NOT NULL,
  succeeded     TINYINT     NOT NULL,
  result        VARCHAR(16) NOT NULL COMMENT 'paid, failed, refunded',
  refunded_time DATETIME(3) NULL,
  create_time   DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (provider, txn_id),
  KEY idx_txn_order (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
