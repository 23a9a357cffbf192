-- See the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS tb_consumer_control (
  id          INTEGER PRIMARY KEY,
  paused      INTEGER NOT NULL DEFAULT 0,
  per_second  INTEGER NOT NULL DEFAULT 0,
  version     INTEGER NOT NULL DEFAULT 0,
  update_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
