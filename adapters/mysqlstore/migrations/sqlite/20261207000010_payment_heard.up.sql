-- See the MySQL migration of the same name.
ALTER TABLE tb_payment ADD COLUMN word TEXT NOT NULL DEFAULT '';
--bun:split
ALTER TABLE tb_payment ADD COLUMN word_taken INTEGER NOT NULL DEFAULT 0;
--bun:split
ALTER TABLE tb_payment ADD COLUMN word_refunded INTEGER NOT NULL DEFAULT 0;
--bun:split
UPDATE tb_payment SET word = state, word_taken = amount WHERE state = 'succeeded';
