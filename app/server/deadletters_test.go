package server

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

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
