-- Steering a live sale (issue 61). paused: the operator paused the
-- voucher's sale (1), or the kill switch did (2); the reservation refuses
-- while it is not 0, and a rebuild of the live state keeps it.
-- tb_operator_action records every action an operator takes on a running
-- sale: who (the free-text X-Seckill-Operator and the admin token's
-- fingerprint), what, the state before and after, the note. An action is
-- written pending with the database's half of its change, in one
-- transaction, and done once the live store has the other half: a pending
-- action older than a few seconds (its instance died between the halves)
-- is finished by any instance.
ALTER TABLE tb_seckill_voucher
  ADD COLUMN paused TINYINT NOT NULL DEFAULT 0 COMMENT '0 on sale, 1 paused by an operator, 2 by the kill switch';
--bun:split
CREATE TABLE IF NOT EXISTS tb_operator_action (
  id                BIGINT       NOT NULL AUTO_INCREMENT,
  at                DATETIME(3)  NOT NULL,
  operator          VARCHAR(128) NOT NULL DEFAULT '',
  token_fingerprint CHAR(16)     NOT NULL DEFAULT '',
  action            VARCHAR(32)  NOT NULL,
  voucher_id        BIGINT       NULL,
  before_state      VARCHAR(512) NOT NULL DEFAULT '',
  after_state       VARCHAR(512) NOT NULL DEFAULT '',
  note              VARCHAR(512) NOT NULL DEFAULT '',
  state             VARCHAR(16)  NOT NULL COMMENT 'pending, done, failed',
  PRIMARY KEY (id),
  KEY idx_action_voucher (voucher_id, id),
  KEY idx_action_pending (state, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
