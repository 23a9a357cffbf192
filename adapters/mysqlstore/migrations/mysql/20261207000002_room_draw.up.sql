-- A waiting room's draw, written once when it is first made (just after
-- the opening): the early joiners by rank, with their keys. The keys are
-- what GET /api/vouchers/{id}/room/draw publishes, so the published draw
-- never changes, even after Redis loses the room; the user ids let the
-- room's places be restored (they are never published).
CREATE TABLE IF NOT EXISTS tb_room_draw (
  voucher_id BIGINT   NOT NULL,
  draw_rank  INT      NOT NULL COMMENT 'position, from 1',
  draw_key   CHAR(64) NOT NULL COMMENT 'hex HMAC-SHA256 of the seed over the user id',
  user_id    BIGINT   NOT NULL,
  PRIMARY KEY (voucher_id, draw_rank)
) ENGINE=InnoDB DEFAULT CHARSET=ascii;
