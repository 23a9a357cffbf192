-- See the MySQL migration of the same name.
ALTER TABLE tb_voucher_room ADD COLUMN salt_key BLOB NULL;
