// Package redisreserve is the Redis side of a sale: the atomic reservation
// script, its release, the live stock and window of each voucher, and the
// ID worker. Every key of one voucher carries the voucher id as its hash tag,
// so the script touches one cluster slot for the voucher's own state.
package redisreserve

import (
	"strconv"
	"time"
)

// DefaultPrefix starts every key, so deployments (and tests) can share a
// Redis without sharing keys.
const DefaultPrefix = "seckill:"

// Keys builds the key names; the script receives them all in KEYS.
type Keys struct{ Prefix string }

func (k Keys) tag(kind string, voucherID int64) string {
	return k.Prefix + kind + ":{" + strconv.FormatInt(voucherID, 10) + "}"
}

// Stock is the remaining stock of a voucher.
func (k Keys) Stock(voucherID int64) string { return k.tag("stock", voucherID) }

// Window is the hash holding the sale window (begin, end in unix ms).
func (k Keys) Window(voucherID int64) string { return k.tag("window", voucherID) }

// Orders is the hash user id -> order id of a voucher.
func (k Keys) Orders(voucherID int64) string { return k.tag("order", voucherID) }

// IDCounter is the ID worker's counter for the UTC day of t.
func (k Keys) IDCounter(t time.Time) string { return k.Prefix + "id:" + t.UTC().Format("20060102") }
