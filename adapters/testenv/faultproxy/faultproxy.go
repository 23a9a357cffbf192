// Package faultproxy is a TCP proxy that injects network faults between a
// program and a server it talks to (Redis, MySQL): a delay on every chunk
// sent to the server, the server taken down (connections reset, new ones
// refused), or a blackhole (every byte swallowed, connections left open:
// a partition without a reset, where only deadlines help). The tests and
// the comparison lab strike with it.
package faultproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards to target until it is taken down: then it drops every
// connection and refuses new ones, as an unreachable server would.
type Proxy struct {
	ln     net.Listener
	target string
	// toServer is added before each chunk sent to the target (a slower
	// database, so that a fault lands in the middle of a drain), toClient
	// before each chunk of its answers; nanoseconds (SetDelays).
	toServer, toClient atomic.Int64
	mu                 sync.Mutex
	conns              map[net.Conn]struct{}
	down               bool
	// silent: every byte either way is swallowed and the connections stay
	// open — a partition without a reset, where only deadlines help.
	silent atomic.Bool
}

func Start(target string, delay time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.toServer.Store(int64(delay))
	go p.serve()
	return p, nil
}

func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c, up)
		go p.pipe(up, c, &p.toServer)
		go p.pipe(c, up, &p.toClient)
	}
}

func (p *Proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *Proxy) pipe(dst, src net.Conn, delay *atomic.Int64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.silent.Load() {
			if d := time.Duration(delay.Load()); d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// SetDelays delays from now on each chunk sent to the target by toServer,
// and each chunk of its answers by toClient (a far or slow server).
func (p *Proxy) SetDelays(toServer, toClient time.Duration) {
	p.toServer.Store(int64(toServer))
	p.toClient.Store(int64(toClient))
}

// SetDown takes the target away (dropping live connections) or back.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

// Blackhole swallows everything for d (Silence), then heals (Heal).
func (p *Proxy) Blackhole(d time.Duration) {
	p.Silence()
	time.Sleep(d)
	p.Heal()
}

// Silence swallows every byte either way from now on, the connections left
// open: a partition without a reset.
func (p *Proxy) Silence() { p.silent.Store(true) }

// Heal resets the connections a silence left half-spoken (what a healed
// partition looks like to a client: they are dead) and forwards again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.silent.Store(false)
}

// Close stops the proxy and resets every connection through it.
func (p *Proxy) Close() {
	p.ln.Close()
	p.SetDown(true)
}
