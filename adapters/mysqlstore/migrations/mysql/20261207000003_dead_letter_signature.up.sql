-- The signature a dead letter's body was delivered with (an outside broker's
-- order carries the deployment's): a re-drive persists only a body whose
-- signature verifies. '' where the backend signs nothing (Redis, memory).
ALTER TABLE tb_dead_letter ADD COLUMN signature VARCHAR(128) NOT NULL DEFAULT '' COMMENT 'the body''s signature as delivered';
