package main

import (
	"bytes"
	"testing"

	"github.com/seckill-lab/seckill/app/lab"
)

// TestTheLabNeedsACommand: the lab starts its server processes as itself
// with `serve`; with no command it answers the usage and exit status 2 —
// never a lab of its own (before this, a server process started without
// a command ran a whole comparison inside the one that started it).
func TestTheLabNeedsACommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if status := program.Run(nil, &stdout, &stderr); status != 2 || !bytes.Contains(stderr.Bytes(), []byte("Usage: seckill-lab")) {
		t.Fatalf("seckill-lab with no command: status %d, stderr %q; want 2 and the usage", status, stderr.String())
	}
	found := false
	for _, c := range program.Commands {
		found = found || c.Name == lab.ServeCommand
	}
	if !found {
		t.Fatalf("no %q command: the lab's server processes could not start", lab.ServeCommand)
	}
}
