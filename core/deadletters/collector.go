package deadletters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// Collector copies what each source holds past its cursor into the
// register. Every process may run one: the register keeps each record
// once, and moves a source's cursor only from where that process read it.
type Collector struct {
	Sources  []core.DeadLetterSource
	Register Register
	// Batch is how many records one read takes (default 500); Rounds how
	// many reads of a source one run makes at most (default 20), so one
	// run is bounded however many arrived.
	Batch  int64
	Rounds int
}

// Duty is the collector as a duty, every second.
func (c *Collector) Duty() core.Duty {
	return core.Duty{Name: "dead-letter register", Every: time.Second, Do: c.Collect}
}

// Collect reads every source past its cursor into the register; it
// returns the sources' errors joined, having tried each.
func (c *Collector) Collect(ctx context.Context) error {
	var errs []error
	for _, s := range c.Sources {
		if err := c.collect(ctx, s); err != nil {
			errs = append(errs, fmt.Errorf("dead letters of %s: %w", s.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Collector) collect(ctx context.Context, s core.DeadLetterSource) error {
	batch, rounds := c.Batch, c.Rounds
	if batch <= 0 {
		batch = 500
	}
	if rounds <= 0 {
		rounds = 20
	}
	for range rounds {
		from, err := c.Register.Cursor(ctx, s.Name)
		if err != nil {
			return err
		}
		records, err := s.Reader.DeadLettersAfter(ctx, from, batch)
		if err != nil || len(records) == 0 {
			return err
		}
		letters := make([]Letter, len(records))
		for i, r := range records {
			if r.At.IsZero() {
				r.At = time.Now() // a record that does not say when: when it was found
			}
			letters[i] = LetterOf(s.Name, r)
		}
		if err := c.Register.Collect(ctx, s.Name, from, records[len(records)-1].Position, letters); err != nil {
			return err
		}
		if int64(len(records)) < batch {
			return nil
		}
	}
	return nil
}
