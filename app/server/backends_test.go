package server

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/seckill-lab/seckill/core"
)

// TestDocsListEveryBuiltinBackend: the README's backend table is the
// registry's, name for name and line for line, and docs/iterations.md has a
// row for each backend.
func TestDocsListEveryBuiltinBackend(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z]+)`(?: \\(default\\))? \\| (.+) \\|$")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		if _, dup := documented[m[1]]; !dup {
			documented[m[1]] = m[2]
		}
	}
	iterations, err := os.ReadFile("../../docs/iterations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range builtinBackends {
		line, ok := documented[b.Name]
		if !ok {
			t.Errorf("README's backend table has no row for %s", b.Name)
		} else if line != b.Iteration {
			t.Errorf("README says of %s:\n  %s\nthe registry says:\n  %s", b.Name, line, b.Iteration)
		}
		if !strings.Contains(string(iterations), "| `"+b.Name+"` |") {
			t.Errorf("docs/iterations.md has no row for %s", b.Name)
		}
	}
	var names []string
	for _, b := range builtinBackends {
		names = append(names, b.Name)
	}
	if want := []string{"sync", "memory", "list", "pubsub", "stream", "streamgroup", "nats", "rabbitmq", "kafka"}; !slices.Equal(names, want) {
		t.Errorf("built-in backends %v, want the six iterations and the outside brokers, in order: %v", names, want)
	}
}

// TestRegisterRefusesWhatCannotWork: an empty or taken name, and a backend
// with neither a queue nor a sale of its own, are programming errors that
// panic at start, as database/sql does.
func TestRegisterRefusesWhatCannotWork(t *testing.T) {
	for name, b := range map[string]Backend{
		"no name":         {Open: builtinBackends[1].Open},
		"taken name":      {Name: "streamgroup", Open: builtinBackends[1].Open},
		"nothing":         {Name: "empty"},
		"open and sale":   {Name: "both", Open: builtinBackends[1].Open, Sale: builtinBackends[0].Sale},
		"open and broker": {Name: "both", Open: builtinBackends[1].Open, Broker: func(context.Context, Deps) (core.Queue, error) { return nil, nil }},
		"sale and broker": {Name: "both", Sale: builtinBackends[0].Sale, Broker: func(context.Context, Deps) (core.Queue, error) { return nil, nil }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registered", name)
				}
			}()
			Register(b)
		}()
	}
}

// TestUnknownQueueNamesTheRegisteredBackends: SECKILL_QUEUE's error lists
// what the registry holds.
func TestUnknownQueueNamesTheRegisteredBackends(t *testing.T) {
	_, err := LoadConfig(env(map[string]string{"SECKILL_QUEUE": "rocketmq"}))
	if err == nil || !strings.Contains(err.Error(), "SECKILL_QUEUE") || !strings.Contains(err.Error(), strings.Join(BackendNames(), ", ")) {
		t.Fatalf("err = %v, want SECKILL_QUEUE named with the registered backends", err)
	}
}
