// Package paysandbox is the built-in payment provider for demos and tests
// (SECKILL_PAY_PROVIDER=sandbox). It behaves like a real provider: it
// keeps its own books (what it took and gave back of each payment, apart
// from the shop's record), its pay page's complete step takes the money
// there and answers what it did, its notice to the shop — signed
// X-Seckill-Signature: sha256=<hex HMAC-SHA256 of the raw body> with the
// sandbox's secret, exactly as a real provider's server would send it —
// travels apart and, for tests, may be dropped or delayed past the order's
// deadline; and it answers a status query and a refund request. It moves
// no real money: a shop that runs it on real servers gives its orders
// away.
package paysandbox

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/seckill-lab/seckill/adapters/internal/bodysig"
	"github.com/seckill-lab/seckill/core"
)

// Name is the provider's registered name.
const Name = "sandbox"

// PagePath is where the pay page of a payment lives: PagePath + its id.
const PagePath = "/pay/sandbox/"

// Books are the sandbox's own books (the shop's database keeps them, in
// tables of their own: mysqlstore.SandboxBooks).
type Books interface {
	// Open records a payment started; one it has is left as it is.
	Open(ctx context.Context, p core.Payment) error
	// Attempt records a shopper's attempt under the transaction txnID: a
	// success takes the payment's amount once; a failure is recorded on a
	// payment nothing succeeded on. core.ErrPaymentUnknown: none.
	Attempt(ctx context.Context, paymentID string, succeeded bool, txnID string, at time.Time) (core.ProviderPayment, error)
	// Charged records a charge a notice the sandbox signed proves, once
	// per transaction.
	Charged(ctx context.Context, paymentID, txnID string, amount int64, at time.Time) error
	// Look is the books' word on a payment; core.ErrPaymentUnknown: none.
	Look(ctx context.Context, paymentID string) (core.ProviderPayment, error)
	// GiveBack refunds, once per r.Key; a core.CodeNotRefundable error
	// for more than was taken and not given back.
	GiveBack(ctx context.Context, r core.RefundRequest, at time.Time) (core.ProviderPayment, error)
	// Refund is GiveBack without the payment's word after it.
	Refund(ctx context.Context, r core.RefundRequest, at time.Time) error
}

// Config is what the sandbox is made of.
type Config struct {
	// Secret signs its notices and the shop's requests to it.
	Secret []byte
	Books  Books
	// DropNotices and DelayNotices are the shares of notices it loses and
	// sends only after the order's deadline (for tests; 0 by default,
	// SECKILL_PAYSANDBOX_DROP_NOTICES and …_DELAY_NOTICES).
	DropNotices, DelayNotices float64
}

// Sandbox is the provider.
type Sandbox struct {
	cfg Config
	now func() time.Time
}

// New returns the sandbox.
func New(cfg Config) *Sandbox { return &Sandbox{cfg: cfg, now: time.Now} }

// Notice is the notification's body, the contract's.
type Notice struct {
	PaymentID string          `json:"paymentId"`
	OrderID   json.RawMessage `json:"orderId"` // a decimal string (ids exceed 2^53); a number is read too
	Amount    int64           `json:"amount"`
	Status    string          `json:"status"` // succeeded or failed
	TxnID     string          `json:"txnId"`
}

// Start implements core.PaymentProvider: the payment opens in the books,
// and the shopper goes to the pay page.
func (s *Sandbox) Start(ctx context.Context, p core.Payment) (string, error) {
	if err := s.cfg.Books.Open(ctx, p); err != nil {
		return "", err
	}
	return PagePath + p.ID, nil
}

// Complete is the shopper's step on the pay page: the sandbox takes the
// money (or records the failed attempt) in its books, and makes the
// notice of what it did, signed. A payment that took money already takes
// nothing more: its notice is made again (the same transaction, which the
// shop records once).
func (s *Sandbox) Complete(ctx context.Context, p core.Payment, succeeded bool) (word core.ProviderPayment, body []byte, signature string, err error) {
	if err := s.cfg.Books.Open(ctx, p); err != nil { // started before the books were kept
		return word, nil, "", err
	}
	word, err = s.cfg.Books.Attempt(ctx, p.ID, succeeded, newTxnID(), s.now())
	if err != nil {
		return word, nil, "", err
	}
	n := Notice{PaymentID: p.ID, OrderID: json.RawMessage(strconv.Quote(strconv.FormatInt(p.OrderID, 10))),
		Amount: p.Amount, Status: "failed", TxnID: word.TxnID}
	if word.Taken > 0 {
		n.Status, n.Amount = "succeeded", word.Taken
	}
	body, _ = json.Marshal(n)
	return word, body, s.Sign(body), nil
}

// Fate is what becomes of a notice.
type Fate int

const (
	// Sent: it reaches the shop now.
	Sent Fate = iota
	// Delayed: it reaches the shop only after the order's deadline.
	Delayed
	// Lost: it never does.
	Lost
)

// NoticeFate draws a notice's fate from the configured shares.
func (s *Sandbox) NoticeFate() Fate {
	x := rand.Float64()
	switch {
	case x < s.cfg.DropNotices:
		return Lost
	case x < s.cfg.DropNotices+s.cfg.DelayNotices:
		return Delayed
	}
	return Sent
}

func newTxnID() string {
	txn := make([]byte, 10)
	crand.Read(txn)
	return "sbx_" + hex.EncodeToString(txn)
}

// Sign is the signature header's value for body.
func (s *Sandbox) Sign(body []byte) string { return bodysig.Sign(s.cfg.Secret, body) }

// Valid reports whether signature is body's, by the sandbox's secret (the
// shop's requests to it are signed as its notices are).
func (s *Sandbox) Valid(body []byte, signature string) bool {
	return bodysig.Valid(s.cfg.Secret, body, signature)
}

// Verify implements core.PaymentProvider. A succeeded notice the sandbox
// signed is its word that it took the money: its books have the charge,
// whoever sent the notice.
func (s *Sandbox) Verify(ctx context.Context, body []byte, header func(string) string) (core.PaymentNotice, error) {
	if !bodysig.Valid(s.cfg.Secret, body, header(bodysig.Header)) {
		return core.PaymentNotice{}, core.ErrBadSignature
	}
	n, err := parseNotice(body)
	if err != nil {
		return n, err
	}
	if n.Succeeded {
		if err := s.cfg.Books.Open(ctx, core.Payment{ID: n.PaymentID, OrderID: n.OrderID, Amount: n.Amount}); err != nil {
			return core.PaymentNotice{}, core.Wrap("sandbox: books", core.CodeUnavailable, err)
		}
		if err := s.cfg.Books.Charged(ctx, n.PaymentID, n.TxnID, n.Amount, s.now()); err != nil {
			return core.PaymentNotice{}, core.Wrap("sandbox: books", core.CodeUnavailable, err)
		}
	}
	return n, nil
}

func parseNotice(body []byte) (core.PaymentNotice, error) {
	var n Notice
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&n); err != nil {
		return core.PaymentNotice{}, &core.Error{Code: core.CodeBadRequest, Op: core.OpDecodeJSON, Message: "the notification is not the sandbox's JSON", Err: err}
	}
	order, err := strconv.ParseInt(string(bytes.Trim(n.OrderID, `"`)), 10, 64)
	switch {
	case err != nil || order <= 0:
		return core.PaymentNotice{}, core.E(core.CodeBadRequest, "orderId: want a positive decimal id")
	case n.Status != "succeeded" && n.Status != "failed":
		return core.PaymentNotice{}, core.E(core.CodeBadRequest, `status: want "succeeded" or "failed"`)
	case n.TxnID == "" || len(n.TxnID) > 64:
		return core.PaymentNotice{}, core.E(core.CodeBadRequest, "txnId: want 1 to 64 characters")
	case n.PaymentID == "" || len(n.PaymentID) > 32:
		return core.PaymentNotice{}, core.E(core.CodeBadRequest, "paymentId: want 1 to 32 characters")
	case n.Amount < 0:
		return core.PaymentNotice{}, core.E(core.CodeBadRequest, "amount: want minor units, not negative")
	}
	return core.PaymentNotice{Provider: Name, PaymentID: n.PaymentID, OrderID: order, Amount: n.Amount,
		Succeeded: n.Status == "succeeded", TxnID: n.TxnID}, nil
}

// Status implements core.PaymentProvider: the books' word. A payment
// they never had (started before the books were kept) is pending.
func (s *Sandbox) Status(ctx context.Context, p core.Payment) (core.ProviderPayment, error) {
	word, err := s.cfg.Books.Look(ctx, p.ID)
	if errors.Is(err, core.ErrPaymentUnknown) {
		return core.ProviderPayment{State: core.PaymentPending, OrderID: p.OrderID, Amount: p.Amount}, nil
	}
	return word, err
}

// Refund implements core.PaymentProvider: the money goes back in the
// books, once per key.
func (s *Sandbox) Refund(ctx context.Context, r core.RefundRequest) error {
	return s.cfg.Books.Refund(ctx, r, s.now())
}

// Look and GiveBack are the sandbox's answers to the shop's signed status
// query and refund request (its HTTP API).
func (s *Sandbox) Look(ctx context.Context, paymentID string) (core.ProviderPayment, error) {
	return s.cfg.Books.Look(ctx, paymentID)
}

// GiveBack: see Look.
func (s *Sandbox) GiveBack(ctx context.Context, r core.RefundRequest) (core.ProviderPayment, error) {
	return s.cfg.Books.GiveBack(ctx, r, s.now())
}

var _ core.PaymentProvider = (*Sandbox)(nil)

// SignatureHeader carries a notification's signature.
const SignatureHeader = bodysig.Header
