package redistopology

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
)

// replProxy stands between a Redis primary and everyone who reaches it
// (the replica, the sentinels, the server), forwarding every connection
// both ways, until Freeze: from then on what the primary sends on the
// replica's replication connection (the one that said REPLCONF) is held
// back, never to arrive. That is replication lagging behind at the moment a
// primary dies. (Stopping the replica process does not do it: on resuming
// it finds the primary's last writes in its socket buffer.) The sentinels
// monitor the primary at the proxy's address too, so the replica's
// reported master matches theirs and they leave its configuration alone.
type replProxy struct {
	ln      net.Listener
	backend string
	frozen  atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func startReplProxy(t T, backend string) *replProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replProxy{ln: ln, backend: backend}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *replProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *replProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.backend)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		var replication atomic.Bool
		go func() { // client -> server
			buf := make([]byte, 32<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 {
					if bytes.Contains(bytes.ToUpper(buf[:n]), []byte("REPLCONF")) {
						replication.Store(true)
					}
					if _, werr := server.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			server.Close()
		}()
		go func() { // server -> client
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && !(replication.Load() && p.frozen.Load()) {
					if _, werr := client.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			client.Close()
		}()
	}
}

func (p *replProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
