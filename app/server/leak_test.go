package server

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestStopLeavesNothingRunning: after a sale, Serve's stop and Close leave
// no goroutine of the server behind — no watcher, listener, consumer, duty
// or pool — on either stack and for every backend.
func TestStopLeavesNothingRunning(t *testing.T) {
	for _, b := range builtinBackends {
		for _, stack := range []string{"embedded", "real"} {
			t.Run(b.Name+"/"+stack, func(t *testing.T) {
				cfg := testConfig()
				cfg.Queue = b.Name
				if stack == "real" {
					// The test's own connections (a Redis client, the admin
					// pool that drops the database) are made before the
					// snapshot: they live until the test's cleanup.
					useRealServers(t, &cfg)
				}
				useTestBrokers(t, &cfg) // a kfake cluster's goroutines are the test's
				before := goleak.IgnoreCurrent()
				h := startWith(t, cfg)
				voucher := h.openVoucher(3)
				for u := int64(1); u <= 5; u++ {
					h.do("POST", "/api/vouchers/"+idString(voucher)+"/seckill", h.shopper(u), nil)
				}
				h.waitForRows(voucher, 3, 10*time.Second)
				h.shutdown()
				h.srv.Close()
				h.client.CloseIdleConnections()
				goleak.VerifyNone(t, before,
					// The test's own HTTP client: its connections end as the
					// server's side closes them.
					goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
					goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
					// fasthttp's idle-worker cleaner sees its stop only after
					// its sleep (MaxIdleWorkerDuration, 10 s); it then exits.
					goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
					// fasthttp's clock of the Date header: one per process,
					// started by the first server, by design never stopped.
					goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
				)
			})
		}
	}
}
