package server

import (
	"fmt"
	"slices"
	"sync"
)

// named is what a registry holds: something selected by its name.
type named interface{ name() string }

func (b Backend) name() string    { return b.Name }
func (s CodeSender) name() string { return s.Name }

// registry is a list of named things a program adds to before it starts
// the server (queue backends, code senders), the way database/sql drivers
// register: in order, each name once.
type registry[T named] struct {
	mu    sync.RWMutex
	kind  string // for the panic: "backend", "code sender"
	items []T
}

// add registers item; a taken name is a programming error, found at start.
func (r *registry[T]) add(item T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, have := range r.items {
		if have.name() == item.name() {
			panic(fmt.Sprintf("server: %s %q is already registered", r.kind, item.name()))
		}
	}
	r.items = append(r.items, item)
}

// all lists the registered items in the order they were added.
func (r *registry[T]) all() []T {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.items)
}

// names lists their names, in order.
func (r *registry[T]) names() []string {
	var out []string
	for _, it := range r.all() {
		out = append(out, it.name())
	}
	return out
}

func (r *registry[T]) lookup(name string) (T, bool) {
	for _, it := range r.all() {
		if it.name() == name {
			return it, true
		}
	}
	var zero T
	return zero, false
}
