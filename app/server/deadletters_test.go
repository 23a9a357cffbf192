package server

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-rod/rod"

	"github.com/seckill-lab/seckill/core"
)

// TestEveryBackendsDeadLettersAreListed: on every backend a real dead
// letter (an order the database refuses because its stock column was
// emptied under the sale, as the half-configured instance made
// them) reaches the operator's register within seconds, whatever the
// backend keeps it in: the API lists it with the filters applied on the
// server (reason, voucher, time), shows it with the message as delivered,
// and /metrics counts it open; bad filters are 400s, an unknown id 404.
func TestEveryBackendsDeadLettersAreListed(t *testing.T) {
	forEachBackendAndStack(t, func(t *testing.T, h *harness) {
		if h.cfg.Queue == "sync" {
			t.Skip("sync has no queue: nothing is dead-lettered")
		}
		ctx := context.Background()
		voucher := h.openVoucher(5)
		vid := idString(voucher)
		if _, err := h.srv.store.DB().NewUpdate().Table("tb_seckill_voucher").Set("stock = 0").
			Where("voucher_id = ?", voucher).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		before := time.Now().Add(-time.Second).UTC()
		status, body := h.do("POST", "/api/vouchers/"+vid+"/seckill", h.shopper(7), nil)
		if status != 200 {
			t.Fatalf("buy: %d %v", status, body)
		}
		order := body["orderId"]
		list := "/api/admin/deadletters?reason=stock_anomaly&voucher=" + vid + "&since=" + url.QueryEscape(before.Format(time.RFC3339))
		var page map[string]any
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			status, page = h.do("GET", list, h.cfg.AdminToken, nil)
			if status != 200 {
				t.Fatalf("list: %d %v", status, page)
			}
			if items, _ := page["items"].([]any); len(items) > 0 || time.Now().After(deadline) {
				break
			}
		}
		items, _ := page["items"].([]any)
		if len(items) != 1 || page["open"] != float64(1) || page["nextCursor"] != nil {
			t.Fatalf("the register: %v; want the one refused order, open", page)
		}
		item := items[0].(map[string]any)
		if item["orderId"] != order || item["userId"] != "7" || item["voucherId"] != vid || item["backend"] != h.cfg.Queue ||
			item["reason"] != "stock_anomaly" || item["deliveries"].(float64) < 1 || item["redriven"] != float64(0) {
			t.Fatalf("the letter %v; want order %v of shopper 7 on %s, stock_anomaly", item, order, h.cfg.Queue)
		}
		checkDeadLetterShown(t, h, item["id"].(string), order.(string))
		for _, q := range []string{"voucher=" + vid + "&reason=poison", "voucher=" + idString(voucher+1),
			"voucher=" + vid + "&until=" + url.QueryEscape(before.Format(time.RFC3339)), "voucher=" + vid + "&state=resolved"} {
			if status, p := h.do("GET", "/api/admin/deadletters?"+q, h.cfg.AdminToken, nil); status != 200 ||
				len(p["items"].([]any)) != 0 {
				t.Fatalf("filtered by %s: %d %v, want none", q, status, p)
			}
		}
		if m := h.metricsText(); !strings.Contains(m, fmt.Sprintf("seckill_dead_letters_open{queue=%q} 1", h.cfg.Queue)) {
			t.Fatalf("/metrics does not count the letter open:\n%s", grepLines(m, "dead_letters"))
		}
	})
}

// checkDeadLetterShown: the letter reads back with the order as delivered;
// an unknown one is 404, bad requests 400, no token 401.
func checkDeadLetterShown(t *testing.T, h *harness, id, order string) {
	t.Helper()
	status, shown := h.do("GET", "/api/admin/deadletters/"+id, h.cfg.AdminToken, nil)
	if status != 200 {
		t.Fatalf("show: %d %v", status, shown)
	}
	o, err := core.DecodeOrder([]byte(shown["body"].(string)))
	if err != nil || idString(o.ID) != order || shown["source"] == "" || shown["position"] == "" {
		t.Fatalf("shown %v: body %v; want the order %s as delivered, and where it is", shown, err, order)
	}
	if status, body := h.do("GET", "/api/admin/deadletters/999999999", h.cfg.AdminToken, nil); status != 404 ||
		errorCode(body) != "dead_letter_not_found" {
		t.Fatalf("an unknown letter: %d %v", status, body)
	}
	for _, q := range []string{"reason=nope", "voucher=-1", "since=yesterday", "limit=0", "limit=1001", "cursor=x", "state=all"} {
		if status, body := h.do("GET", "/api/admin/deadletters?"+q, h.cfg.AdminToken, nil); status != 400 || errorCode(body) != "bad_request" {
			t.Fatalf("?%s: %d %v, want 400 bad_request", q, status, body)
		}
	}
	if status, _ := h.do("GET", "/api/admin/deadletters", h.shopper(7), nil); status != 401 {
		t.Fatalf("a shopper's token: %d, want 401", status)
	}
}

// TestDeadLettersAreRedrivenAndDiscardedOnEveryBackend: on every backend,
// three orders the database refuses (its stock column emptied under the
// sale) are dead-lettered. A dry run counts them; a re-drive while the
// cause stands skips them, counted; once the column is fixed one is
// re-driven (persisted once, whatever is asked again) and the other two
// discarded: their units go back on sale exactly once (a second discard
// returns nothing), their shoppers may buy again, and the sale adds up —
// Redis's stock and the stock column both the initial stock less the live
// rows.
func TestDeadLettersAreRedrivenAndDiscardedOnEveryBackend(t *testing.T) {
	forEachBackendAndStack(t, func(t *testing.T, h *harness) {
		if h.cfg.Queue == "sync" {
			t.Skip("sync has no queue: nothing is dead-lettered")
		}
		const stock = 5
		voucher := h.openVoucher(stock)
		vid := idString(voucher)
		orders := buyRefused(t, h, voucher, 1, 2, 3)
		letters := waitForLetters(t, h, "voucher="+vid, 3)
		admin := func(path string, body any) map[string]any {
			t.Helper()
			status, out := h.do("POST", "/api/admin/deadletters/"+path, h.cfg.AdminToken, body)
			if status != 200 {
				t.Fatalf("%s %v: %d %v", path, body, status, out)
			}
			return out
		}
		if out := admin("redrive", map[string]any{"voucher": vid, "dryRun": true}); out["matched"] != float64(3) {
			t.Fatalf("dry run: %v, want 3 matched", out)
		}
		if out := admin("redrive", map[string]any{"voucher": voucher}); out["redriven"] != float64(0) || out["skipped"] != float64(3) {
			t.Fatalf("re-drive while the column is empty: %v, want all 3 skipped", out)
		}
		setStockColumn(t, h, voucher, stock)
		first := letterOf(t, letters, orders[1])
		for range 2 {
			admin("redrive", map[string]any{"ids": []string{first}})
		}
		if out := admin("discard", map[string]any{"voucher": vid, "note": "refunded by hand"}); out["discarded"] != float64(2) {
			t.Fatalf("discard: %v, want the other 2", out)
		}
		if out := admin("discard", map[string]any{"voucher": vid}); out["discarded"] != float64(0) {
			t.Fatalf("a second discard: %v, want nothing left", out)
		}
		checkSaleAfterResolution(t, h, voucher, stock, orders)
	})
}

// buyRefused empties the voucher's stock column, so the database refuses
// its orders (they are dead-lettered), and has each user buy it; it
// returns their orders' ids.
func buyRefused(t *testing.T, h *harness, voucher int64, users ...int64) map[int64]string {
	t.Helper()
	setStockColumn(t, h, voucher, 0)
	orders := map[int64]string{}
	for _, user := range users {
		status, body := h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(user), nil)
		if status != 200 {
			t.Fatalf("buy: %d %v", status, body)
		}
		orders[user] = body["orderId"].(string)
	}
	return orders
}

func setStockColumn(t *testing.T, h *harness, voucher, stock int64) {
	t.Helper()
	if _, err := h.srv.store.DB().NewUpdate().Table("tb_seckill_voucher").Set("stock = ?", stock).
		Where("voucher_id = ?", voucher).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// waitForLetters waits for the register to list want open letters for
// query, and returns them.
func waitForLetters(t *testing.T, h *harness, query string, want int) []any {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		status, page := h.do("GET", "/api/admin/deadletters?"+query, h.cfg.AdminToken, nil)
		items, _ := page["items"].([]any)
		if status == 200 && len(items) == want {
			return items
		}
		if time.Now().After(deadline) {
			t.Fatalf("the register lists %d %v, want %d", status, page, want)
		}
	}
}

// letterOf is the id of the letter of order among letters.
func letterOf(t *testing.T, letters []any, order string) string {
	t.Helper()
	for _, l := range letters {
		if m := l.(map[string]any); m["orderId"] == order {
			return m["id"].(string)
		}
	}
	t.Fatalf("no letter of order %s in %v", order, letters)
	return ""
}

// checkSaleAfterResolution: shopper 1's order is persisted once and
// theirs; shoppers 2 and 3 hold cancelled (discarded) orders and can buy
// again; Redis's stock and the stock column agree with the live rows; the
// resolved letters say how; /metrics counts them.
func checkSaleAfterResolution(t *testing.T, h *harness, voucher, stock int64, orders map[int64]string) {
	t.Helper()
	vid := idString(voucher)
	for user, want := range map[int64]string{1: "created", 2: "cancelled", 3: "cancelled"} {
		status, body := h.do("GET", "/api/vouchers/"+vid+"/order", h.shopper(user), nil)
		if status != 200 || body["orderId"] != orders[user] || body["status"] != want {
			t.Fatalf("shopper %d's order: %d %v, want %s %s", user, status, body, orders[user], want)
		}
	}
	var live, column int64
	db := h.srv.store.DB()
	ctx := context.Background()
	if err := db.NewSelect().Table("tb_voucher_order").ColumnExpr("COUNT(*)").Where("voucher_id = ? AND status IN (1, 2)", voucher).Scan(ctx, &live); err != nil {
		t.Fatal(err)
	}
	if err := db.NewSelect().Table("tb_seckill_voucher").Column("stock").Where("voucher_id = ?", voucher).Scan(ctx, &column); err != nil {
		t.Fatal(err)
	}
	_, v := h.do("GET", "/api/vouchers/"+vid, "", nil)
	if live != 1 || column != stock-1 || v["stock"] != float64(stock-1) {
		t.Fatalf("live rows %d, stock column %d, Redis's stock %v; want 1, %d, %d", live, column, v["stock"], stock-1, stock-1)
	}
	if status, body := h.do("POST", "/api/vouchers/"+vid+"/seckill", h.shopper(2), nil); status != 200 {
		t.Fatalf("shopper 2 buying again after the discard: %d %v", status, body)
	}
	_, page := h.do("GET", "/api/admin/deadletters?state=resolved&voucher="+vid, h.cfg.AdminToken, nil)
	how := map[string]int{}
	for _, l := range page["items"].([]any) {
		m := l.(map[string]any)
		how[m["resolved"].(string)]++
		if m["resolved"] == "discarded" && m["note"] != "refunded by hand" {
			t.Fatalf("a discarded letter without its note: %v", m)
		}
	}
	if how["redriven"] != 1 || how["discarded"] != 2 || page["open"] != float64(0) {
		t.Fatalf("resolved letters %v, %v open; want 1 redriven, 2 discarded, none open", how, page["open"])
	}
	if m := h.metricsText(); !strings.Contains(m, fmt.Sprintf(`seckill_dead_letters_resolved_total{how="discarded",queue=%q} 2`, h.cfg.Queue)) {
		t.Fatalf("/metrics:\n%s", grepLines(m, "dead_letters"))
	}
}

// TestTheDashboardWorksDeadLettersInABrowser: in Chromium, the dashboard's
// dead-letter panel lists a voucher's refused orders (filtered by voucher
// and kind on the server), shows one letter's message, and re-drives and
// discards only after a confirmation that shows the dry run's count;
// cancelling changes nothing. The page logs no error. Screenshots saved.
func TestTheDashboardWorksDeadLettersInABrowser(t *testing.T) {
	h := startServer(t, "embedded", nil)
	b := newBrowser(t)
	voucher := h.openVoucher(5)
	vid := idString(voucher)
	buyRefused(t, h, voucher, 1, 2, 3)
	letters := waitForLetters(t, h, "voucher="+vid, 3)
	p := b.page()
	b.open(p, "open /dashboard", h.base+"/dashboard")
	b.input(p, "#admin-token", h.cfg.AdminToken)
	b.waitJS(p, "the figures are shown", `document.getElementById('voucher-table').dataset.loaded === '1'`)
	openFigure := `[...document.querySelectorAll('dt')].find((d) => d.textContent === 'dead letters open')?.nextElementSibling.textContent`
	b.waitJS(p, "the letters open are the register's, not all time's", openFigure+` === '3'`)
	b.input(p, "#dead-voucher", vid)
	must(t, p.MustElement("#dead-reason").Select([]string{"stock_anomaly"}, true, rod.SelectorTypeText))
	b.click(p, "#dead-show")
	b.waitJS(p, "the letters are listed", `document.querySelectorAll('#dead-table tbody tr').length === 3`)
	if got := b.text(p, "#dead-open"); got != "3 open match the filter" {
		t.Fatalf("the open count: %q", got)
	}
	first := letters[0].(map[string]any)
	b.click(p, `#dead-table tr[data-letter="`+first["id"].(string)+`"]`)
	b.waitJS(p, "the letter is shown", `document.getElementById('dead-detail').textContent.includes('"body"')`)
	b.screenshot(p, "dashboard-deadletters", 1280, 1600, false)

	b.click(p, "#dead-discard")
	b.waitJS(p, "the discard asks first", `!document.getElementById('dead-confirm').hidden`)
	if got := b.text(p, "#dead-confirm-text"); !strings.HasPrefix(got, "Discard 3 open letters?") {
		t.Fatalf("the confirmation says %q", got)
	}
	b.click(p, "#dead-confirm-no")
	setStockColumn(t, h, voucher, 5)
	b.click(p, "#dead-redrive")
	b.waitJS(p, "the re-drive asks first", `document.getElementById('dead-confirm-text').textContent.startsWith('Re-drive 3 open letters?')`)
	b.screenshot(p, "dashboard-deadletters-confirm", 1280, 1600, false)
	b.click(p, "#dead-confirm-yes")
	b.waitJS(p, "the re-drive is done", `document.getElementById('dead-detail').textContent.includes('"redriven": 3')`)
	b.waitJS(p, "none left open", `document.getElementById('dead-open').textContent === '0 open match the filter'`)
	b.waitJS(p, "the figure follows", openFigure+` === '0'`)
	if n := h.waitForRows(voucher, 3, 5*time.Second); n != 3 {
		t.Fatalf("%d rows after the re-drive, want 3", n)
	}
	b.clean()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTheDriftAuditSeesUnitsHeldByNobody: dead-lettered orders whose
// stock column is then put right hold units in Redis that their open
// letters account for (nothing to report); letters resolved behind the
// desk's back (by hand in the database) leave those units held by nobody:
// the drift audit reports them once seen twice running, and a reconcile
// puts them back on sale and the report to nothing.
func TestTheDriftAuditSeesUnitsHeldByNobody(t *testing.T) {
	h := startServer(t, "embedded", nil)
	ctx := context.Background()
	voucher := h.openVoucher(5)
	vid := idString(voucher)
	buyRefused(t, h, voucher, 1, 2, 3)
	waitForLetters(t, h, "voucher="+vid, 3)
	setStockColumn(t, h, voucher, 5) // right again: 5 initial, no live row
	var drift core.Duty
	for _, d := range h.srv.background.watchers {
		if d.Name == "drift audit" {
			drift = d
		}
	}
	if drift.Do == nil {
		t.Fatal("no drift audit among the server's watchers")
	}
	unheld := func(want string) {
		t.Helper()
		for range 2 {
			if err := drift.Do(ctx); err != nil {
				t.Fatal(err)
			}
		}
		m := h.metricsText()
		if !strings.Contains(m, `seckill_units_unheld{queue="streamgroup"} `+want+"\n") {
			t.Fatalf("want %s units held by nobody:\n%s", want, grepLines(m, "unheld"))
		}
	}
	unheld("0")
	if _, err := h.srv.store.DB().NewUpdate().Table("tb_dead_letter").Set("resolved = 'discarded'").Set("resolved_time = ?", time.Now().UTC()).
		Where("voucher_id = ?", voucher).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	unheld("3")
	if status, out := h.do("POST", "/api/admin/vouchers/"+vid+"/reconcile", h.cfg.AdminToken, nil); status != 200 {
		t.Fatalf("reconcile: %d %v", status, out)
	}
	unheld("0")
}

// TestPoisonIsListedSkippedAndDiscardedOnEveryBackend: on every backend a
// message that is not an order, fed where the reservation feeds the
// queue (a Redis queue's key, an outside broker's outbox, the in-process
// channel), is dead-lettered as poison and listed with no order; a
// re-drive skips it (nothing to persist), a discard resolves it and
// returns nothing: the sale's stock is untouched.
func TestPoisonIsListedSkippedAndDiscardedOnEveryBackend(t *testing.T) {
	forEachBackendAndStack(t, func(t *testing.T, h *harness) {
		if h.srv.queue == nil {
			t.Skip("sync has no queue: nothing is dead-lettered")
		}
		caps := core.CapabilitiesOf(h.srv.queue)
		ctx := context.Background()
		voucher := h.openVoucher(5)
		body := "poison " + idString(voucher)
		if caps.Handoff != nil {
			var args []any
			for _, a := range caps.Handoff.Command {
				switch a {
				case core.HandoffKey:
					args = append(args, caps.Handoff.Key(voucher))
				case core.HandoffBody:
					args = append(args, body)
				default:
					args = append(args, a)
				}
			}
			if err := h.srv.rdb.Do(ctx, args...).Err(); err != nil {
				t.Fatal(err)
			}
		} else if err := caps.Publisher.Publish(ctx, []byte(body)); err != nil {
			t.Fatal(err)
		}
		letters := waitForLetters(t, h, "reason=poison", 1)
		if l := letters[0].(map[string]any); l["orderId"] != nil || l["voucherId"] != nil {
			t.Fatalf("the poison letter %v names an order", l)
		}
		if status, out := h.do("POST", "/api/admin/deadletters/redrive", h.cfg.AdminToken, map[string]any{"reason": "poison"}); status != 200 ||
			out["redriven"] != float64(0) || out["skipped"] != float64(1) {
			t.Fatalf("re-drive: %d %v, want it skipped", status, out)
		}
		if status, out := h.do("POST", "/api/admin/deadletters/discard", h.cfg.AdminToken, map[string]any{"reason": "poison"}); status != 200 ||
			out["discarded"] != float64(1) {
			t.Fatalf("discard: %d %v", status, out)
		}
		if _, v := h.do("GET", "/api/vouchers/"+idString(voucher), "", nil); v["stock"] != float64(5) {
			t.Fatalf("the voucher's stock after the poison was discarded: %v, want 5", v["stock"])
		}
	})
}

// TestADeadLetteredOrderReadsHeldToItsShopper: an order a consumer
// dead-lettered reads held, to its shopper only, by the voucher and by its
// id (the operator's run read queued until someone acted, or 404), also
// once a reconcile dealt the live sale anew from the database, which never
// had it; re-driven, it reads created.
func TestADeadLetteredOrderReadsHeldToItsShopper(t *testing.T) {
	forEachStack(t, nil, func(t *testing.T, h *harness) {
		voucher := h.openVoucher(5)
		orders := buyRefused(t, h, voucher, 1)
		waitForLetters(t, h, "voucher="+idString(voucher), 1)
		byVoucher := func() map[string]any {
			status, body := h.do("GET", "/api/vouchers/"+idString(voucher)+"/order", h.shopper(1), nil)
			if status != 200 {
				t.Fatalf("the shopper's order of the voucher: %d %v", status, body)
			}
			return body
		}
		if got := byVoucher(); got["status"] != "held" || got["orderId"] != orders[1] {
			t.Fatalf("a dead-lettered order read by its voucher: %v, want held", got)
		}
		if status, body := h.do("GET", "/api/orders/"+orders[1], h.shopper(1), nil); status != 200 || body["status"] != "held" {
			t.Fatalf("a dead-lettered order read by its id: %d %v, want held", status, body)
		}
		if status, body := h.do("GET", "/api/orders/"+orders[1], h.shopper(2), nil); status != 404 {
			t.Fatalf("another shopper reads the held order: %d %v", status, body)
		}
		if status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/reconcile", h.cfg.AdminToken, nil); status != 200 {
			t.Fatalf("reconcile: %d %v", status, body)
		}
		if got := byVoucher(); got["status"] != "held" || got["orderId"] != orders[1] {
			t.Fatalf("after the live sale was dealt anew from the database: %v, want held", got)
		}
		setStockColumn(t, h, voucher, 5) // the cause fixed, and the live sale dealt from it
		if status, body := h.do("POST", "/api/admin/vouchers/"+idString(voucher)+"/reconcile", h.cfg.AdminToken, nil); status != 200 {
			t.Fatalf("reconcile: %d %v", status, body)
		}
		persisted := regexp.MustCompile(`(?m)^seckill_orders_persisted_total\{[^}]*\} (\d+)$`)
		before := persisted.FindStringSubmatch(h.metricsText())
		if status, body := h.do("POST", "/api/admin/deadletters/redrive", h.cfg.AdminToken, map[string]any{"voucher": idString(voucher)}); status != 200 || body["redriven"] != 1.0 {
			t.Fatalf("re-drive: %d %v", status, body)
		}
		if got := byVoucher(); got["status"] != "created" {
			t.Fatalf("re-driven, the order reads %v, want created", got)
		}
		// The re-driven order counts with the consumers' persisted orders
		// (the metric and the dashboard left it out).
		after := persisted.FindStringSubmatch(h.metricsText())
		if before == nil || after == nil || mustAtoi(t, after[1]) != mustAtoi(t, before[1])+1 {
			t.Fatalf("seckill_orders_persisted_total %v before the re-drive, %v after: want one more", before, after)
		}
	})
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
