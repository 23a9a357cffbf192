-- The operator's register of dead letters (tb_dead_letter): every record a
-- queue's dead-letter sources hold, collected once each (by its source and
-- its position there), with the order it carries, and how and when it was
-- resolved (redriven: persisted by a re-drive; persisted: the order was in
-- the table already; discarded: its unit went back on sale). Open ones have
-- no resolved_time. tb_dead_letter_source is how far each source was read.
CREATE TABLE IF NOT EXISTS tb_dead_letter (
  id              BIGINT       NOT NULL AUTO_INCREMENT,
  source          VARCHAR(191) NOT NULL,
  position        VARCHAR(191) NOT NULL,
  backend         VARCHAR(32)  NOT NULL,
  reason          VARCHAR(32)  NOT NULL COMMENT 'the kind: poison, max_deliveries, stock_anomaly, ...',
  error           TEXT         NOT NULL,
  order_id        BIGINT       NULL,
  user_id         BIGINT       NULL,
  voucher_id      BIGINT       NULL,
  body            MEDIUMBLOB   NOT NULL,
  deliveries      INT          NOT NULL DEFAULT 0,
  consumer        VARCHAR(191) NOT NULL DEFAULT '',
  first_failed    DATETIME(3)  NOT NULL,
  last_failed     DATETIME(3)  NOT NULL,
  redriven        INT          NOT NULL DEFAULT 0,
  resolved        VARCHAR(16)  NULL COMMENT 'redriven, persisted, discarded',
  resolved_time   DATETIME(3)  NULL,
  note            TEXT         NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_dead_letter_place (source, position),
  KEY idx_dead_letter_open (resolved_time, id),
  KEY idx_dead_letter_reason (reason, id),
  KEY idx_dead_letter_voucher (voucher_id, id),
  KEY idx_dead_letter_order (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
--bun:split
CREATE TABLE IF NOT EXISTS tb_dead_letter_source (
  source      VARCHAR(191) NOT NULL,
  position    VARCHAR(1024) NOT NULL,
  read_time   DATETIME(3)  NOT NULL,
  PRIMARY KEY (source)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
