-- What the provider last said of each payment, by its notice or its
-- answer to a status query (issue 62): its state, what it had taken and
-- given back. The reconciliation report compares it with the shop's
-- record: money taken on a payment that neither paid its order nor went
-- back, or an order paid by a payment the provider says took nothing, is a
-- mismatch. '' : never heard.
ALTER TABLE tb_payment
  ADD COLUMN word VARCHAR(16) NOT NULL DEFAULT '' COMMENT 'the provider''s last word: pending, succeeded, failed, refunded',
  ADD COLUMN word_taken BIGINT NOT NULL DEFAULT 0 COMMENT 'minor units it said it took',
  ADD COLUMN word_refunded BIGINT NOT NULL DEFAULT 0 COMMENT 'minor units it said it gave back';
--bun:split
UPDATE tb_payment SET word = state, word_taken = amount WHERE state = 'succeeded';
