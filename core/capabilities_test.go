package core_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seckill-lab/seckill/core"
)

// bareQueue is a queue with no capability beyond core.Queue.
type bareQueue struct{ acked bool }

func (q bareQueue) Capabilities() core.Capabilities {
	return core.Capabilities{Name: "bare", Guarantees: core.Guarantees{Acknowledged: q.acked}}
}
func (bareQueue) Consumer(context.Context, int) (core.Consumer, error) { return nil, nil }
func (bareQueue) Close() error                                         { return nil }

// listingQueue lists the orders it holds, and claims to be a complete
// Holder, which is not its to say.
type listingQueue struct{ bareQueue }

func (q listingQueue) Capabilities() core.Capabilities {
	c := q.bareQueue.Capabilities()
	c.Lister, c.Holder = q, q
	return c
}
func (listingQueue) HeldOrders(context.Context, int64) ([]core.Order, error) { return nil, nil }

// bothWaysQueue declares a hand-off and a publisher.
type bothWaysQueue struct{ bareQueue }

func (q bothWaysQueue) Capabilities() core.Capabilities {
	c := q.bareQueue.Capabilities()
	c.Handoff = &core.Handoff{Command: []string{"RPUSH", core.HandoffKey, core.HandoffBody}, Key: func(int64) string { return "k" }}
	c.Publisher = q
	return c
}
func (bothWaysQueue) Publish(context.Context, []byte) error { return nil }

func TestCapabilitiesAreReadFromTheQueue(t *testing.T) {
	bare := core.CapabilitiesOf(bareQueue{})
	if bare.Handoff != nil || bare.Publisher != nil || bare.Stats != nil || bare.Lister != nil || bare.Holder != nil ||
		bare.Duties != nil || bare.DeadLetters != nil || bare.Drains || bare.Shards != 1 || bare.Name != "bare" {
		t.Fatalf("a bare queue has capabilities: %+v", bare)
	}
	if c := core.CapabilitiesOf(bothWaysQueue{}); c.Handoff == nil || c.Publisher != nil {
		t.Fatalf("hand-off %v, publisher %v: want the hand-off alone (the reservation feeds the queue once)", c.Handoff, c.Publisher)
	}
	// Listing alone is not enough for a rebuild: only an acknowledged
	// queue's list is complete.
	if c := core.CapabilitiesOf(listingQueue{}); c.Lister == nil || c.Holder != nil {
		t.Fatalf("an unacknowledged lister: Lister %v, Holder %v; want a Lister and no Holder", c.Lister, c.Holder)
	}
	if c := core.CapabilitiesOf(listingQueue{bareQueue{acked: true}}); c.Holder == nil {
		t.Fatal("an acknowledged lister is no Holder")
	}
}

// TestCapabilityLookupsLiveInOneFile: no code but capabilities.go asks a
// queue's (or reservation's) type what it can do, or a queue for its
// declaration; everything else reads core.CapabilitiesOf.
func TestCapabilityLookupsLiveInOneFile(t *testing.T) {
	capabilities := map[string]bool{"Publisher": true, "StatsReporter": true,
		"OrderHolder": true, "DeadLetterReader": true, "ShopperLimit": true}
	fset := token.NewFileSet()
	found := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			filepath.Base(path) == "capabilities.go" {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		found++
		ast.Inspect(f, func(n ast.Node) bool {
			var typ ast.Expr
			switch x := n.(type) {
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Capabilities" && len(x.Args) == 0 {
					t.Errorf("%s: a queue asked for its Capabilities; read core.CapabilitiesOf instead", fset.Position(x.Pos()))
				}
			case *ast.TypeAssertExpr:
				typ = x.Type
			case *ast.TypeSwitchStmt:
				for _, c := range x.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						if name := typeName(e); capabilities[name] {
							t.Errorf("%s: a type switch on %s; read core.CapabilitiesOf instead", fset.Position(e.Pos()), name)
						}
					}
				}
			}
			if name := typeName(typ); capabilities[name] {
				t.Errorf("%s: a type assertion to %s; read core.CapabilitiesOf instead", fset.Position(typ.Pos()), name)
			}
			return true
		})
		return nil
	})
	if err != nil || found < 50 {
		t.Fatalf("walked %d files (%v): the walk is broken", found, err)
	}
}

func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}
