package server

import (
	"context"

	"github.com/uptrace/bun"
)

// Hooks are the few ways into a running server that a harness in the same
// process needs beyond what a user has (the API, the CLI, the variables
// table): the lab's in-process runs and the tests of programs built on this
// package. Nothing in the server calls them, and a deployment has no use
// for them.
type Hooks struct{ s *Server }

// TestHooks returns the server's hooks for a harness in its process.
func (s *Server) TestHooks() Hooks { return Hooks{s} }

// Database is the server's database, whose tables the contract names: a
// harness counts and reads rows there, or slips a column as an operator
// would. On the stand-ins it is the in-memory SQLite nothing else can open.
func (h Hooks) Database() *bun.DB { return h.s.store.DB() }

// Drain runs n consumers over the server's queue until ctx is done: a
// server started with no consumers (SECKILL_CONSUMERS=0) built a backlog,
// and the harness times how fast it empties. A backend with no queue
// (sync) has nothing to drain.
func (h Hooks) Drain(ctx context.Context, n int) error {
	return h.s.consumers.drain(ctx, n)
}
