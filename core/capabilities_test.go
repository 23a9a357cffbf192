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
// value's type what it can do — a type assertion or a type switch to any
// interface declared in core or its sub-packages, whatever its name — or a
// queue for its declaration; everything else reads what is declared as
// data (core.CapabilitiesOf, recovery.LiveFeatures, the configs' fields).
func TestCapabilityLookupsLiveInOneFile(t *testing.T) {
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		files[path] = f
		return err
	})
	if err != nil || len(files) < 50 {
		t.Fatalf("walked %d files (%v): the walk is broken", len(files), err)
	}
	interfaces := coreInterfaces(files)
	if !interfaces["core"]["OrderHolder"] || !interfaces["recovery"]["LiveSale"] || len(interfaces["core"]) < 20 {
		t.Fatalf("found core's interfaces %v: the scan is broken", interfaces)
	}
	probe := func(f *ast.File, e ast.Expr) string {
		switch x := e.(type) {
		case *ast.Ident:
			if interfaces[f.Name.Name][x.Name] {
				return f.Name.Name + "." + x.Name
			}
		case *ast.SelectorExpr:
			if pkg, ok := x.X.(*ast.Ident); ok && interfaces[pkg.Name][x.Sel.Name] {
				return pkg.Name + "." + x.Sel.Name
			}
		}
		return ""
	}
	for path, f := range files {
		if filepath.ToSlash(path) == "../core/capabilities.go" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Capabilities" && len(x.Args) == 0 {
					t.Errorf("%s: a queue asked for its Capabilities; read core.CapabilitiesOf instead", fset.Position(x.Pos()))
				}
			case *ast.TypeAssertExpr:
				if name := probe(f, x.Type); name != "" {
					t.Errorf("%s: a type assertion to %s; declare the part as data instead", fset.Position(x.Pos()), name)
				}
			case *ast.TypeSwitchStmt:
				for _, c := range x.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						if name := probe(f, e); name != "" {
							t.Errorf("%s: a type switch on %s; declare the part as data instead", fset.Position(e.Pos()), name)
						}
					}
				}
			}
			return true
		})
	}
}

// coreInterfaces are the interfaces declared in core and its sub-packages
// (not the test kits), by package name.
func coreInterfaces(files map[string]*ast.File) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for path, f := range files {
		dir := filepath.ToSlash(filepath.Dir(path))
		if (dir != "../core" && !strings.HasPrefix(dir, "../core/")) || strings.HasSuffix(dir, "test") {
			continue
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				if ts, ok := spec.(*ast.TypeSpec); ok {
					if _, ok := ts.Type.(*ast.InterfaceType); ok {
						if out[f.Name.Name] == nil {
							out[f.Name.Name] = map[string]bool{}
						}
						out[f.Name.Name][ts.Name.Name] = true
					}
				}
			}
		}
	}
	return out
}
