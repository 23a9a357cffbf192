package server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// steer posts an operator's action on a voucher and fails the test unless
// it is answered 200.
func (h *harness) steer(voucher int64, action string, body any) map[string]any {
	h.t.Helper()
	status, out := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/"+action, h.cfg.AdminToken, body)
	if status != 200 {
		h.t.Fatalf("%s voucher %d: %d %v", action, voucher, status, out)
	}
	return out
}

// TestAPauseHoldsOnEveryInstanceFromItsAnswer: 40 shoppers buy through two
// instances; once the pause is answered, no seckill sent after it is
// answered 200 on either instance, and each answers paused at once; after
// the resume, both sell again at once. The reservation itself refuses:
// no instance polls for it.
func TestAPauseHoldsOnEveryInstanceFromItsAnswer(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, a *harness) {
		cfgB := a.cfg
		cfgB.Consumers = 0
		if a.srv.mini != nil {
			cfgB.RedisURL = "redis://" + a.srv.mini.Addr()
		}
		b := startWith(t, cfgB)
		voucher := a.openVoucher(100000)
		first := a.shopper(1)
		if status, body := a.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", first, nil); status != 200 {
			t.Fatalf("the first buy: %d %v", status, body)
		}
		b.seesOrder(voucher, first)

		// pausedAt: the pause's answer; resumedAt: the resume's request (unix
		// ns, 0: not yet).
		var pausedAt, resumedAt atomic.Int64
		var soldAfterPause, sold atomic.Int64
		firstPaused := [2]atomic.Int64{}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var user atomic.Int64
		user.Store(1000)
		for c := range 40 {
			h := []*harness{a, b}[c%2]
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					sent := time.Now().UnixNano()
					status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(user.Add(1)), nil)
					p, r := pausedAt.Load(), resumedAt.Load()
					switch {
					// Sent after the pause's answer, answered before the
					// resume was asked for: its reservation ran between.
					case status == 200 && p != 0 && sent > p && r == 0:
						soldAfterPause.Add(1)
						t.Logf("sold %v after the pause's answer: %v (instance %d)", time.Duration(sent-p), body, c%2)
					case status == 200:
						sold.Add(1)
					case errorCode(body) == "paused":
						firstPaused[c%2].CompareAndSwap(0, time.Now().UnixNano())
					case status != 429:
						t.Errorf("seckill: %d %v", status, body)
					}
				}
			})
		}
		time.Sleep(300 * time.Millisecond)
		out := a.steer(voucher, "pause", map[string]any{"note": "bots"})
		pausedAt.Store(time.Now().UnixNano())
		if out["state"] != "paused" {
			t.Fatalf("pause answered %v, want state paused", out)
		}
		time.Sleep(500 * time.Millisecond)
		for i := range firstPaused {
			if at := firstPaused[i].Load(); at == 0 || time.Duration(at-pausedAt.Load()) > time.Second {
				t.Errorf("instance %d: first paused answer %v after the pause, want within 1 s", i, time.Duration(at-pausedAt.Load()))
			}
		}
		before := sold.Load()
		resumedAt.Store(time.Now().UnixNano()) // sent from now on, a seckill may be sold
		a.steer(voucher, "resume", nil)
		time.Sleep(time.Second)
		close(stop)
		wg.Wait()
		if n := soldAfterPause.Load(); n != 0 {
			t.Fatalf("%d seckills sent after the pause's answer were answered 200", n)
		}
		if sold.Load() <= before {
			t.Fatalf("nothing sold in the second after the resume (%d before, %d after)", before, sold.Load())
		}
	})
}

// TestAPausedSaleStaysPausedAcrossARebuild: Redis forgets the voucher; the
// rebuild reads the pause from the database with the rest.
func TestAPausedSaleStaysPausedAcrossARebuild(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(10)
		path := "/api/vouchers/" + idString(voucher) + "/seckill"
		if status, body := h.do("POST", path, h.shopper(1), nil); status != 200 {
			t.Fatalf("buy: %d %v", status, body)
		}
		h.steer(voucher, "pause", nil)
		if status, body := h.do("POST", path, h.shopper(2), nil); status != 403 || errorCode(body) != "paused" {
			t.Fatalf("a seckill of a paused sale: %d %v, want 403 paused", status, body)
		}
		forgetSale(t, h)
		if status, body := h.do("POST", path, h.shopper(3), nil); status != 403 || errorCode(body) != "paused" {
			t.Fatalf("after Redis forgot the voucher: %d %v, want 403 paused (the rebuild keeps the pause)", status, body)
		}
		_, v := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil)
		if v["state"] != "paused" {
			t.Fatalf("the voucher shows %v, want state paused", v["state"])
		}
		// Read from the database at most once a second.
		waitFor(t, 3*time.Second, "seckill_sale_paused to show the pause", func() bool {
			return strings.Contains(h.metricsText(), `voucher="`+idString(voucher)+`"} 1`)
		})
		h.steer(voucher, "resume", nil)
		if status, body := h.do("POST", path, h.shopper(4), nil); status != 200 {
			t.Fatalf("after the resume: %d %v", status, body)
		}
	})
}

// TestEndNowAndMovingTheWindow: an end now is ended everywhere at once
// (remembered answers forgotten), a later end opens it again; the begin
// moves only before the sale begins; every action is in the record with
// its operator, the token's fingerprint, before, after and the note.
func TestEndNowAndMovingTheWindow(t *testing.T) {
	forEachStack(t, func(c *Config) { c.AnswerMemo = time.Minute }, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(10)
		path := "/api/vouchers/" + idString(voucher) + "/seckill"
		h.steer(voucher, "end", map[string]any{"note": "mispriced"})
		for u := int64(1); u <= 2; u++ { // the second from memory
			if status, body := h.do("POST", path, h.shopper(u), nil); status != 403 || errorCode(body) != "ended" {
				t.Fatalf("after the end: %d %v, want 403 ended", status, body)
			}
		}
		if status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/pause", h.cfg.AdminToken, nil); status != 409 || errorCode(body) != "ended" {
			t.Fatalf("pausing an ended sale: %d %v, want 409 ended", status, body)
		}
		later := time.Now().Add(time.Hour).UTC()
		status, body := h.do("PATCH", "/api/admin/vouchers/"+idString(voucher), h.cfg.AdminToken, map[string]any{"endTime": later})
		if status != 200 || body["state"] != "on_sale" {
			t.Fatalf("a later end: %d %v, want 200 on_sale", status, body)
		}
		if status, body := h.do("POST", path, h.shopper(3), nil); status != 200 {
			t.Fatalf("after the end moved later: %d %v (a remembered ended answer?)", status, body)
		}
		status, body = h.do("PATCH", "/api/admin/vouchers/"+idString(voucher), h.cfg.AdminToken, map[string]any{"beginTime": time.Now().Add(time.Minute)})
		if status != 409 || errorCode(body) != "already_begun" {
			t.Fatalf("moving the begin of a running sale: %d %v, want 409 already_begun", status, body)
		}
		status, body = h.do("PATCH", "/api/admin/vouchers/"+idString(voucher), h.cfg.AdminToken, map[string]any{"endTime": time.Now().Add(-2 * time.Hour)})
		if status != 400 {
			t.Fatalf("an end before the begin: %d %v, want 400", status, body)
		}
		upcoming := h.createVoucher(5, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
		status, body = h.do("PATCH", "/api/admin/vouchers/"+idString(upcoming), h.cfg.AdminToken, map[string]any{"beginTime": time.Now().Add(-time.Second)})
		if status != 200 || body["state"] != "on_sale" {
			t.Fatalf("moving an upcoming sale's begin to now: %d %v", status, body)
		}
		if status, body := h.do("POST", "/api/vouchers/"+idString(upcoming)+"/seckill", h.shopper(9), nil); status != 200 {
			t.Fatalf("a seckill once the begin moved to now: %d %v", status, body)
		}

		operator := http.Header{"Content-Type": {"application/json"}, "X-Seckill-Operator": {"alice"}}
		if status, body, _ := h.request("POST", "/api/admin/vouchers/"+idString(voucher)+"/pause", h.cfg.AdminToken, map[string]any{"note": "a bot wave"}, operator); status != 200 {
			t.Fatalf("pause as alice: %d %v", status, body)
		}
		status, body = h.do("GET", "/api/admin/actions?voucher="+idString(voucher), h.cfg.AdminToken, nil)
		items, _ := body["items"].([]any)
		if status != 200 || len(items) != 3 {
			t.Fatalf("the record of voucher %d: %d %v, want end, reschedule and pause", voucher, status, body)
		}
		last := items[0].(map[string]any)
		if last["action"] != "pause" || last["operator"] != "alice" || last["note"] != "a bot wave" || len(last["tokenFingerprint"].(string)) != 16 ||
			last["before"].(map[string]any)["state"] != "on_sale" || last["after"].(map[string]any)["state"] != "paused" {
			t.Fatalf("the pause's record: %v", last)
		}
		if strings.Contains(fmt.Sprint(body), h.cfg.AdminToken) {
			t.Fatal("the record shows the admin token")
		}
		if m := h.metricsText(); !strings.Contains(m, `seckill_operator_actions_total{action="pause"`) {
			t.Fatalf("no action metric:\n%s", grepLines(m, "operator"))
		}
	})
}

// TestSyncPausesInItsTransaction: the baseline sells from the database, so
// the pause is the database's alone and its transaction refuses.
func TestSyncPausesInItsTransaction(t *testing.T) {
	forEachStack(t, func(c *Config) { c.Queue = "sync"; c.Expiry = ExpirySweep }, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(10)
		path := "/api/vouchers/" + idString(voucher) + "/seckill"
		h.steer(voucher, "pause", nil)
		if status, body := h.do("POST", path, h.shopper(1), nil); status != 403 || errorCode(body) != "paused" {
			t.Fatalf("a seckill of a paused sale under sync: %d %v, want 403 paused", status, body)
		}
		h.steer(voucher, "resume", nil)
		if status, body := h.do("POST", path, h.shopper(1), nil); status != 200 {
			t.Fatalf("after the resume: %d %v", status, body)
		}
		stock := "/api/admin/vouchers/" + idString(voucher) + "/stock"
		if status, body := h.do("POST", stock, h.cfg.AdminToken, map[string]any{"delta": 2}); status != 200 || body["stock"] != 11.0 {
			t.Fatalf("+2 under sync: %d %v, want 11 left", status, body)
		}
		if status, body := h.do("POST", stock, h.cfg.AdminToken, map[string]any{"delta": -12}); status != 409 || errorCode(body) != "not_enough_stock" {
			t.Fatalf("-12 of 11 under sync: %d %v", status, body)
		}
		if rows, column := h.rows(voucher); rows != 1 || column != 11 {
			t.Fatalf("under sync: %d rows, column %d; want 1 and 11", rows, column)
		}
	})
}

// TestTheKillSwitchPausesEveryVoucherAndOnlyItsResumeLiftsIt: every sale
// not ended is paused at once, a voucher created meanwhile too; its resume
// lifts its own pauses, not one an operator made.
func TestTheKillSwitchPausesEveryVoucherAndOnlyItsResumeLiftsIt(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		a, b, own := h.openVoucher(10), h.openVoucher(10), h.openVoucher(10)
		h.steer(own, "pause", map[string]any{"note": "its own reason"})
		status, body := h.do("POST", "/api/admin/sales/pause", h.cfg.AdminToken, map[string]any{"note": "incident"})
		if status != 200 || body["paused"].(float64) < 2 {
			t.Fatalf("the kill switch: %d %v, want at least the two sales on", status, body)
		}
		created := h.openVoucher(10)
		for _, v := range []int64{a, b, own, created} {
			if status, body := h.do("POST", "/api/vouchers/"+idString(v)+"/seckill", h.shopper(1), nil); status != 403 || errorCode(body) != "paused" {
				t.Fatalf("voucher %d under the kill switch: %d %v, want 403 paused", v, status, body)
			}
		}
		status, body = h.do("POST", "/api/admin/sales/resume", h.cfg.AdminToken, nil)
		if status != 200 || body["resumed"].(float64) < 3 {
			t.Fatalf("the switch's resume: %d %v", status, body)
		}
		for _, v := range []int64{a, b, created} {
			if status, body := h.do("POST", "/api/vouchers/"+idString(v)+"/seckill", h.shopper(1), nil); status != 200 {
				t.Fatalf("voucher %d after the switch's resume: %d %v", v, status, body)
			}
		}
		if status, body := h.do("POST", "/api/vouchers/"+idString(own)+"/seckill", h.shopper(1), nil); status != 403 || errorCode(body) != "paused" {
			t.Fatalf("the operator's own pause after the switch's resume: %d %v, want still paused", status, body)
		}
		_, body = h.do("GET", "/api/admin/actions?limit=2", h.cfg.AdminToken, nil)
		items := body["items"].([]any)
		if items[0].(map[string]any)["action"] != "resume_all" || items[1].(map[string]any)["action"] != "pause_all" ||
			items[1].(map[string]any)["note"] != "incident" {
			t.Fatalf("the record: %v", items)
		}
	})
}

// TestStockAddedWhileSellingIsSoldOnce: +20 while 60 shoppers buy a stock
// of 50 through two instances: exactly 70 sold once drained, the column at
// 0, live orders = initial + deltas - column; taking more than remains is
// 409 and changes nothing; the record says what was done.
func TestStockAddedWhileSellingIsSoldOnce(t *testing.T) {
	for _, buckets := range []int{1, 3} {
		t.Run(strconv.Itoa(buckets)+" buckets", func(t *testing.T) { stockAddedWhileSelling(t, buckets) })
	}
}

// stockAddedWhileSelling is TestStockAddedWhileSellingIsSoldOnce for a
// voucher in buckets buckets: in several, the change is made inside a
// reconcile's fence (the sale of the voucher waits a few milliseconds).
func stockAddedWhileSelling(t *testing.T, buckets int) {
	forEachStack(t, func(c *Config) { c.Shards = max(c.Shards, buckets) }, func(t *testing.T, h *harness) {
		voucher := h.openVoucherIn(50, buckets)
		path := "/api/vouchers/" + idString(voucher) + "/seckill"
		var wg sync.WaitGroup
		var sold atomic.Int64
		for u := int64(1); u <= 60; u++ {
			wg.Go(func() {
				if status, _ := h.do("POST", path, h.shopper(u), nil); status == 200 {
					sold.Add(1)
				}
			})
			if u == 20 {
				wg.Go(func() {
					status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/stock", h.cfg.AdminToken, map[string]any{"delta": 20, "note": "found in the warehouse"})
					if status != 200 {
						t.Errorf("+20: %d %v", status, body)
					}
				})
			}
		}
		wg.Wait()
		for u := int64(61); sold.Load() < 70 && u < 200; u++ {
			if status, _ := h.do("POST", path, h.shopper(u), nil); status == 200 {
				sold.Add(1)
			}
		}
		if status, body := h.do("POST", path, h.shopper(500), nil); status != 409 || errorCode(body) != "sold_out" || sold.Load() != 70 {
			t.Fatalf("%d sold, then %d %v; want 70 sold, then sold out", sold.Load(), status, body)
		}
		h.waitForRows(voucher, 70, 15*time.Second)
		if rows, column := h.rows(voucher); rows != 70 || column != 0 {
			t.Fatalf("%d live rows, stock column %d; want 70 = 50 + 20 - 0", rows, column)
		}
		status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/stock", h.cfg.AdminToken, map[string]any{"delta": -1})
		if status != 409 || errorCode(body) != "not_enough_stock" {
			t.Fatalf("taking a unit of a sold-out voucher: %d %v, want 409 not_enough_stock", status, body)
		}
		if rows, column := h.rows(voucher); rows != 70 || column != 0 {
			t.Fatalf("after the refused take: %d rows, column %d", rows, column)
		}
		_, body = h.do("GET", "/api/admin/actions?voucher="+idString(voucher), h.cfg.AdminToken, nil)
		items := body["items"].([]any)
		added := items[len(items)-1].(map[string]any)
		if added["action"] != "stock" || added["after"].(map[string]any)["delta"] != 20.0 || added["note"] != "found in the warehouse" {
			t.Fatalf("the record: %v", items)
		}
		// Two more, one taken back before a shopper buys it: one sold.
		h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/stock", h.cfg.AdminToken, map[string]any{"delta": 2})
		if status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/stock", h.cfg.AdminToken, map[string]any{"delta": -1}); status != 200 || body["stock"] != 1.0 {
			t.Fatalf("+2 then -1 of a sold-out voucher: %d %v, want 1 left", status, body)
		}
		sold.Store(0)
		for u := int64(600); u < 700; u++ {
			if status, _ := h.do("POST", path, h.shopper(u), nil); status == 200 {
				sold.Add(1)
			}
		}
		h.waitForRows(voucher, 71, 15*time.Second)
		if rows, column := h.rows(voucher); sold.Load() != 1 || rows != 71 || column != 0 {
			t.Fatalf("after +2 -1: %d sold, %d rows, column %d; want 1, 71 = 50 + 21 - 0, 0", sold.Load(), rows, column)
		}
		if _, audit := h.do("GET", "/api/admin/vouchers/"+idString(voucher)+"/audit", h.cfg.AdminToken, nil); len(audit["differences"].([]any)) != 0 {
			t.Fatalf("the audit after the stock changes: %v", audit)
		}
	})
}

// TestAStockChangeSurvivesARebuild: Redis forgets the sale after stock was
// added and taken; the rebuild, reading the database, has the same units,
// and the audit finds no difference.
func TestAStockChangeSurvivesARebuild(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(10)
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(1), nil); status != 200 {
			t.Fatalf("buy: %d %v", status, body)
		}
		for _, delta := range []int{5, -3} {
			if status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/stock", h.cfg.AdminToken, map[string]any{"delta": delta}); status != 200 {
				t.Fatalf("stock %+d: %d %v", delta, status, body)
			}
		}
		h.waitForRows(voucher, 1, 10*time.Second)
		forgetSale(t, h)
		if _, v := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); v["stock"] != 11.0 {
			t.Fatalf("after the rebuild the voucher shows %v left, want 11 (10 + 5 - 3 - 1 sold)", v["stock"])
		}
		_, au := h.do("GET", "/api/admin/vouchers/"+idString(voucher)+"/audit", h.cfg.AdminToken, nil)
		if au["expectedStock"] != 11.0 || au["redis"].(map[string]any)["stock"] != 11.0 || au["mysql"].(map[string]any)["stock"] != 11.0 ||
			strings.Contains(fmt.Sprint(au["differences"]), "stock") {
			t.Fatalf("the audit after the rebuild: %v", au)
		}
		// Forgotten again, and nobody buys: the change loads it first.
		forgetSale(t, h)
		if status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/stock", h.cfg.AdminToken, map[string]any{"delta": 1}); status != 200 || body["stock"] != 12.0 {
			t.Fatalf("+1 on a voucher Redis forgot: %d %v, want 12 left", status, body)
		}
		if rows, column := h.rows(voucher); rows != 1 || column != 12 {
			t.Fatalf("%d rows, column %d; want 1 and 12", rows, column)
		}
	})
}

// TestAPausedRoomKeepsItsQueueAndAdmitsNobody: a room admitting 2 a second
// is paused after its first admissions; joins go on, nobody more is
// admitted while it holds, and after the resume the next in line are.
func TestAPausedRoomKeepsItsQueueAndAdmitsNobody(t *testing.T) {
	h := startServer(t, "embedded", nil)
	voucher, begin := h.roomVoucher(100, 2, "60s", 300*time.Millisecond)
	for u := int64(1); u <= 3; u++ {
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/room", h.shopper(u), nil); status != 200 {
			t.Fatalf("join %d: %d %v", u, status, body)
		}
	}
	time.Sleep(time.Until(begin))
	h.waitForState(voucher, 1, "admitted", 5*time.Second)
	h.steer(voucher, "pause", nil)
	time.Sleep(1500 * time.Millisecond) // a second's admissions, were it not paused
	for u := int64(4); u <= 6; u++ {
		if status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/room", h.shopper(u), nil); status != 200 || body["state"] != "waiting" {
			t.Fatalf("a join while paused: %d %v, want waiting", status, body)
		}
	}
	admitted := 0
	for u := int64(1); u <= 6; u++ {
		if h.roomOf(voucher, u)["state"] == "admitted" {
			admitted++
		}
	}
	time.Sleep(1500 * time.Millisecond)
	for u := int64(1); u <= 6; u++ {
		if h.roomOf(voucher, u)["state"] == "admitted" {
			admitted--
		}
	}
	if admitted != 0 {
		t.Fatalf("%d more admitted while the room was paused", -admitted)
	}
	h.steer(voucher, "resume", nil)
	h.waitForState(voucher, 6, "admitted", 10*time.Second)
}
