// Package lua holds the Redis scripts. Each starts with a comment block that
// lists its KEYS, ARGV and every return value.
package lua

import _ "embed"

// Seckill is the atomic reservation shared by every Redis-backed queue.
//
//go:embed seckill.lua
var Seckill string

// SeckillBatch is seckill.lua's reservation for several shoppers in one
// call: the same rules in the same order and the same answers, with each
// voucher's state read once per call and the members' writes made once
// per voucher (its header says how).
//
//go:embed seckill_batch.lua
var SeckillBatch string

// Naive is the classic design's first reservation script, the benchmarks'
// reference.
//
//go:embed naive.lua
var Naive string

// FetchListOOM is a reliable list consumer's fetch while Redis is out of
// memory: heartbeat, registration and the moves, allowed out of memory.
//
//go:embed fetch_list_oom.lua
var FetchListOOM string

// Release undoes one reservation idempotently.
//
//go:embed release.lua
var Release string

// ReturnUnit gives a cancelled order's unit back to the sale, once.
//
//go:embed return_unit.lua
var ReturnUnit string

// ClaimDeadlines hands out the reservations due for payment, each once.
//
//go:embed claim_deadlines.lua
var ClaimDeadlines string

// PruneConsumers removes a group's consumers that hold nothing and have
// been idle past the claim time.
//
//go:embed prune_consumers.lua
var PruneConsumers string

// NextID takes a block of the ID worker's per-day counter.
//
//go:embed nextid.lua
var NextID string

// ReclaimList returns a dead consumer's processing list to the queue.
//
//go:embed reclaim_list.lua
var ReclaimList string

// MoveVoucher moves one voucher's keys to the current key layout.
//
//go:embed move_voucher.lua
var MoveVoucher string

// SteerWindow writes an operator's change of a voucher's window and pause.
//
//go:embed steer_window.lua
var SteerWindow string

// SteerStock changes a voucher's live stock by an operator's delta, once.
//
//go:embed steer_stock.lua
var SteerStock string

// RestoreVoucher replaces a voucher's live state with a rebuild's.
//
//go:embed restore_voucher.lua
var RestoreVoucher string

// Unfence lifts a failed rebuild's fence.
//
//go:embed unfence.lua
var Unfence string

// FenceVoucher takes a rebuild's fence on a voucher.
//
//go:embed fence_voucher.lua
var FenceVoucher string

// RepairOrder tells Redis of an order committed across a Redis loss.
//
//go:embed repair_order.lua
var RepairOrder string

// Admit is the shopper's seckill limit alone (seckill.lua's GCRA, same key).
//
//go:embed admit.lua
var Admit string

// IssueCode issues a login code under its own challenge, within the
// phone's budget of codes.
//
//go:embed issue_code.lua
var IssueCode string

// CheckCode judges one guess at one challenge's login code (compare, count,
// burn).
//
//go:embed check_code.lua
var CheckCode string

// WithdrawCode takes back a login code that could not be delivered.
//
//go:embed withdraw_code.lua
var WithdrawCode string

// RestoreBuyers stages one chunk of a rebuild's buyers under its fence.
//
//go:embed restore_buyers.lua
var RestoreBuyers string

// BucketPend records a transfer between two buckets of a voucher as
// pending at the borrower.
//
//go:embed bucket_pend.lua
var BucketPend string

// BucketTake takes a transfer's units from the lending bucket, once.
//
//go:embed bucket_take.lua
var BucketTake string

// BucketGive adds a transfer's units to the borrowing bucket, once.
//
//go:embed bucket_give.lua
var BucketGive string

// ShardIdentity reads a shard's master's run_id and the shard's
// forgetting mark in one step, for a repair that cannot read the whole
// incarnation.
//
//go:embed shard_identity.lua
var ShardIdentity string

// ReverifyVoucher carries a voucher's (or a bucket's) live state over to a
// new incarnation when its own master did not change.
//
//go:embed reverify_voucher.lua
var ReverifyVoucher string

// MarkNode records which server wrote a voucher's live state.
//
//go:embed mark_node.lua
var MarkNode string

// FreezeBucket holds an intact bucket's transfers still while a rebuild
// restores the voucher's lost buckets.
//
//go:embed freeze_bucket.lua
var FreezeBucket string

// ThawBucket lifts a freeze after the lost buckets were restored, voiding
// the transfers pending from them.
//
//go:embed thaw_bucket.lua
var ThawBucket string

// VerifyBucket tells whether one bucket of a voucher is intact, for its
// shoppers to buy while the others are rebuilt.
//
//go:embed verify_bucket.lua
var VerifyBucket string

// ReadBucket reads one bucket of a voucher in buckets at one moment: its
// stock, buyers and the counts a stock read over several masters needs.
//
//go:embed read_bucket.lua
var ReadBucket string

// ConsumerBeat is a process's heartbeat on a stream (streamgroup).
//
//go:embed consumer_beat.lua
var ConsumerBeat string

// DeadConsumers names the consumers holding entries whose process stopped
// beating (streamgroup).
//
//go:embed dead_consumers.lua
var DeadConsumers string

// RoomJoin gives a shopper a place in a voucher's waiting room, or keeps
// theirs.
//
//go:embed room_join.lua
var RoomJoin string

// RoomSeat reads a shopper's place in a waiting room, in bounded reads.
//
//go:embed room_seat.lua
var RoomSeat string

// RoomAdmit is one admission pass over a waiting room.
//
//go:embed room_admit.lua
var RoomAdmit string

// RoomClose ends a room's early set once the sale has begun and lists its
// joiners in arrival order (the server orders them by their keys).
//
//go:embed room_close.lua
var RoomClose string

// RoomPlace writes a draw's positions (made, or kept and put back after
// Redis lost the room).
//
//go:embed room_place.lua
var RoomPlace string

// TakeBack makes a dead-lettered order's unit its own before a re-drive
// persists it: held already, or taken back where one is left.
//
//go:embed take_back.lua
var TakeBack string

// ConsumerSet writes the operator's setting of the consumers unless a later
// version is there.
//
//go:embed consumer_set.lua
var ConsumerSet string

// ConsumerAck records the version an instance's consumers run, on Redis's
// clock.
//
//go:embed consumer_ack.lua
var ConsumerAck string

// ConsumerAcks lists the instances heard from lately and their versions.
//
//go:embed consumer_acks.lua
var ConsumerAcks string
