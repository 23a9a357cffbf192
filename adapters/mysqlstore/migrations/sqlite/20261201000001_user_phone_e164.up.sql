-- See the MySQL migration of the same name.
ALTER TABLE tb_user ADD COLUMN phone_e164 TEXT NULL;
--bun:split
CREATE INDEX IF NOT EXISTS idx_user_phone_e164 ON tb_user (phone_e164);
