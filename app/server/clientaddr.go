package server

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// clientAddresses tells who a request comes from, for the per-address
// limits. Behind a load balancer the peer is the balancer, so the client
// is read from the proxy header — but only when the peer is a trusted
// proxy (SECKILL_TRUSTED_PROXIES), and from the right: each proxy appends
// the address it saw, so the rightmost entry that is not itself a trusted
// proxy is the first one no client could have written. (Fiber's c.IP()
// takes the leftmost, which the client sets at will.)
type clientAddresses struct {
	header  string
	trusted []netip.Prefix
	// maxInFlight caps a forwarded address's requests in flight behind a
	// trusted proxy (SECKILL_MAX_CONNS_PER_IP; 0: no cap).
	maxInFlight int
}

// parseTrustedProxies reads SECKILL_TRUSTED_PROXIES: addresses and CIDR
// ranges, comma-separated.
func parseTrustedProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR range", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

func (ca *clientAddresses) isTrusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ca.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// of is the request's client address.
func (ca *clientAddresses) of(c *fiber.Ctx) netip.Addr {
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	peer = peer.Unmap()
	if len(ca.trusted) == 0 || !ca.isTrusted(peer) {
		return peer
	}
	values := c.Request().Header.PeekAll(ca.header)
	// Several header lines are one list, in order (RFC 9110 5.3).
	for i := len(values) - 1; i >= 0; i-- {
		entries := strings.Split(string(values[i]), ",")
		for j := len(entries) - 1; j >= 0; j-- {
			a, err := netip.ParseAddr(strings.TrimSpace(entries[j]))
			if err != nil {
				// A malformed hop: nothing left of it can be trusted.
				return peer
			}
			if !ca.isTrusted(a) {
				return a.Unmap()
			}
			peer = a.Unmap()
		}
	}
	return peer
}

// limitKey is the client's key in the per-address limits: an IPv4 address,
// or an IPv6 address's /64 — one subscriber's usual allocation, which it
// can fill with as many addresses as it likes.
func (ca *clientAddresses) limitKey(c *fiber.Ctx) string {
	a := ca.of(c)
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// trustedList is the trusted proxies as Fiber's config takes them.
func (ca *clientAddresses) trustedList() []string {
	out := make([]string, 0, len(ca.trusted))
	for _, p := range ca.trusted {
		out = append(out, p.String())
	}
	return out
}
