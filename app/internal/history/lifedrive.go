package history

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LifecycleSale is a checked run of the order lifecycle: a Sale whose
// shoppers also pay, get paid (the provider's notices, some sent twice,
// some failed), cancel, and leave orders to expire.
type LifecycleSale struct {
	Sale
	// Sign is the provider's signature of a notice's body (the sandbox's
	// X-Seckill-Signature).
	Sign func(body []byte) string
	// Pace is the most a client waits between its operations, so that a
	// run lasts past the pay window and orders expire under it.
	Pace time.Duration
}

// known is what the shoppers were told of one user's order of a voucher:
// the latest order an answer named, its payments and the notices sent.
type known struct {
	order    int64
	payments []payment
	notices  []notice
}

// notice is a notice sent: a retry sends the same.
type notice struct {
	txn       string
	pay       payment
	succeeded bool
}

type payment struct {
	id     string
	amount int64
}

// ledgerOfAnswers is the shoppers' shared memory of their orders.
type ledgerOfAnswers struct {
	mu sync.Mutex
	by map[[2]int64]*known
}

func (l *ledgerOfAnswers) get(v, u int64) known {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.by[[2]int64{v, u}]; k != nil {
		return known{order: k.order, payments: append([]payment(nil), k.payments...), notices: append([]notice(nil), k.notices...)}
	}
	return known{}
}

// learn records what an answer told: a new order id forgets the old one's
// payments.
func (l *ledgerOfAnswers) learn(in Input, out Output, pay payment) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.by[[2]int64{in.Voucher, in.User}]
	if k == nil {
		k = &known{}
		l.by[[2]int64{in.Voucher, in.User}] = k
	}
	switch {
	case out.OrderID != 0 && out.OrderID != k.order && (out.Outcome == Reserved || out.Outcome == Held):
		*k = known{order: out.OrderID}
	case in.Kind == Pay && out.Outcome == Accepted && in.Order == k.order:
		k.payments = append(k.payments, pay)
	case in.Kind == Notify && in.Order == k.order:
		k.notices = append(k.notices, notice{txn: in.Txn, pay: pay, succeeded: in.Succeeded})
	}
}

// DriveLifecycle runs the lifecycle's operations, recording each in rec,
// until Ops ran or ctx ends: buys and reads as Drive's, and pays, notices
// and cancels of the orders the shoppers were told of.
func DriveLifecycle(ctx context.Context, s LifecycleSale, rec *Recorder) {
	answers := &ledgerOfAnswers{by: map[[2]int64]*known{}}
	runClients(ctx, s.Sale, func(c int, rnd *rand.Rand, client *http.Client, base string) {
		in := Input{Voucher: s.Vouchers[rnd.IntN(len(s.Vouchers))], User: 1 + rnd.Int64N(s.Users)}
		pay := pickLifecycleOp(rnd, &in, answers.get(in.Voucher, in.User))
		call := rec.Now()
		var out Output
		switch in.Kind {
		case Buy, ReadStock, ReadOrder:
			out = do(ctx, client, base, s.Sale, in)
		default:
			out, pay = lifecycleDo(ctx, client, base, s, in, pay)
		}
		rec.Add(c, in, call, out)
		answers.learn(in, out, pay)
		if in.Kind == Buy && out.Outcome == Reserved && rnd.IntN(2) == 0 {
			// The tap on Pay (or Cancel) as soon as the page shows the
			// order: the outside checker's /pay 404 was one.
			next := Input{Kind: Pay, Voucher: in.Voucher, User: in.User, Order: out.OrderID}
			if rnd.IntN(5) == 0 {
				next.Kind = Cancel
			}
			call := rec.Now()
			out, pay := lifecycleDo(ctx, client, base, s, next, payment{})
			rec.Add(c, next, call, out)
			answers.learn(next, out, pay)
		}
		sleep(ctx, time.Duration(rnd.Int64N(int64(s.Pace)+1)))
	})
}

// pickLifecycleOp chooses the operation: a buy or a read, or, for an order
// the shopper was told of, a pay, a completion at the sandbox's page (its
// notice lost or late as the sandbox is told), a notice (a new one, a
// failed one, or one sent again), a cancel or an operator's refund. The
// payment a completion or a notice is for is returned.
func pickLifecycleOp(rnd *rand.Rand, in *Input, k known) payment {
	p := rnd.IntN(100)
	switch {
	case k.order == 0 || p < 35:
		in.Kind = Buy
	case p < 48:
		in.Kind = ReadOrder
	case p < 56:
		in.Kind = ReadStock
	case p < 68 || (p < 86 && len(k.payments) == 0):
		in.Kind, in.Order = Pay, k.order
	case p < 78:
		// Most shoppers pay in the end; a paid unit is sold for good, so
		// few pay at each try, and orders expire and come back meanwhile.
		in.Kind, in.Order, in.Succeeded = Complete, k.order, rnd.IntN(100) < 30
		return k.payments[rnd.IntN(len(k.payments))]
	case p < 86:
		in.Kind, in.Order = Notify, k.order
		if len(k.notices) > 0 && rnd.IntN(4) == 0 {
			n := k.notices[rnd.IntN(len(k.notices))] // the provider's retry: the same notice
			in.Txn, in.Succeeded = n.txn, n.succeeded
			return n.pay
		}
		in.Txn, in.Succeeded = fmt.Sprintf("chk_%d_%d", k.order, rnd.Int64()), rnd.IntN(100) < 30
		return k.payments[rnd.IntN(len(k.payments))]
	case p < 90:
		in.Kind, in.Order, in.ReturnUnit = Refund, k.order, rnd.IntN(4) > 0
	default:
		in.Kind, in.Order = Cancel, k.order
	}
	return payment{}
}

// lifecycleDo sends a pay, a notice or a cancel and classifies its answer
// (a pay's answer also names its payment).
func lifecycleDo(ctx context.Context, client *http.Client, base string, s LifecycleSale, in Input, pay payment) (Output, payment) {
	order := strconv.FormatInt(in.Order, 10)
	var body []byte
	path := "/api/orders/" + order + "/pay"
	header := http.Header{"Authorization": {s.Token(in.User)}}
	status := "failed"
	if in.Succeeded {
		status = "succeeded"
	}
	switch in.Kind {
	case Cancel:
		path = "/api/orders/" + order + "/cancel"
	case Notify:
		body, _ = json.Marshal(map[string]any{"paymentId": pay.id, "orderId": order, "amount": pay.amount, "status": status, "txnId": in.Txn})
		path, header = "/api/payments/sandbox/notify", http.Header{"X-Seckill-Signature": {s.Sign(body)}}
	case Complete:
		body, _ = json.Marshal(map[string]any{"status": status})
		path, header = "/api/payments/sandbox/"+pay.id+"/complete", http.Header{}
	case Refund:
		body, _ = json.Marshal(map[string]any{"returnUnit": in.ReturnUnit, "note": "history"})
		path = "/api/admin/orders/" + order + "/refund"
		header = http.Header{"Authorization": {"Bearer " + s.AdminToken}, "X-Seckill-Operator": {"history"}}
	}
	req, err := http.NewRequestWithContext(ctx, "POST", base+path, bytes.NewReader(body))
	if err != nil {
		return Output{Outcome: Wrong, Body: err.Error()}, pay
	}
	req.Header = header
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return unanswered(err), pay
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var answer struct {
		PaymentID string `json:"paymentId"`
		Amount    int64  `json:"amount"`
		Result    string `json:"result"`
		Status    string `json:"status"` // a completion's: the payment's state at the sandbox
		Error     struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &answer)
	out := Output{Status: resp.StatusCode, Body: string(raw), Result: answer.Result}
	if in.Kind == Complete {
		out.OrderStatus = answer.Status
	}
	if len(out.Body) > 200 {
		out.Body = out.Body[:200]
	}
	switch code := answer.Error.Code; {
	case resp.StatusCode >= 500:
		out.Outcome = Unknown
	case resp.StatusCode == http.StatusTooManyRequests:
		out.Outcome = Refused
	case resp.StatusCode == 200:
		out.Outcome = Accepted
		if in.Kind == Pay {
			pay = payment{id: answer.PaymentID, amount: answer.Amount}
		}
	case code == "not_payable" || code == "not_cancellable" || code == "not_refundable":
		out.Outcome = Denied
		// The server's words for a queued order (app/server's errPayNotYet):
		// the generic refusal names all three cases.
		if strings.HasPrefix(answer.Error.Message, "the order is still being recorded") {
			out.Outcome = NotYet
		}
	case code == "order_not_found":
		out.Outcome = NoOrder
	default:
		out.Outcome = Wrong
	}
	return out, pay
}
