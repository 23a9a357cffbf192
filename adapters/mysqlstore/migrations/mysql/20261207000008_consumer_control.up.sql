-- The operator's hold on the consumers (core/consumergate): one row,
-- paused (1: no consumer takes an order from the queue) and per_second
-- (the orders persisted a second in all, 0: no cap). version counts the
-- changes: the live store's copy, which every instance reads, is written
-- from it, and a copy restored after Redis lost it never undoes a later one.
CREATE TABLE IF NOT EXISTS tb_consumer_control (
  id          TINYINT     NOT NULL,
  paused      TINYINT     NOT NULL DEFAULT 0,
  per_second  INT         NOT NULL DEFAULT 0,
  version     BIGINT      NOT NULL DEFAULT 0,
  update_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
