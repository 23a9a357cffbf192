package server

import (
	"net"
	"net/netip"
	"sync"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/core"
)

// perAddressListener caps the connections one client address holds open
// (SECKILL_MAX_CONNS_PER_IP): the review held 500 keep-alive connections
// from one address (27 → 528 file descriptors). A connection past the cap
// is closed as soon as it is accepted; a trusted proxy
// (SECKILL_TRUSTED_PROXIES) is not capped, since it carries many clients —
// behind it, perAddressRequests caps each forwarded address instead.
type perAddressListener struct {
	net.Listener
	max     int
	trusted func(netip.Addr) bool
	mu      sync.Mutex
	open    map[netip.Addr]int
}

func newPerAddressListener(ln net.Listener, max int, trusted func(netip.Addr) bool) net.Listener {
	if max <= 0 {
		return ln
	}
	return &perAddressListener{Listener: ln, max: max, trusted: trusted, open: map[netip.Addr]int{}}
}

// Accept returns the next connection within its address's cap.
func (l *perAddressListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := addressOf(c.RemoteAddr())
		if !addr.IsValid() || l.trusted(addr) {
			return c, nil
		}
		l.mu.Lock()
		full := l.open[addr] >= l.max
		if !full {
			l.open[addr]++
		}
		l.mu.Unlock()
		if full {
			c.Close()
			continue
		}
		return &countedConn{Conn: c, release: func() { l.release(addr) }}, nil
	}
}

func (l *perAddressListener) release(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[addr]--; l.open[addr] <= 0 {
		delete(l.open, addr)
	}
}

// countedConn gives its place back once, when it closes.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

func addressOf(a net.Addr) netip.Addr {
	if tcp, ok := a.(*net.TCPAddr); ok {
		addr, _ := netip.AddrFromSlice(tcp.IP)
		return addr.Unmap()
	}
	return netip.Addr{}
}

// perAddressRequests caps, behind a trusted proxy, the requests one
// forwarded client address has in flight at once at clients.maxInFlight
// (503 busy with Retry-After past it): the proxy's connections are shared,
// so the cap a direct client gets on its connections falls on its
// requests.
func perAddressRequests(clients *clientAddresses) fiber.Handler {
	max := clients.maxInFlight
	if max <= 0 || len(clients.trusted) == 0 {
		return func(c *fiber.Ctx) error { return c.Next() }
	}
	var mu sync.Mutex
	inFlight := map[string]int{}
	return func(c *fiber.Ctx) error {
		peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
		if !clients.isTrusted(peer) {
			return c.Next() // a direct client: its connections are capped
		}
		key := clients.limitKey(c)
		mu.Lock()
		full := inFlight[key] >= max
		if !full {
			inFlight[key]++
		}
		mu.Unlock()
		if full {
			c.Set(fiber.HeaderRetryAfter, "1")
			return core.E(core.CodeBusy, "too many requests in flight from this address")
		}
		defer func() {
			mu.Lock()
			if inFlight[key]--; inFlight[key] <= 0 {
				delete(inFlight, key)
			}
			mu.Unlock()
		}()
		return c.Next()
	}
}
