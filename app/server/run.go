package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Main serves the API with the configuration in the environment until
// SIGTERM or SIGINT, and returns the process's exit status: what the
// seckill binary runs with no arguments. A program of its own registers
// its backends (Register) and then calls Main.
func Main() int {
	cfg, err := LoadConfig(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	log := newLogger(cfg.LogFormat)
	redisLog := &redisLogger{log: log}
	redis.SetLogger(redisLog)
	for _, warning := range unknownVariables(os.Environ()) {
		log.Warn(warning)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s, err := New(ctx, cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	redisLog.started.Store(true)
	defer s.Close()
	if cfg.GeneratedAdminToken {
		// Embedded mode only, and only a token made up for this run: the
		// demo needs it. A configured token is never logged.
		log.Info("generated an admin token for this run (set SECKILL_ADMIN_TOKEN to choose one)", "admin_token", cfg.AdminToken)
	}
	if cfg.PprofAddr != "" {
		if err := servePprof(ctx, cfg.PprofAddr, log); err != nil {
			log.Error("cannot listen", "addr", cfg.PprofAddr, "err", err)
			return 1
		}
	}
	if cfg.MetricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			log.Error("cannot listen", "addr", cfg.MetricsAddr, "err", err)
			return 1
		}
		go func() {
			if err := s.ServeMetrics(ctx, mln); err != nil {
				log.Error("metrics listener stopped", "err", err)
			}
		}()
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		log.Error("cannot listen", "addr", cfg.Addr, "err", err)
		return 1
	}
	if err := s.Serve(ctx, ln); err != nil {
		log.Error("stopped", "err", err)
		return 1
	}
	log.Info("stopped cleanly")
	return 0
}

// servePprof serves the Go profiler on its own listener, never on the
// API's: profiles show internals no shopper should reach. It stops with ctx.
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); srv.Close() }()
	go srv.Serve(ln)
	log.Info("profiler listening", "addr", ln.Addr().String())
	return nil
}

// redisLogger sends go-redis's own messages (dial failures, pool
// warnings) to the structured log instead of bare stderr lines: at debug
// level until the server has started, whose own error says what failed
// in one line (a wrong port printed four of go-redis's warnings before
// it), and as warnings from then on.
type redisLogger struct {
	log     *slog.Logger
	started atomic.Bool
}

func (l *redisLogger) Printf(ctx context.Context, format string, args ...any) {
	level := slog.LevelDebug
	if l.started.Load() {
		level = slog.LevelWarn
	}
	l.log.Log(ctx, level, "redis client: "+fmt.Sprintf(format, args...))
}

func newLogger(format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
