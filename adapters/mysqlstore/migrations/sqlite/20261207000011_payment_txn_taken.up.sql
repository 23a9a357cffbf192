-- See the MySQL migration of the same name.
ALTER TABLE tb_payment ADD COLUMN txn_taken INTEGER NOT NULL DEFAULT 0;
--bun:split
UPDATE tb_payment SET txn_taken = (SELECT COALESCE(SUM(t.amount), 0) FROM tb_payment_txn AS t WHERE t.payment_id = tb_payment.id AND t.succeeded = 1);
