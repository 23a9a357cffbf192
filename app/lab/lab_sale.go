package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/seckill-lab/seckill/app/server"
)

// sellOut runs a sale of stock to shoppers (every tenth trying twice) and
// checks it: accepted orders, how many beyond the stock, users accepted
// twice, and accepted orders missing from the database once it drained.
func (h *labServer) sellOut(voucher, stock, shoppers int64, conns int) (accepted, oversold, dups, unpersisted int64, err error) {
	url := h.base + "/api/vouchers/" + idString(voucher) + "/seckill"
	type attempt struct{ user int64 }
	work := make(chan attempt)
	var mu sync.Mutex
	orders := map[int64]int64{} // order id -> user
	wins := map[int64]int{}
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	for range conns {
		wg.Go(func() {
			for a := range work {
				tok, _ := h.tokens.Issue(a.user, time.Now())
				req, _ := http.NewRequest(http.MethodPost, url, nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				var body struct {
					OrderID string `json:"orderId"`
				}
				if resp.StatusCode == http.StatusOK {
					decodeJSON(resp, &body)
				}
				resp.Body.Close()
				if id, perr := strconv.ParseInt(body.OrderID, 10, 64); perr == nil {
					mu.Lock()
					orders[id] = a.user
					wins[a.user]++
					mu.Unlock()
				}
			}
		})
	}
	for u := int64(1); u <= shoppers; u++ {
		work <- attempt{u}
		if u%10 == 0 {
			work <- attempt{u}
		}
	}
	close(work)
	wg.Wait()
	accepted = int64(len(orders))
	oversold = max(accepted-stock, 0)
	for _, n := range wins {
		if n > 1 {
			dups += int64(n - 1)
		}
	}
	h.waitRows([]int64{voucher}, accepted, 60*time.Second)
	time.Sleep(500 * time.Millisecond) // let stragglers land before counting
	ids := make([]int64, 0, len(orders))
	for id := range orders {
		ids = append(ids, id)
	}
	var persisted int64
	if len(ids) > 0 {
		n, err := h.srv.TestHooks().Database().NewSelect().Table("tb_voucher_order").Where("id IN (?)", bun.List(ids)).Count(context.Background())
		if err != nil {
			return accepted, oversold, dups, unpersisted, err
		}
		persisted = int64(n)
	}
	unpersisted = int64(len(ids)) - persisted
	if rows := h.rows(voucher); rows > stock {
		oversold = max(oversold, rows-stock)
	}
	return accepted, oversold, dups, unpersisted, nil
}

// drainRate builds a backlog of o.drainOrders orders with no consumer
// running (cfg.Consumers is 0), then starts `consumers` consumers and times
// them.
func drainRate(cfg server.Config, consumers int, o labOptions) (float64, error) {
	h, err := startLab(cfg)
	if err != nil {
		return 0, err
	}
	defer h.stop()
	vouchers, err := h.vouchers(o.vouchers, 1_000_000_000)
	if err != nil {
		return 0, err
	}
	defer dropVouchers(cfg.MySQLDSN, vouchers...)
	load := runLoad(context.Background(), o.conns, 5*time.Minute, o.drainOrders, h.buyRequest(vouchers, 1, o.drainOrders))
	backlog := load.Status[http.StatusOK]
	if backlog == 0 {
		return 0, fmt.Errorf("drain: no order accepted (statuses %v, transport errors %d)", load.Status, load.Errors)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := time.Now()
	go func() {
		_ = h.srv.TestHooks().Drain(ctx, consumers) // how far it got, the rows tell
		close(done)
	}()
	n := h.waitRows(vouchers, backlog, 5*time.Minute)
	took := time.Since(start)
	stop()
	<-done
	if n < backlog {
		return float64(n) / took.Seconds(), fmt.Errorf("drain: %d of %d persisted", n, backlog)
	}
	return float64(n) / took.Seconds(), nil
}

func decodeJSON(resp *http.Response, v any) {
	_ = json.NewDecoder(resp.Body).Decode(v)
}
