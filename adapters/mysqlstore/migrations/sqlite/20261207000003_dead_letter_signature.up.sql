-- See the MySQL migration of the same name.
ALTER TABLE tb_dead_letter ADD COLUMN signature TEXT NOT NULL DEFAULT '';
