CREATE TABLE IF NOT EXISTS tb_user (
  id          BIGINT      NOT NULL AUTO_INCREMENT,
  phone       VARCHAR(20) NOT NULL,
  nick_name   VARCHAR(64) NOT NULL DEFAULT '',
  create_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  update_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uk_user_phone (phone)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
--bun:split
CREATE TABLE IF NOT EXISTS tb_voucher (
  id           BIGINT       NOT NULL AUTO_INCREMENT,
  title        VARCHAR(255) NOT NULL,
  pay_value    BIGINT       NOT NULL,
  actual_value BIGINT       NOT NULL,
  type         TINYINT      NOT NULL DEFAULT 1 COMMENT '1: seckill voucher',
  status       TINYINT      NOT NULL DEFAULT 1 COMMENT '1: on sale',
  create_time  DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  update_time  DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
--bun:split
CREATE TABLE IF NOT EXISTS tb_seckill_voucher (
  voucher_id  BIGINT      NOT NULL,
  stock       INT         NOT NULL,
  begin_time  DATETIME(3) NOT NULL,
  end_time    DATETIME(3) NOT NULL,
  create_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  update_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (voucher_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
--bun:split
CREATE TABLE IF NOT EXISTS tb_voucher_order (
  id          BIGINT      NOT NULL COMMENT 'from the Redis ID worker',
  user_id     BIGINT      NOT NULL,
  voucher_id  BIGINT      NOT NULL,
  status      TINYINT     NOT NULL DEFAULT 1 COMMENT '1: created (unpaid)',
  create_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  update_time DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uk_order_user_voucher (user_id, voucher_id),
  KEY idx_order_voucher (voucher_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
