package server

import (
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// blackhole forwards TCP connections to a backend until hold: from then on
// every byte either way is swallowed and the connections stay open — a
// network partition without a reset, the fault where only deadlines help.
type blackhole struct {
	ln      net.Listener
	backend string
	holding atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func startBlackhole(t *testing.T, backend string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, backend: backend}
	go b.serve()
	t.Cleanup(b.close)
	return b
}

func (b *blackhole) addr() string { return b.ln.Addr().String() }
func (b *blackhole) hold()        { b.holding.Store(true) }

func (b *blackhole) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", b.backend)
		if err != nil {
			c.Close()
			continue
		}
		b.mu.Lock()
		b.conns = append(b.conns, c, up)
		b.mu.Unlock()
		go b.pipe(up, c)
		go b.pipe(c, up)
	}
}

// pipe copies src to dst while not holding, and swallows it after.
func (b *blackhole) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.holding.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close stops the proxy and resets every connection through it (closing
// twice is harmless).
func (b *blackhole) close() {
	b.ln.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
	b.conns = nil
}

// TestADependencyThatStopsAnsweringCostsARequestItsDeadline: Redis, then
// MySQL, stop answering without closing their connections. Every request
// that needs them is answered 503 unavailable with Retry-After within its
// deadline (SECKILL_REQUEST_TIMEOUT, 500 ms here) instead of hanging until
// the client gives up; nothing is reserved for a request that timed out.
func TestADependencyThatStopsAnsweringCostsARequestItsDeadline(t *testing.T) {
	const deadline = 500 * time.Millisecond
	for _, dep := range []string{"redis", "mysql"} {
		t.Run(dep, func(t *testing.T) {
			var hole *blackhole
			h := startServer(t, "real", func(c *Config) {
				c.RequestTimeout = deadline
				if dep == "redis" {
					u, _ := url.Parse(c.RedisURL)
					hole = startBlackhole(t, u.Host)
					u.Host = hole.addr()
					c.RedisURL = u.String()
				} else {
					at := strings.Index(c.MySQLDSN, "tcp(") + len("tcp(")
					end := strings.Index(c.MySQLDSN[at:], ")") + at
					hole = startBlackhole(t, c.MySQLDSN[at:end])
					c.MySQLDSN = c.MySQLDSN[:at] + hole.addr() + c.MySQLDSN[end:]
				}
			})
			// Before the server's stop: its connections reset, so the stop
			// does not wait out the fault.
			t.Cleanup(hole.close)
			voucher := h.openVoucher(100)
			path := "/api/vouchers/" + idString(voucher)
			status, body := h.do("POST", path+"/seckill", h.shopper(1), nil)
			if status != 200 {
				t.Fatalf("before the fault: %d %v", status, body)
			}
			order := body["orderId"].(string)
			h.waitForRows(voucher, 1, 10*time.Second)
			hole.hold()
			requests := map[string]string{
				"seckill":      "POST " + path + "/seckill",
				"order status": "GET " + path + "/order",
				"order":        "GET /api/orders/" + order,
			}
			var wg sync.WaitGroup
			for name, req := range requests {
				for u := int64(2); u <= 6; u++ {
					wg.Go(func() {
						method, p, _ := strings.Cut(req, " ")
						start := time.Now()
						status, body, header := h.doWithHeader(method, p, h.shopper(u))
						took := time.Since(start)
						if status == 503 && errorCode(body) == "unavailable" && header.Get("Retry-After") != "" && took < deadline+time.Second {
							return
						}
						// What needs neither dependency may still succeed.
						if status < 500 && !(dep == "redis" && name == "seckill") {
							return
						}
						t.Errorf("%s with %s not answering: %d %v (Retry-After %q) after %v; want 503 unavailable with Retry-After within %v",
							name, dep, status, body, header.Get("Retry-After"), took.Round(time.Millisecond), deadline+time.Second)
					})
				}
			}
			wg.Wait()
		})
	}
}
