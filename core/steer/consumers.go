package steer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// The consumers' actions: paused, resumed, capped at a rate in all.
const (
	PauseConsumers  Kind = "consumers_pause"
	ResumeConsumers Kind = "consumers_resume"
	CapConsumers    Kind = "consumers_rate"
)

// consumersKind tells the consumers' actions from a voucher's.
func consumersKind(k Kind) bool {
	return k == PauseConsumers || k == ResumeConsumers || k == CapConsumers
}

// ConsumerBoard is where every instance's consumers read the operator's
// setting (core/consumergate) and say which version they run.
type ConsumerBoard interface {
	// Write writes the setting unless a later version is there.
	Write(ctx context.Context, s core.ConsumerSetting) error
	// Acks lists the instances heard from within recent, and the version
	// each runs.
	Acks(ctx context.Context, recent time.Duration) (map[string]int64, error)
}

// NoConsumers is the ConsumerBoard of a sale with no queue (sync): the
// request writes the database itself, and there is nothing to hold.
var NoConsumers ConsumerBoard = noConsumers{}

type noConsumers struct{}

func (noConsumers) Write(context.Context, core.ConsumerSetting) error { return errNoConsumers }
func (noConsumers) Acks(context.Context, time.Duration) (map[string]int64, error) {
	return nil, errNoConsumers
}

var errNoConsumers = conflict(core.CodeNotSupported, "this backend has no queue: each request writes the database itself, and there are no consumers to pause or cap")

// heardWithin is how recent an instance's ack must be for the action to
// wait for it (each acks every 100 ms); ackPatience, how long the action
// waits for them all.
const (
	heardWithin = 3 * time.Second
	ackPatience = 10 * time.Second
)

// PauseConsumers stops every instance's consumers taking orders from the
// queue: reservations go on and are queued. It returns once every
// instance running consumers has finished its batches in flight and
// parked them, so from its return on no order is persisted until the
// resume.
func (s *Steering) PauseConsumers(ctx context.Context, r Request) (core.ConsumerSetting, error) {
	return s.setConsumers(ctx, r, PauseConsumers, func(c core.ConsumerSetting) core.ConsumerSetting {
		c.Paused = true
		return c
	})
}

// ResumeConsumers lets every instance's consumers take orders again (under
// the cap, if one is set).
func (s *Steering) ResumeConsumers(ctx context.Context, r Request) (core.ConsumerSetting, error) {
	return s.setConsumers(ctx, r, ResumeConsumers, func(c core.ConsumerSetting) core.ConsumerSetting {
		c.Paused = false
		return c
	})
}

// CapConsumers caps the orders persisted at perSecond a second, in all
// instances (0: no cap).
func (s *Steering) CapConsumers(ctx context.Context, r Request, perSecond int) (core.ConsumerSetting, error) {
	if perSecond < 0 {
		return core.ConsumerSetting{}, core.E(core.CodeBadRequest, "perSecond must be 0 (no cap) or more")
	}
	return s.setConsumers(ctx, r, CapConsumers, func(c core.ConsumerSetting) core.ConsumerSetting {
		c.PerSecond = perSecond
		return c
	})
}

// Consumers is the setting as the database keeps it.
func (s *Steering) Consumers(ctx context.Context) (core.ConsumerSetting, error) {
	return s.store.ConsumerSetting(ctx)
}

// setConsumers is one of the consumers' actions: the database's setting
// (its version one more) with the record, pending; then the board every
// instance reads; then done; then the wait for every instance's ack.
func (s *Steering) setConsumers(ctx context.Context, r Request, kind Kind, change func(core.ConsumerSetting) core.ConsumerSetting) (core.ConsumerSetting, error) {
	if s.consumers == NoConsumers {
		return core.ConsumerSetting{}, errNoConsumers
	}
	release, err := s.locker.Lock(ctx, lockName, lockTTL)
	if err != nil {
		return core.ConsumerSetting{}, core.Wrap("steer: lock", core.CodeBusy, err)
	}
	defer release()
	now := s.now()
	after, id, err := s.store.SetConsumers(ctx, func(before core.ConsumerSetting) (core.ConsumerSetting, Action) {
		c := change(before)
		return c, Action{At: now, Operator: r.Operator, Kind: kind, Note: r.Note, Before: consumerJSON(before), After: consumerJSON(c)}
	})
	if err != nil {
		return core.ConsumerSetting{}, core.Wrap("steer: the consumers' setting", core.CodeUnavailable, err)
	}
	if err := s.consumers.Write(ctx, after); err != nil {
		// Pending: the duty writes the database's setting again.
		return after, core.Wrap("steer: the consumers' setting", core.CodeUnavailable, err)
	}
	if err := s.store.Done(ctx, id); err != nil {
		s.log.Warn("steer: an action's record stays pending; the duty finishes it", "action", id, "err", err)
	}
	s.obs.Acted(kind)
	return after, s.awaitAcks(ctx, after.Version)
}

// awaitAcks waits until every instance heard from lately runs version.
func (s *Steering) awaitAcks(ctx context.Context, version int64) error {
	deadline := s.now().Add(ackPatience)
	for {
		acks, err := s.consumers.Acks(ctx, heardWithin)
		var behind []string
		for name, v := range acks {
			if v < version {
				behind = append(behind, name)
			}
		}
		if err == nil && len(behind) == 0 {
			return nil
		}
		if s.now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return core.Wrap("steer: the instances' acks", core.CodeUnavailable, err)
			}
			slices.Sort(behind)
			return core.E(core.CodeUnavailable, fmt.Sprintf(
				"the setting is recorded, but the consumers of %s have not confirmed it within %v (a batch still being persisted?)",
				strings.Join(behind, ", "), ackPatience))
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// finishConsumers is the duty's: the database's setting written to the
// board again.
func (s *Steering) finishConsumers(ctx context.Context, a Action) error {
	c, err := s.store.ConsumerSetting(ctx)
	if err != nil {
		return err
	}
	if err := s.consumers.Write(ctx, c); err != nil {
		return err
	}
	return s.store.Done(ctx, a.ID)
}

// consumerJSON is a setting as an action's record has it.
func consumerJSON(c core.ConsumerSetting) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"paused":%t,"perSecond":%d}`, c.Paused, c.PerSecond))
}
