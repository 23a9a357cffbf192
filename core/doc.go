// Package core is the flash sale, free of Redis, SQL and HTTP.
//
// A shopper's Seckill.Buy takes an order id (IDGenerator) and asks a
// Reserver to check the sale window, the stock and one order per user and
// to reserve, atomically; for the Redis backends the same step hands the
// order to the Queue, for the in-process one a Publisher does, and the sync
// baseline's Reserver is the database transaction itself. The answer goes
// back before anything is persisted.
//
// A Pipeline then moves orders from the Queue to the OrderStore: fetch a
// batch, decode it, persist it in one idempotent transaction, ack it;
// retry while the store fails; dead-letter what cannot be processed.
//
// Each Queue declares its Guarantees; package queuetest holds the suite
// that proves them. Errors carry a Code, the contract's error code.
package core
