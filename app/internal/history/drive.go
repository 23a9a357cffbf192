package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Sale is one checked run: the instances to send shoppers to, the vouchers
// (created by the caller, each with Stock units, on sale throughout) and
// how hard to drive them.
type Sale struct {
	// URLs are the instances' base URLs; each client keeps to one.
	URLs []string
	// AdminToken authorises the audits (and the caller's reconciles).
	AdminToken string
	Vouchers   []int64
	Stock      int64
	// Users buy each voucher: ids 1..Users, so that every voucher sells
	// out and most of its shoppers try again.
	Users int64
	// Clients run concurrently, Ops operations in all.
	Clients, Ops int
	// Token is the Authorization header of a shopper.
	Token func(user int64) string
	// Timeout bounds one request; one that times out is Unknown.
	Timeout time.Duration
}

// Drive runs the sale's operations, recording each in rec: half buys, the
// rest reads of the stock and of the shopper's order, in random order over
// the vouchers and users, until Ops ran or ctx ends.
func Drive(ctx context.Context, s Sale, rec *Recorder) {
	runClients(ctx, s, func(c int, rnd *rand.Rand, client *http.Client, base string) {
		in := Input{Voucher: s.Vouchers[rnd.IntN(len(s.Vouchers))], User: 1 + rnd.Int64N(s.Users)}
		switch p := rnd.IntN(4); {
		case p < 2:
			in.Kind = Buy
		case p == 2:
			in.Kind = ReadStock
		default:
			in.Kind = ReadOrder
		}
		call := rec.Now()
		rec.Add(c, in, call, do(ctx, client, base, s, in))
	})
}

// runClients runs s.Clients concurrent clients, each keeping to one of
// s.URLs with a random source of its own, calling step until s.Ops steps
// ran in all or ctx ends.
func runClients(ctx context.Context, s Sale, step func(c int, rnd *rand.Rand, client *http.Client, base string)) {
	client := &http.Client{Timeout: s.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: s.Clients}}
	var left atomic.Int64
	left.Store(int64(s.Ops))
	var wg sync.WaitGroup
	for c := range s.Clients {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			base := s.URLs[c%len(s.URLs)]
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				step(c, rnd, client, base)
			}
		})
	}
	wg.Wait()
}

// do sends one operation and classifies its answer.
func do(ctx context.Context, client *http.Client, base string, s Sale, in Input) Output {
	v := strconv.FormatInt(in.Voucher, 10)
	method, path := "GET", "/api/vouchers/"+v
	switch in.Kind {
	case Buy:
		method, path = "POST", path+"/seckill"
	case ReadOrder:
		path += "/order"
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return Output{Outcome: Wrong, Body: err.Error()}
	}
	if in.Kind != ReadStock {
		req.Header.Set("Authorization", s.Token(in.User))
	}
	resp, err := client.Do(req)
	if err != nil {
		return unanswered(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body struct {
		OrderID string `json:"orderId"`
		Status  string `json:"status"`
		Stock   *int64 `json:"stock"`
		Error   struct {
			Code    string `json:"code"`
			OrderID string `json:"orderId"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &body)
	out := Output{Status: resp.StatusCode, Body: string(raw)}
	if len(out.Body) > 200 {
		out.Body = out.Body[:200]
	}
	id := func(text string) int64 { n, _ := strconv.ParseInt(text, 10, 64); return n }
	switch code := body.Error.Code; {
	case resp.StatusCode >= 500:
		out.Outcome, out.OrderID = Unknown, id(body.Error.OrderID) // unconfirmed names its order
	case resp.StatusCode == http.StatusTooManyRequests:
		out.Outcome = Refused
	case in.Kind == Buy && resp.StatusCode == 200 && body.OrderID != "":
		out.Outcome, out.OrderID = Reserved, id(body.OrderID)
	case in.Kind == Buy && code == "already_purchased" && body.Error.OrderID != "":
		out.Outcome, out.OrderID = Held, id(body.Error.OrderID)
	case in.Kind == Buy && code == "sold_out":
		out.Outcome = SoldOut
	case in.Kind == Buy && code == "paused":
		out.Outcome = Paused
	case in.Kind == Buy && code == "ended":
		out.Outcome = Ended
	case in.Kind == ReadStock && resp.StatusCode == 200 && body.Stock != nil:
		out.Outcome, out.Stock = Stock, *body.Stock
	case in.Kind == ReadOrder && resp.StatusCode == 200 && body.OrderID != "":
		out.Outcome, out.OrderID, out.OrderStatus = Held, id(body.OrderID), body.Status
	case in.Kind == ReadOrder && code == "order_not_found":
		out.Outcome = NoOrder
	default:
		out.Outcome = Wrong
	}
	return out
}

// Admin sends an operator's request (a reconcile, an audit) and decodes
// the answer.
func Admin(ctx context.Context, base, token, method, path string, into any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return doJSON(req, into)
}

// doJSON sends req and decodes a 200's body into into (if not nil).
func doJSON(req *http.Request, into any) (int, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if into != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(raw, into); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
		}
	}
	return resp.StatusCode, nil
}

// unanswered classifies a call that got no answer: one that never
// connected (an instance down: connection refused) cannot have done
// anything, and says so (Refused); any other may have (Unknown).
func unanswered(err error) Output {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return Output{Outcome: Refused, Body: err.Error()}
	}
	return Output{Outcome: Unknown, Body: err.Error()}
}
