// Package redisreserve is the Redis side of a sale: the atomic reservation
// script, its release, the live stock and window of each voucher, the ID
// worker, and the key layout. Every key of one voucher carries its shard's
// hash tag (core.Shards), as does the shard's queue key, so one reservation
// touches one cluster slot.
package redisreserve

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sigurn/crc16"

	"github.com/seckill-lab/seckill/core"
)

// DefaultPrefix starts every key, so deployments (and tests) can share a
// Redis without sharing keys.
const DefaultPrefix = "seckill:"

// Keys builds the key names; the script receives them all in KEYS.
type Keys struct {
	Prefix string
	// Shards gives each voucher its hash tag. The zero value is
	// SpreadShards(1): one shard.
	Shards core.Shards
}

func (k Keys) shards() core.Shards {
	if k.Shards.Count() == 0 {
		return oneShard
	}
	return k.Shards
}

func (k Keys) voucherKey(kind string, voucherID int64) string {
	return k.Prefix + kind + ":{" + k.shards().TagOf(voucherID) + "}:" + strconv.FormatInt(voucherID, 10)
}

// Stock is the remaining stock of a voucher.
func (k Keys) Stock(voucherID int64) string { return k.voucherKey("stock", voucherID) }

// Window is the hash holding the sale window (begin, end in unix ms).
func (k Keys) Window(voucherID int64) string { return k.voucherKey("window", voucherID) }

// Orders is the hash user id -> order id of a voucher.
func (k Keys) Orders(voucherID int64) string { return k.voucherKey("order", voucherID) }

// Limit is a shopper's rate-limit state for a voucher (seckill.lua's
// KEYS[5]): under the voucher's tag, so the limit is per shopper and
// voucher.
func (k Keys) Limit(voucherID, userID int64) string {
	return k.voucherKey("limit", voucherID) + ":" + strconv.FormatInt(userID, 10)
}

// BucketKeys name one bucket's keys (core.Voucher.Buckets): its stock,
// window and buyers as a whole voucher has them, and the transfers
// between it and the voucher's other buckets, all under the tag of the
// bucket's shard. Bucket 0 is the voucher's own keys, so a voucher of one
// bucket is laid out as before buckets; bucket b > 0 of voucher v is named
// v/b. The reservation builds one per request: the names it does not send
// are built only when asked for.
type BucketKeys struct {
	Bucket, Shard         int
	Stock, Window, Orders string
	prefix, tag, name     string
}

// Transfers is the hash of the bucket's transfers (bucket_pend.lua).
func (b BucketKeys) Transfers() string { return b.prefix + "transfers:{" + b.tag + "}:" + b.name }

// Forgets is the mark of the last forgetting kept on the bucket's shard
// (Keys.ShardForgets): the scripts that carry a bucket's state over to a
// new incarnation compare it with the mark the state was written under.
func (b BucketKeys) Forgets() string { return b.prefix + "forgets:{" + b.tag + "}" }

// Limit is a shopper's rate-limit state in this bucket (the shopper's
// bucket: core.BucketOf).
func (b BucketKeys) Limit(userID int64) string {
	// On a buffer of its own: one allocation per reservation, not two.
	var buf [128]byte
	k := append(buf[:0], b.prefix...)
	k = append(k, "limit:{"...)
	k = append(k, b.tag...)
	k = append(k, "}:"...)
	k = append(k, b.name...)
	k = append(k, ':')
	return string(strconv.AppendInt(k, userID, 10))
}

// Bucket names the keys of bucket b of a voucher split into buckets.
func (k Keys) Bucket(voucherID int64, b, buckets int) BucketKeys {
	shards := k.shards()
	shard := shards.OfBucket(voucherID, b, buckets)
	name := strconv.FormatInt(voucherID, 10)
	if b > 0 {
		name += "/" + strconv.Itoa(b)
	}
	bk := k.bucketAt(shards.Tag(shard), name, b)
	bk.Shard = shard
	return bk
}

// bucketAt names the keys of a bucket whose tag and name (v, or v/b) are
// known: Bucket's, or a layout's that ParseStockKey read.
func (k Keys) bucketAt(tag, name string, b int) BucketKeys {
	at := func(kind string) string { return k.Prefix + kind + ":{" + tag + "}:" + name }
	return BucketKeys{Bucket: b, Stock: at("stock"), Window: at("window"), Orders: at("order"), prefix: k.Prefix, tag: tag, name: name}
}

// ShardKey is a queue's key for one shard: name, then the shard's tag.
// A queue fed by the reservation uses it so that its key shares the slot
// of the vouchers of its shard.
func (k Keys) ShardKey(name string, shard int) string {
	return k.Prefix + name + ":{" + k.shards().Tag(shard) + "}"
}

// PayBy is the list of a shard's reservations, in the order they were
// made, each with the time it is due for payment.
func (k Keys) PayBy(shard int) string { return k.ShardKey("payby", shard) }

// PayByOf is the PayBy key of a voucher's shard.
func (k Keys) PayByOf(voucherID int64) string { return k.PayBy(k.shards().Of(voucherID)) }

// Deadlines is the sorted set of a shard's reservations by the time they
// are due for payment, as versions before PayBy recorded them: the expiry
// still drains it.
func (k Keys) Deadlines(shard int) string { return k.ShardKey("deadlines", shard) }

// IDCounter is the ID worker's counter for the UTC day of t: its lane 0,
// the one counter of versions before lanes.
func (k Keys) IDCounter(t time.Time) string { return k.IDLane(t, 0) }

// IDLane is the counter of one of the ID worker's lanes (IDWorker) for the
// UTC day of t. Lane 0 is the key the worker always had; lane n > 0 carries
// the n-th of idLanes hash tags spread over the slots, so that on a cluster
// the lanes live on every master.
func (k Keys) IDLane(t time.Time, lane int) string {
	day := t.UTC().Format("20060102")
	if lane == 0 {
		return k.Prefix + "id:" + day
	}
	return k.Prefix + "id:{" + idLaneTags.Tag(lane) + "}:" + day
}

// Layout is the key recording the layout of the sale's keys (the shards).
func (k Keys) Layout() string { return k.Prefix + "layout" }

// Forgets is the mark of the last time part of the sale's state vanished
// under an unchanged Redis (Identity.Forget): a part of the incarnation.
func (k Keys) Forgets() string { return k.Prefix + "forgets" }

// ShardForgets is the same mark kept on each shard (so on every master
// that holds vouchers), where a script carrying a voucher's state over to
// a new incarnation reads it in the same atomic step: a mark on another
// master could be lost, or brought back from an older snapshot, by that
// master's own restart.
func (k Keys) ShardForgets(shard int) string { return k.ShardKey("forgets", shard) }

// Drained records the incarnation in which a queue that cannot list its
// orders was last found holding none (recovery.LiveSale.MarkDrained).
func (k Keys) Drained() string { return k.Prefix + "drained" }

// StockPattern matches the stock key of every voucher, in any layout this
// package has used (for SCAN).
func (k Keys) StockPattern() string { return k.Prefix + "stock:{*" }

// VoucherKeys are the names one voucher's keys have in some layout: of a
// voucher in buckets, one bucket's.
type VoucherKeys struct {
	VoucherID int64
	// Bucket is the bucket these keys are of (0: the voucher's own keys,
	// which are bucket 0 of a voucher in buckets).
	Bucket                          int
	Stock, Window, Order, Transfers string
	// Legacy: the layout before shards, the voucher id as the hash tag.
	Legacy bool
}

// keysOf is the names bk gives a voucher's or a bucket's keys.
func keysOf(voucherID int64, bk BucketKeys) VoucherKeys {
	return VoucherKeys{VoucherID: voucherID, Bucket: bk.Bucket, Stock: bk.Stock, Window: bk.Window, Order: bk.Orders, Transfers: bk.Transfers()}
}

// ParseStockKey reads a stock key of any layout: the current one
// (prefix + "stock:{tag}:id", or "…:id/b" for bucket b > 0 of a voucher in
// buckets) or the one before shards, where the voucher id itself was the
// tag (prefix + "stock:{id}"). It returns the names of that voucher's (or
// bucket's) keys in the same layout.
func (k Keys) ParseStockKey(name string) (VoucherKeys, bool) {
	rest, ok := strings.CutPrefix(name, k.Prefix+"stock:{")
	if !ok {
		return VoucherKeys{}, false
	}
	tag, id, ok := strings.Cut(rest, "}")
	if !ok {
		return VoucherKeys{}, false
	}
	if id == "" { // before shards: stock:{id}
		v, err := strconv.ParseInt(tag, 10, 64)
		if err != nil {
			return VoucherKeys{}, false
		}
		name := func(kind string) string { return k.Prefix + kind + ":{" + tag + "}" }
		return VoucherKeys{VoucherID: v, Stock: name("stock"), Window: name("window"), Order: name("order"),
			Transfers: name("transfers"), Legacy: true}, true
	}
	idText, ok := strings.CutPrefix(id, ":")
	if !ok {
		return VoucherKeys{}, false
	}
	voucherText, bucketText, inBucket := strings.Cut(idText, "/")
	v, err := strconv.ParseInt(voucherText, 10, 64)
	if err != nil || strconv.FormatInt(v, 10) != voucherText {
		return VoucherKeys{}, false
	}
	b := 0
	if inBucket {
		// Bucket b > 0 is named v/b (Keys.Bucket); v/0 is never written.
		if b, err = strconv.Atoi(bucketText); err != nil || b < 1 || strconv.Itoa(b) != bucketText {
			return VoucherKeys{}, false
		}
	}
	return keysOf(v, k.bucketAt(tag, idText, b)), true
}

var oneShard = SpreadShards(1)

// SlotCount is the number of hash slots of a Redis Cluster.
const SlotCount = 16384

var crcTable = crc16.MakeTable(crc16.CRC16_XMODEM)

// Slot is the cluster hash slot of a key, as Redis computes it: CRC16 of
// the hash tag (the text between the first '{' and the next '}', when not
// empty), else of the whole key, modulo 16384.
func Slot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	return int(crc16.Checksum([]byte(key), crcTable)) % SlotCount
}

// SpreadShards returns n shards whose tags hash to slots spread evenly over
// the cluster's slot range: shard i's tag lands in the middle half of the
// i-th of n equal ranges. A cluster whose masters own equal ranges (what
// `redis-cli --cluster create` makes) then runs n/masters shards on each
// master when n is a multiple of the masters. The tags are "s<i>", with a
// suffix where that is needed to reach the range.
func SpreadShards(n int) core.Shards {
	tags := make([]string, n)
	for i := range n {
		lo, hi := i*SlotCount/n, (i+1)*SlotCount/n
		quarter := (hi - lo) / 4
		in := func(tag string) bool { s := Slot(tag); return s >= lo+quarter && s < hi-quarter }
		tags[i] = fmt.Sprintf("s%d", i)
		for salt := 0; !in(tags[i]); salt++ {
			tags[i] = fmt.Sprintf("s%d.%d", i, salt)
		}
	}
	shards, err := core.NewShards(tags...)
	if err != nil {
		panic(err) // distinct by construction
	}
	return shards
}
