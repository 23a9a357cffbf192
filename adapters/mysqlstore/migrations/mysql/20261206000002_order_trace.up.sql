-- The W3C traceparent of the request that reserved the order (core.Order.Trace),
-- so that its payment, notice and cancellation join that trace; NULL without tracing.
ALTER TABLE tb_voucher_order ADD COLUMN traceparent VARCHAR(55) NULL COMMENT 'W3C traceparent of the reserving request';
