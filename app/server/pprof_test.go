package server

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// TestProfilerServesOnItsOwnAddressAndStops: SECKILL_PPROF_ADDR's listener
// answers the pprof index, and is closed when the server stops.
func TestProfilerServesOnItsOwnAddressAndStops(t *testing.T) {
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := servePprof(ctx, addr, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("pprof index: %d", resp.StatusCode)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := client.Get("http://" + addr + "/debug/pprof/")
		if err != nil {
			return
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("the profiler still answers after the stop")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
