-- See the MySQL migration of the same name.
ALTER TABLE tb_voucher_room ADD COLUMN beacon_url TEXT NULL;
ALTER TABLE tb_voucher_room ADD COLUMN beacon_round INTEGER NULL;
ALTER TABLE tb_voucher_room ADD COLUMN beacon_value TEXT NULL;
