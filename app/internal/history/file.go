package history

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/anishathalye/porcupine"
)

// recorded is one operation as a history file holds it.
type recorded struct {
	Client       int
	Input        Input
	Output       Output
	Call, Return int64
}

// Save writes a history to path, one operation a line, for a failed
// check to be replayed against the checker (Load) without the run that
// made it.
func Save(path string, ops []porcupine.Operation) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, o := range ops {
		if err := enc.Encode(recorded{o.ClientId, o.Input.(Input), o.Output.(Output), o.Call, o.Return}); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// Load reads a history Save wrote.
func Load(path string) ([]porcupine.Operation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []porcupine.Operation
	dec := json.NewDecoder(f)
	for {
		var r recorded
		if err := dec.Decode(&r); err == io.EOF {
			return ops, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s, operation %d: %w", path, len(ops)+1, err)
		}
		ops = append(ops, porcupine.Operation{ClientId: r.Client, Input: r.Input, Output: r.Output, Call: r.Call, Return: r.Return})
	}
}
