package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/app/server"
)

// TestTheSaleCommandSteersARunningInstance: against a server on the
// embedded stand-ins, `seckill sale` pauses a voucher (a seckill is then
// refused, paused), resumes it, flips the kill switch on and off, and lists
// the record with the operator it named; a wrong id, a missing token and
// an unknown command are refused with status 2.
func TestTheSaleCommandSteersARunningInstance(t *testing.T) {
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
	base := "http://" + ln.Addr().String()
	now := time.Now().UTC()
	var voucher struct {
		ID json.Number `json:"id"`
	}
	post(t, base+"/api/admin/vouchers", admin, map[string]any{"title": "cli", "payValue": 1, "actualValue": 2, "stock": 5,
		"beginTime": now.Add(-time.Minute), "endTime": now.Add(time.Hour)}, &voucher)
	id := voucher.ID.String()

	env := func(name string) string {
		return map[string]string{"SECKILL_ADMIN_TOKEN": admin, "SECKILL_ADDR": ln.Addr().String(), "USER": "ops"}[name]
	}
	run := func(want int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if status := runSale(args, env, &stdout, &stderr); status != want {
			t.Fatalf("seckill sale %v: status %d, want %d\n%s%s", args, status, want, stdout.String(), stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	seckill := func() string {
		token, _ := server.NewTokens([]byte(jwt), 0).Issue(7, time.Now())
		req, _ := http.NewRequest("POST", base+"/api/vouchers/"+id+"/seckill", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		if e, ok := body["error"].(map[string]any); ok {
			return e["code"].(string)
		}
		return "ok"
	}
	if out := run(0, "pause", id, "-note", "bots", "-operator", "bob"); !strings.Contains(out, "paused") {
		t.Fatalf("pause:\n%s", out)
	}
	if got := seckill(); got != "paused" {
		t.Fatalf("a seckill after `seckill sale pause`: %s, want paused", got)
	}
	if out := run(0, "resume", id); !strings.Contains(out, "on_sale") {
		t.Fatalf("resume:\n%s", out)
	}
	if out := run(0, "stock", id, "-delta", "3"); !strings.Contains(out, "8 left") {
		t.Fatalf("stock +3 of 5:\n%s", out)
	}
	if out := run(1, "stock", id, "-delta", "-9"); !strings.Contains(out, "not_enough_stock") {
		t.Fatalf("stock -9 of 8:\n%s", out)
	}
	if out := run(0, "kill", "-note", "incident"); !strings.Contains(out, "1 voucher(s) paused") {
		t.Fatalf("kill:\n%s", out)
	}
	if got := seckill(); got != "paused" {
		t.Fatalf("a seckill under the kill switch: %s, want paused", got)
	}
	if out := run(0, "revive"); !strings.Contains(out, "1 voucher(s) resumed") {
		t.Fatalf("revive:\n%s", out)
	}
	if got := seckill(); got != "ok" {
		t.Fatalf("a seckill after the switch is off: %s", got)
	}
	if out := run(0, "consumers", "pause", "-note", "MySQL failover"); !strings.Contains(out, "consumers paused, no cap") {
		t.Fatalf("consumers pause:\n%s", out)
	}
	if out := run(0, "consumers", "rate", "40"); !strings.Contains(out, "consumers paused, at most 40 orders a second") {
		t.Fatalf("consumers rate:\n%s", out)
	}
	if out := run(0, "consumers", "resume"); !strings.Contains(out, "consumers running, at most 40") {
		t.Fatalf("consumers resume:\n%s", out)
	}
	if out := run(0, "consumers"); !strings.Contains(out, "(version 3)") {
		t.Fatalf("consumers:\n%s", out)
	}
	run(2, "consumers", "rate", "-5")
	run(2, "consumers", "stop")
	if out := run(0, "actions"); !strings.Contains(out, "consumers_pause") || !strings.Contains(out, "MySQL failover") {
		t.Fatalf("actions after the consumers':\n%s", out)
	}
	out := run(0, "actions", "-voucher", id)
	if !strings.Contains(out, "bob\tpause") || !strings.Contains(out, "bots") || !strings.Contains(out, "ops\tresume") {
		t.Fatalf("actions:\n%s", out)
	}
	run(2, "pause", "twelve")
	run(2, "frobnicate")
	var stderr bytes.Buffer
	if status := runSale([]string{"kill"}, func(string) string { return "" }, &stderr, &stderr); status != 2 ||
		!strings.Contains(stderr.String(), "SECKILL_ADMIN_TOKEN") {
		t.Fatalf("without a token: %d %s", status, stderr.String())
	}
}
