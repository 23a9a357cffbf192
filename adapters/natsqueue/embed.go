package natsqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartEmbedded starts a NATS server with JetStream in this process, on a
// free local port and a temporary directory, and returns its URL and the
// function that stops it (and removes the directory).
func StartEmbedded() (url string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "seckill-nats-")
	if err != nil {
		return "", nil, fmt.Errorf("nats: embedded server: %w", err)
	}
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true, ServerName: "seckill-embedded",
	})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("nats: embedded server: %w", err)
	}
	go ns.Start()
	stop = func() {
		ns.Shutdown()
		ns.WaitForShutdown()
		os.RemoveAll(dir)
	}
	if !ns.ReadyForConnections(10 * time.Second) {
		stop()
		return "", nil, errors.New("nats: the embedded server did not start within 10s")
	}
	return ns.ClientURL(), stop, nil
}

// NewEmbedded opens the queue on a server of its own (StartEmbedded);
// closing the queue stops the server. It is the stand-in `make run` uses
// (nothing to install), as miniredis is Redis's: orders survive a
// consumer, not the process.
func NewEmbedded(ctx context.Context, cfg Config, log *slog.Logger) (*Queue, error) {
	url, stop, err := StartEmbedded()
	if err != nil {
		return nil, err
	}
	cfg.URL = url
	q, err := New(ctx, cfg, log)
	if err != nil {
		stop()
		return nil, err
	}
	q.onClose = stop
	return q, nil
}
