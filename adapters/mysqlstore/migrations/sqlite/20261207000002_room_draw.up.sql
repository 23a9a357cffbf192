-- See the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS tb_room_draw (
  voucher_id INTEGER NOT NULL,
  draw_rank  INTEGER NOT NULL,
  draw_key   TEXT NOT NULL,
  user_id    INTEGER NOT NULL,
  PRIMARY KEY (voucher_id, draw_rank)
);
