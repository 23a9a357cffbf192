-- What the shop's recorded transactions of each payment took (issue 62):
-- a second transaction on a payment is money taken twice, and the
-- provider's word on what the payment took is at least their sum (a
-- refund of the second must not read as the whole payment given back).
-- Kept by each new transaction's record, not summed under it: a sum
-- read in the notice's transaction locked the transactions' index and
-- deadlocked concurrent notices.
ALTER TABLE tb_payment
  ADD COLUMN txn_taken BIGINT NOT NULL DEFAULT 0 COMMENT 'minor units its recorded succeeded transactions took';
--bun:split
UPDATE tb_payment AS p SET txn_taken = (SELECT COALESCE(SUM(t.amount), 0) FROM tb_payment_txn AS t WHERE t.payment_id = p.id AND t.succeeded = 1);
