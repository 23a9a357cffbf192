-- A room's public beacon (core.RoomBeacon), named at creation: its round is
-- read at the begin and mixed into the seed, so that the draw depends on a
-- value nobody knew when the seed was chosen. beacon_value is what the
-- draw was keyed with, written once with the kept draw: the round's
-- randomness (hex), or 'missed' (not read within core.BeaconWait: the seed
-- alone). NULL url: the room names no beacon.
ALTER TABLE tb_voucher_room
  ADD COLUMN beacon_url   VARCHAR(512)    NULL COMMENT 'a drand chain''s base URL',
  ADD COLUMN beacon_round BIGINT UNSIGNED NULL,
  ADD COLUMN beacon_value VARCHAR(128)    NULL COMMENT 'the randomness the draw was keyed with, or missed';
