package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/app/server"
)

// TestTheDeadLettersCommandWorksARunningInstance: against a server on the
// embedded stand-ins holding two dead letters (orders its database
// refused), `seckill deadletters` lists them (every page, one letter a
// page), shows one, counts a dry run, re-drives one once the cause is
// fixed and discards the other; it refuses a discard with no filter, and
// runs without a token or with a bad -addr refuse with status 2.
func TestTheDeadLettersCommandWorksARunningInstance(t *testing.T) {
	const admin, jwt = "cli-test-admin-0123456789", "cli-test-jwt-0123456789abcdef"
	cfg, err := server.LoadConfig(func(name string) (string, bool) {
		v, ok := map[string]string{"SECKILL_ADDR": "127.0.0.1:0", "SECKILL_ADMIN_TOKEN": admin, "SECKILL_JWT_SECRET": jwt,
			"SECKILL_DEMO_SALE": "0"}[name]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { stop(); <-done; srv.Close() })
	addr := ln.Addr().String()
	voucher := refusedOrders(t, srv, "http://"+addr, admin, jwt, 2)

	env := func(name string) string {
		return map[string]string{"SECKILL_ADMIN_TOKEN": admin, "SECKILL_ADDR": addr}[name]
	}
	run := func(want int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if status := runDeadLetters(args, env, &stdout, &stderr); status != want {
			t.Fatalf("seckill deadletters %v: status %d, want %d\n%s%s", args, status, want, stdout.String(), stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	var listed string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if listed = run(0, "list", "-all", "-limit", "1", "-voucher", voucher); strings.Contains(listed, "2 open") || time.Now().After(deadline) {
			break
		}
	}
	if strings.Count(listed, "stock_anomaly") != 2 || !strings.Contains(listed, "2 open") {
		t.Fatalf("list, a letter a page, every page:\n%s", listed)
	}
	if out := run(0, "show", "1"); !strings.Contains(out, `"body"`) || !strings.Contains(out, `"position"`) {
		t.Fatalf("show 1:\n%s", out)
	}
	if out := run(0, "redrive", "-voucher", voucher, "-dry-run"); !strings.Contains(out, "2 match") {
		t.Fatalf("redrive -dry-run:\n%s", out)
	}
	// Tried while the cause stands: refused, not "skipped" (the
	// operator's run read a refusal as skipped).
	if out := run(0, "redrive", "-ids", "2"); !strings.Contains(out, "0 re-driven, 1 refused (tried: each letter stays open and says why), 0 not tried") {
		t.Fatalf("redrive -ids 2 while the stock column is empty:\n%s", out)
	}
	if _, err := srv.TestHooks().Database().NewUpdate().Table("tb_seckill_voucher").Set("stock = 5").Where("voucher_id = ?", voucher).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if out := run(0, "redrive", "-ids", "1"); !strings.Contains(out, "1 re-driven, 0 refused") {
		t.Fatalf("redrive -ids 1:\n%s", out)
	}
	if out := run(1, "discard"); !strings.Contains(out, "a discard needs a filter or ids") {
		t.Fatalf("discard with no filter:\n%s", out)
	}
	if out := run(0, "discard", "-voucher", voucher, "-note", "refunded"); !strings.Contains(out, "1 discarded") {
		t.Fatalf("discard:\n%s", out)
	}
	if out := run(0, "list", "-resolved", "-voucher", voucher); strings.Count(out, " stock_anomaly ") != 2 ||
		!strings.Contains(out, "RESOLVED") || !strings.Contains(out, "redriven") || !strings.Contains(out, "discarded") || !strings.Contains(out, "refunded") {
		t.Fatalf("list -resolved, want how, when and the note:\n%s", out)
	}
	run(2, "list", "-addr", "nowhere")
	var stderr bytes.Buffer
	if status := runDeadLetters([]string{"list"}, func(string) string { return "" }, io.Discard, &stderr); status != 2 ||
		!strings.Contains(stderr.String(), "SECKILL_ADMIN_TOKEN") {
		t.Fatalf("without a token: %d %s", status, stderr.String())
	}
}

// refusedOrders opens a voucher whose stock column is then emptied, so
// the database refuses its orders, and has n shoppers buy it; it returns
// the voucher's id.
func refusedOrders(t *testing.T, srv *server.Server, base, admin, jwt string, n int) string {
	t.Helper()
	now := time.Now().UTC()
	var voucher struct {
		ID json.Number `json:"id"`
	}
	post(t, base+"/api/admin/vouchers", admin, map[string]any{"title": "cli", "payValue": 1, "actualValue": 2, "stock": 5,
		"beginTime": now.Add(-time.Minute), "endTime": now.Add(time.Hour)}, &voucher)
	if _, err := srv.TestHooks().Database().NewUpdate().Table("tb_seckill_voucher").Set("stock = 0").
		Where("voucher_id = ?", voucher.ID.String()).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	for user := range n {
		token, _ := server.NewTokens([]byte(jwt), 0).Issue(int64(user+1), now)
		var order map[string]any
		post(t, base+"/api/vouchers/"+voucher.ID.String()+"/seckill", token, nil, &order)
	}
	return voucher.ID.String()
}

func post(t *testing.T, url, token string, body, out any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, got)
	}
	if err := json.Unmarshal(got, out); err != nil {
		t.Fatalf("POST %s: %v: %s", url, err, got)
	}
}

// TestTheDeadLettersCommandPrintsNoControlCharacter: a letter's text is
// anyone's. The review's reason "poison: \e[2J\e[H\e[32mno open dead
// letters\e[8m" cleared the operator's screen and hid what followed. In
// every command's output (the table, -json, show, an error) every control
// character but the layout's newlines and tabs comes out escaped: no ESC,
// CSI, DEL or bidirectional override reaches the terminal.
func TestTheDeadLettersCommandPrintsNoControlCharacter(t *testing.T) {
	const hostile = "poison: \x1b[2J\x1b[H\x1b[32mno open dead letters\x1b[8m\u009b2J\x7f\u202egnp.exe\ttab\nline"
	letter := map[string]any{"id": "1", "reason": "poison", "error": hostile, "orderId": nil, "userId": nil, "voucherId": nil,
		"deliveries": 1, "redriven": 0, "firstFailedAt": "2026-12-07T00:00:00Z", "backend": "\x1b]0;owned\x07", "body": hostile}
	api := http.NewServeMux()
	api.HandleFunc("GET /api/admin/deadletters", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"items": []any{letter}, "nextCursor": nil, "open": 1})
	})
	api.HandleFunc("GET /api/admin/deadletters/{id}", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(letter)
	})
	api.HandleFunc("POST /api/admin/deadletters/redrive", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, hostile)
	})
	srv := httptest.NewServer(api)
	defer srv.Close()
	env := func(name string) string {
		return map[string]string{"SECKILL_ADMIN_TOKEN": "t", "SECKILL_ADDR": srv.URL}[name]
	}
	for _, args := range [][]string{{"list"}, {"list", "-json"}, {"show", "1"}, {"redrive", "-voucher", "1"}} {
		var stdout, stderr bytes.Buffer
		runDeadLetters(args, env, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		for _, bad := range []string{"\x1b", "\u009b", "\x7f", "\u202e", "\x07"} {
			if strings.Contains(out, bad) {
				t.Errorf("seckill deadletters %v printed %q raw:\n%q", args, bad, out)
			}
		}
		if !strings.Contains(out, `\u001b[2J`) && !strings.Contains(out, `\\u001b[2J`) {
			t.Errorf("seckill deadletters %v: the escape is not shown escaped:\n%q", args, out)
		}
	}
}
