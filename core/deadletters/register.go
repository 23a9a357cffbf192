// Package deadletters is the operator's side of dead letters: a register
// of every record a queue's dead-letter sources hold (core.DeadLetterSource),
// collected from each into one place whatever the backend, and listed there
// with filters and cursor paging, without a cap.
//
// The sources stay what they are (a Redis stream, a broker's stream, topic
// or queue): the register reads them from where it last stopped, so a dead
// letter written while the database was away is registered once it is back.
package deadletters

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seckill-lab/seckill/core"
)

// Letter is one dead letter as the register keeps it.
type Letter struct {
	// ID is the register's own, increasing in the order letters were
	// collected.
	ID int64
	// Source and Position say where the record is (its source's name and
	// its place there); Backend is the queue's name.
	Source, Position, Backend string
	// Reason is the kind; Error the detail the consumer gave.
	Reason core.DeadLetterReason
	Error  string
	// Order is what the body carries, when it decodes (its ID, UserID and
	// VoucherID; zero otherwise).
	Order core.Order
	// Body is the message as delivered (at most core.MaxDeadLetterBody
	// bytes), and Signature the signature it was delivered with (an
	// outside broker's order: a re-drive persists only a body it verifies).
	Body      []byte
	Signature string
	// Deliveries counts the deliveries before it was given up; Consumer
	// is the consumer that gave up.
	Deliveries int
	Consumer   string
	// FirstFailed is when it was dead-lettered; LastFailed when it last
	// failed (a failed re-drive moves it).
	FirstFailed, LastFailed time.Time
	// Redriven counts the re-drives tried.
	Redriven int
	// Resolved says how it left the open list ("" while open), at
	// ResolvedAt, with the operator's Note.
	Resolved   Resolution
	ResolvedAt time.Time
	Note       string
}

// Resolution is how a dead letter was resolved.
type Resolution string

const (
	// Redriven: a re-drive persisted its order.
	Redriven Resolution = "redriven"
	// Persisted: its order was in the database already (a duplicate).
	Persisted Resolution = "persisted"
	// Discarded: resolved without persisting; its unit went back on sale.
	Discarded Resolution = "discarded"
)

// Reasons are the kinds a dead letter can have, as the API names them.
var Reasons = []core.DeadLetterReason{core.DeadLetterPoison, core.DeadLetterTooManyTries, core.DeadLetterStockAnomaly,
	core.DeadLetterIDCollision, core.DeadLetterBuyerHoldsAnother, core.DeadLetterUnauthenticated}

// Filter selects dead letters; each field set narrows the selection.
type Filter struct {
	Reason    core.DeadLetterReason
	VoucherID int64
	// Since and Until bound when they were dead-lettered: [Since, Until).
	Since, Until time.Time
	// IDs, if any, are the only letters considered.
	IDs []int64
	// Resolved selects the resolved letters instead of the open ones.
	Resolved bool
}

// Page is one page of a list: its letters, the cursor of the next page (0
// at the end), and how many open letters match the filter.
type Page struct {
	Letters []Letter
	Next    int64
	Open    int64
}

// ErrNotFound: no dead letter has that id.
var ErrNotFound = errors.New("no such dead letter")

// Register keeps the letters (the database).
type Register interface {
	// Cursor is the position source was read up to ("" for none).
	Cursor(ctx context.Context, source string) (string, error)
	// Collect keeps letters, read from source after position from, and
	// moves the source's cursor to to, in one step. A letter kept already
	// (its source and position) is kept once; if another process moved
	// the cursor from from meanwhile, nothing changes (it kept them).
	Collect(ctx context.Context, source, from, to string, letters []Letter) error
	// List returns up to limit letters matching f with ids above after,
	// in id order.
	List(ctx context.Context, f Filter, after int64, limit int) (Page, error)
	// Letter returns one letter, or ErrNotFound.
	Letter(ctx context.Context, id int64) (Letter, error)
	// Open counts the letters not resolved.
	Open(ctx context.Context) (int64, error)
	// Resolve resolves the open letters among ids as how, at, with note
	// (a re-drive that persisted counts as one more re-drive); it returns
	// how many it resolved (one resolved meanwhile is not counted).
	Resolve(ctx context.Context, ids []int64, how Resolution, note string, at time.Time) (int64, error)
	// Failed records a re-drive of letter id that failed for detail, at.
	Failed(ctx context.Context, id int64, detail string, at time.Time) error
	// PersistedOrders says which of the orders have a row in the database.
	PersistedOrders(ctx context.Context, orderIDs []int64) (map[int64]bool, error)
}

// LetterOf is the record d of source as the register keeps it: its kind
// and detail apart, and the order its body carries when it decodes. A kind
// the register does not know is poison, naming what it said.
func LetterOf(source string, d core.DeadLetter) Letter {
	kind, detail, _ := strings.Cut(d.Reason, ": ")
	if !slices.Contains(Reasons, core.DeadLetterReason(kind)) {
		kind, detail = string(core.DeadLetterPoison), "a dead letter of an unknown kind: "+strconv.Quote(d.Reason)
	}
	l := Letter{Source: source, Position: d.Position, Backend: text(d.Queue, 32), Reason: core.DeadLetterReason(kind),
		Error: text(detail, 4<<10), Body: d.Body, Signature: text(d.Signature, 128), Deliveries: d.Attempt,
		Consumer: text(d.Consumer, 191), FirstFailed: d.At, LastFailed: d.At}
	if o, err := core.DecodeOrder(d.Body); err == nil {
		l.Order = core.Order{ID: o.ID, UserID: o.UserID, VoucherID: o.VoucherID, CreatedAt: o.CreatedAt}
	}
	return l
}

// text is s as the register's columns take it, whoever wrote the record:
// valid UTF-8, at most n bytes, cut between two characters.
func text(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	for len(s) > n {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}
