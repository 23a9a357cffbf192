// Package paysandbox is the built-in payment provider for demos and tests
// (SECKILL_PAY_PROVIDER=sandbox). Its pay page is a page of the shop's own
// server whose buttons make the provider's notification — signed
// X-Seckill-Signature: sha256=<hex HMAC-SHA256 of the raw body> with the
// sandbox's secret — exactly as a real provider's server would send it, so
// the shop's notification path is the one a real provider uses. It moves
// no money: a shop that runs it on real servers gives its orders away.
package paysandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/seckill-lab/seckill/adapters/internal/bodysig"
	"github.com/seckill-lab/seckill/core"
)

// Name is the provider's registered name.
const Name = "sandbox"

// PagePath is where the pay page of a payment lives: PagePath + its id.
const PagePath = "/pay/sandbox/"

// Sandbox is the provider.
type Sandbox struct{ secret []byte }

// New returns the sandbox signing with secret.
func New(secret []byte) *Sandbox { return &Sandbox{secret: secret} }

// Notice is the notification's body, the contract's.
type Notice struct {
	PaymentID string          `json:"paymentId"`
	OrderID   json.RawMessage `json:"orderId"` // a decimal string (ids exceed 2^53); a number is read too
	Amount    int64           `json:"amount"`
	Status    string          `json:"status"` // succeeded or failed
	TxnID     string          `json:"txnId"`
}

// Start implements core.PaymentProvider: the pay page.
func (s *Sandbox) Start(_ context.Context, p core.Payment) (string, error) {
	return PagePath + p.ID, nil
}

// Notification is what the pay page's button sends for p: the body and
// its signature header, under a new transaction id.
func (s *Sandbox) Notification(p core.Payment, succeeded bool) (body []byte, signature string) {
	txn := make([]byte, 10)
	rand.Read(txn)
	status := "failed"
	if succeeded {
		status = "succeeded"
	}
	body, _ = json.Marshal(Notice{PaymentID: p.ID, OrderID: json.RawMessage(strconv.Quote(strconv.FormatInt(p.OrderID, 10))),
		Amount: p.Amount, Status: status, TxnID: "sbx_" + hex.EncodeToString(txn)})
	return body, s.Sign(body)
}

// Sign is the signature header's value for body.
func (s *Sandbox) Sign(body []byte) string { return bodysig.Sign(s.secret, body) }

// Verify implements core.PaymentProvider.
func (s *Sandbox) Verify(_ context.Context, body []byte, header func(string) string) (core.PaymentNotice, error) {
	if !bodysig.Valid(s.secret, body, header(bodysig.Header)) {
		return core.PaymentNotice{}, core.ErrBadSignature
	}
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

// Refund implements core.PaymentProvider: the sandbox took no money, so
// there is none to give back; the refund is recorded all the same.
func (s *Sandbox) Refund(context.Context, core.PaymentNotice) error { return nil }

var _ core.PaymentProvider = (*Sandbox)(nil)

// SignatureHeader carries a notification's signature.
const SignatureHeader = bodysig.Header
