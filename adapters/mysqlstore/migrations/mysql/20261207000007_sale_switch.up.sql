-- The kill switch (core/steer): one row, on while every voucher's sale is
-- paused by it; a voucher created while it is on starts paused (2).
CREATE TABLE IF NOT EXISTS tb_sale_switch (
  id          TINYINT     NOT NULL,
  paused      TINYINT     NOT NULL DEFAULT 0,
  update_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
