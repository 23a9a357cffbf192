-- The phone in E.164, filled in by the server at start (Store.NormalizePhones:
-- reading a number takes libphonenumber, which SQL does not have). Not
-- unique: numbers stored before normalisation may collide once normalised;
-- such a phone logs in as the oldest user and the admin is told.
ALTER TABLE tb_user ADD COLUMN phone_e164 VARCHAR(20) NULL AFTER phone, ADD KEY idx_user_phone_e164 (phone_e164);
