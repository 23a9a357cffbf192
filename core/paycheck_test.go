package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/core"
	"github.com/seckill-lab/seckill/core/payments"
)

// wordProvider is a provider whose word on each payment the test sets;
// down, it answers nothing.
type wordProvider struct {
	mu      sync.Mutex
	words   map[string]core.ProviderPayment
	refunds map[string]int // by key
	down    bool
}

func (p *wordProvider) Start(context.Context, core.Payment) (string, error) { return "/pay", nil }
func (p *wordProvider) Verify(context.Context, []byte, func(string) string) (core.PaymentNotice, error) {
	return core.PaymentNotice{}, core.ErrBadSignature
}
func (p *wordProvider) Status(_ context.Context, pay core.Payment) (core.ProviderPayment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return core.ProviderPayment{}, errors.New("provider down")
	}
	return p.words[pay.ID], nil
}
func (p *wordProvider) Refund(_ context.Context, r core.RefundRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refunds[r.Key]++
	return nil
}

// ledgerPayments is the shop's payments in memory, over the lifecycle's
// fake orders: a succeeded notice pays a created order, refunds a
// cancelled one; each transaction once.
type ledgerPayments struct {
	orders   *fakeLifecycleStore
	payments map[string]core.Payment
	txns     map[string]core.NoticeResult
	checked  map[string]int
}

func (s *ledgerPayments) StartPayment(context.Context, core.Payment, int64) (core.Payment, error) {
	return core.Payment{}, errors.New("not here")
}
func (s *ledgerPayments) RecordNotice(_ context.Context, n core.PaymentNotice, _ time.Time) (core.NoticeResult, error) {
	s.orders.mu.Lock()
	defer s.orders.mu.Unlock()
	if res, ok := s.txns[n.TxnID]; ok && res != core.NoticeRefunded {
		return core.NoticeAlreadyRecorded, nil
	}
	res := core.NoticeFailed
	if o := s.orders.orders[n.OrderID]; n.Succeeded && o.Status == core.StatusCreated {
		o.Status, res = core.StatusPaid, core.NoticePaid
	} else if n.Succeeded {
		res = core.NoticeRefunded
	}
	s.txns[n.TxnID] = res
	return res, nil
}
func (s *ledgerPayments) Refunded(_ context.Context, n core.PaymentNotice) error {
	s.orders.mu.Lock()
	defer s.orders.mu.Unlock()
	s.txns[n.TxnID] = "refund recorded"
	return nil
}
func (s *ledgerPayments) OpenPayments(_ context.Context, orderID int64) ([]core.Payment, error) {
	var out []core.Payment
	for _, p := range s.payments {
		if _, recorded := s.txns["t-"+p.ID]; p.OrderID == orderID && !recorded {
			out = append(out, p)
		}
	}
	return out, nil
}
func (s *ledgerPayments) Heard(_ context.Context, id string, _ core.ProviderPayment, _ time.Time) error {
	s.checked[id]++
	return nil
}

// TestTheProvidersWordDecidesAnOrderAboutToExpire: three orders past
// their deadline, each with a payment whose notice never came. The one
// the provider took money for before the deadline is paid, not expired;
// the one it took money for after it expires (the money is the
// reconciliation's to refund); the one it says nothing of expires. While
// the provider does not answer, an order is held, for ExpiryHold past its
// deadline at most.
func TestTheProvidersWordDecidesAnOrderAboutToExpire(t *testing.T) {
	now := time.Now()
	payBy := now.Add(-time.Second)
	orders := &fakeLifecycleStore{pending: map[int64]core.Order{}, orders: map[int64]*core.Order{}}
	store := &ledgerPayments{orders: orders, payments: map[string]core.Payment{}, txns: map[string]core.NoticeResult{}, checked: map[string]int{}}
	provider := &wordProvider{words: map[string]core.ProviderPayment{}, refunds: map[string]int{}}
	for id, taken := range map[int64]time.Time{1: payBy.Add(-time.Second), 2: payBy.Add(time.Millisecond), 3: {}} {
		orders.orders[id] = &core.Order{ID: id, UserID: id, VoucherID: 7, Status: core.StatusCreated, PayBy: payBy}
		pid := string(rune('a' + id))
		store.payments[pid] = core.Payment{ID: pid, OrderID: id, Amount: 100, PayBy: payBy}
		if !taken.IsZero() {
			provider.words[pid] = core.ProviderPayment{State: core.PaymentSucceeded, Amount: 100, Taken: 100, TakenAt: taken, TxnID: "t-" + pid}
		}
	}
	svc := payments.New(payments.Config{Name: "fake", Provider: provider, Store: store})
	l := core.NewLifecycle(core.LifecycleConfig{Store: svc.AskingBeforeExpiry(orders)})

	provider.down = true
	if err := l.Sweep(context.Background()); err != nil {
		t.Fatalf("a provider down stops the sweep: %v", err)
	}
	for id, o := range orders.orders {
		if o.Status != core.StatusCreated {
			t.Fatalf("the provider did not answer, yet order %d is %s: want it held", id, o.Status)
		}
	}
	provider.down = false
	if err := l.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[int64]core.OrderStatus{1: core.StatusPaid, 2: core.StatusCancelled, 3: core.StatusCancelled}
	for id, st := range want {
		if got := orders.orders[id].Status; got != st {
			t.Fatalf("order %d is %s, want %s", id, got, st)
		}
	}
	if len(provider.refunds) != 0 || orders.stock != 2 {
		t.Fatalf("%d refunds, %d units back; want none refunded here, the two expired orders' units back", len(provider.refunds), orders.stock)
	}

	// Past the hold, a provider still down no longer holds the expiry.
	orders.orders[4] = &core.Order{ID: 4, UserID: 4, VoucherID: 7, Status: core.StatusCreated, PayBy: now.Add(-payments.ExpiryHold - time.Second)}
	store.payments["e"] = core.Payment{ID: "e", OrderID: 4, Amount: 100, PayBy: orders.orders[4].PayBy}
	provider.down = true
	if err := l.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := orders.orders[4].Status; got != core.StatusCancelled {
		t.Fatalf("past the hold, the provider down: order 4 is %s, want it expired", got)
	}
}

// TestAskingTheProviderRecordsItsWordOnce: money taken on an order
// cancelled first is refunded once, whoever asks how often.
func TestAskingTheProviderRecordsItsWordOnce(t *testing.T) {
	orders := &fakeLifecycleStore{pending: map[int64]core.Order{}, orders: map[int64]*core.Order{
		1: {ID: 1, Status: core.StatusCancelled}}}
	store := &ledgerPayments{orders: orders, payments: map[string]core.Payment{}, txns: map[string]core.NoticeResult{}, checked: map[string]int{}}
	provider := &wordProvider{refunds: map[string]int{}, words: map[string]core.ProviderPayment{
		"a": {State: core.PaymentSucceeded, Amount: 100, Taken: 100, TakenAt: time.Now(), TxnID: "t-a"}}}
	svc := payments.New(payments.Config{Name: "fake", Provider: provider, Store: store})
	pay := core.Payment{ID: "a", OrderID: 1, Amount: 100}
	res, _, err := svc.Ask(context.Background(), pay)
	if err != nil || res != core.NoticeRefunded {
		t.Fatalf("ask: %v %v, want refunded", res, err)
	}
	if res, _, err := svc.Ask(context.Background(), pay); err != nil || res != core.NoticeAlreadyRecorded {
		t.Fatalf("ask again: %v %v, want already recorded", res, err)
	}
	if provider.refunds["txn:t-a"] != 1 || len(provider.refunds) != 1 || store.checked["a"] != 2 {
		t.Fatalf("refunds %v, checked %d times; want one refund, keyed by the transaction, and two questions", provider.refunds, store.checked["a"])
	}
	provider.words["a"] = core.ProviderPayment{State: core.PaymentPending, Amount: 100}
	if res, _, err := svc.Ask(context.Background(), core.Payment{ID: "a", OrderID: 1}); err != nil || res != "" {
		t.Fatalf("a pending payment: %v %v, want nothing recorded", res, err)
	}
}
