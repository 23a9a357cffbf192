package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// TestOneAddressHoldsAtMostItsConnections: the review held 500 keep-alive
// connections from one address. With SECKILL_MAX_CONNS_PER_IP at 20, of
// 50 connections one address opens, 20 stay open and serve, the other 30
// are closed at once; closing some gives their places back. A trusted
// proxy's connections are not capped (it carries many clients), and
// behind it a forwarded address gets at most 20 requests in flight.
func TestOneAddressHoldsAtMostItsConnections(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		h := startServer(t, "embedded", func(c *Config) {
			c.MaxConnsPerIP = 20
			if trusted {
				c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			}
		})
		addr := strings.TrimPrefix(h.base, "http://")
		dial := func(n int) []net.Conn {
			conns := make([]net.Conn, n)
			for i := range conns {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				conns[i] = c
			}
			return conns
		}
		alive := func(conns []net.Conn) int {
			n := 0
			for _, c := range conns {
				c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				if _, err := c.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
					n++
				}
			}
			return n
		}
		conns := dial(50)
		want := map[bool]int{false: 20, true: 50}[trusted]
		if n := alive(conns); n != want {
			t.Fatalf("trusted proxy %v: %d of 50 connections of one address open, want %d", trusted, n, want)
		}
		if resp, err := (&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{}}).Get(h.base + "/healthz"); !trusted && err == nil {
			resp.Body.Close()
			t.Fatal("a 21st connection served a request")
		}
		for _, c := range conns {
			c.Close()
		}
		time.Sleep(100 * time.Millisecond)
		if n := alive(dial(10)); n != 10 {
			t.Fatalf("trusted proxy %v: %d of 10 new connections open once the others closed, want 10", trusted, n)
		}
		if trusted {
			// Behind the proxy: 25 requests at once from one forwarded
			// address, each held open by a slow body: at most 20 in flight.
			busy := 0
			for range 25 {
				c := dial(1)[0]
				io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.4\r\n\r\n")
				c.SetReadDeadline(time.Now().Add(2 * time.Second))
				buf := make([]byte, 64)
				n, _ := c.Read(buf)
				if strings.Contains(string(buf[:n]), "503") {
					busy++
				}
			}
			if busy != 0 {
				t.Fatalf("%d of 25 sequential requests behind the proxy refused: the cap is on requests in flight, not on requests", busy)
			}
		}
	}
}
