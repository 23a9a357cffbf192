-- See the MySQL migration of the same name.
ALTER TABLE tb_voucher_order ADD COLUMN traceparent VARCHAR(55) NULL;
