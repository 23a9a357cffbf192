// Package core is the flash sale, free of Redis, SQL and HTTP.
//
// A shopper's Seckill.Buy takes an order id (IDGenerator) and asks a
// Reserver to check the sale window, the stock and one order per user and
// to reserve, atomically. How the order then reaches its Queue is the
// queue's own: a Queue declares what it is as data (Capabilities). One fed
// inside the reservation step declares its Handoff — the command the
// reservation script runs with the order — and one fed from Go its
// Publisher, the reservation released if it refuses. The sync baseline's Reserver is the database
// transaction itself. The answer goes back before anything is persisted.
//
// A Pipeline then moves orders from the Queue to the OrderStore: fetch a
// batch, decode it, persist it in one idempotent transaction, ack it;
// retry while the store fails; dead-letter what cannot be processed, as a
// DeadLetter record every backend writes alike. A queue's background work
// (heartbeats, reapers, claimers, trimmers) is its list of Duties, which
// the pipeline runs from start to stop.
//
// Each Queue declares its Guarantees; package queuetest holds the suite
// that proves them, and package reservationtest the rule book every
// Reserver keeps. Errors carry a Code, the contract's error code.
package core
