package amqpqueue

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The roll call: how a rebuild after Redis's loss learns that the queue
// holds no order at all (core.HoldingProbe). AMQP tells how many messages
// are ready and how many consumers a queue has, in one answer of the
// queue's leader, but not how many its consumers hold unacked (only the
// management plugin does, and its figures lag). Every process's consumers
// are this package's, so each process answers a roll call — published on
// a fanout exchange, answered through direct reply-to — with what its
// consumers hold and a count of everything that moved through it
// (deliveries, acks, forwards).
//
// Holding calls the roll twice, and reads the queue between the two. A
// process whose two answers are equal, holding nothing, had nothing
// delivered, acked or forwarded from its first answer to its second, so it
// held nothing when the queue was read. If those processes' consumers are
// all the queue's consumers, and none was ready, the queue held nothing at
// that moment: every order published before it was acked — persisted — or
// dead-lettered. A delivery still on the wire when a process answered
// arrives within the roll call's window, and shows as a move.

// rollCallWindow is how long a roll call waits for answers.
const rollCallWindow = 300 * time.Millisecond

// rollCallReport is one process's answer.
type rollCallReport struct {
	Process string `json:"process"`
	// Consumers maps each consumer's tag to the deliveries it holds
	// unacked (pushed and not yet fetched, or fetched and not yet acked).
	Consumers map[string]int64 `json:"consumers"`
	// Moves counts every delivery, ack and forward since the start.
	Moves int64 `json:"moves"`
	// Forwarding: forwards under way; Failing: the last one was not
	// confirmed, so a relay holds its batch to forward again.
	Forwarding int64 `json:"forwarding"`
	Failing    bool  `json:"failing"`
}

// RollCallExchange is the fanout exchange the roll calls of the queue
// named queue go out on.
func RollCallExchange(queue string) string { return queue + "_rollcall" }

func (q *Queue) rollCallExchange() string { return RollCallExchange(q.cfg.Queue) }

// report is this process's answer now.
func (q *Queue) report() rollCallReport {
	r := rollCallReport{Process: q.process, Consumers: map[string]int64{},
		Moves: q.moves.Load(), Forwarding: q.forwarding.Load(), Failing: q.failing.Load()}
	q.consumerMu.Lock()
	defer q.consumerMu.Unlock()
	for c := range q.consumers {
		c.mu.Lock()
		if c.tag != "" && c.ch != nil && !c.ch.IsClosed() {
			r.Consumers[c.tag] = c.unacked
		}
		c.mu.Unlock()
	}
	return r
}

// Holding implements core.HoldingProbe (see the roll call above).
func (q *Queue) Holding(ctx context.Context) (string, error) {
	before, err := q.rollCall(ctx)
	if err != nil {
		return "", err
	}
	states, err := q.inspect(q.cfg.Queue)
	if err != nil {
		return "", err
	}
	state := states[0]
	after, err := q.rollCall(ctx)
	if err != nil {
		return "", err
	}
	return holding(before, after, state.Messages, state.Consumers), nil
}

// holding judges a roll call: "" when the queue held nothing when it was
// read (ready messages, consumers) between the two answers of each
// process, else what it may still hold.
func holding(before, after map[string]rollCallReport, ready, consumers int) string {
	if ready > 0 {
		return fmt.Sprintf("%d orders queued", ready)
	}
	processes := make([]string, 0, len(after))
	for p := range after {
		processes = append(processes, p)
	}
	sort.Strings(processes) // one answer for one state, whatever the map's order
	answered := 0
	for _, p := range processes {
		a := after[p]
		b, ok := before[p]
		switch {
		case !ok:
			return fmt.Sprintf("process %s answered the second roll call only", p)
		case a.Forwarding > 0:
			return fmt.Sprintf("process %s is forwarding orders", p)
		case a.Failing:
			return fmt.Sprintf("process %s's relay holds a batch the broker did not confirm", p)
		case a.Moves != b.Moves:
			return fmt.Sprintf("process %s delivered, acked or forwarded during the roll call", p)
		case len(a.Consumers) != len(b.Consumers):
			return fmt.Sprintf("process %s's consumers changed during the roll call", p)
		}
		for tag, held := range a.Consumers {
			if _, ok := b.Consumers[tag]; !ok {
				return fmt.Sprintf("process %s's consumers changed during the roll call", p)
			}
			if held > 0 {
				return fmt.Sprintf("consumer %s holds %d orders unacked", tag, held)
			}
			answered++
		}
	}
	if answered != consumers {
		var missing []string
		for p := range before {
			if _, ok := after[p]; !ok {
				missing = append(missing, p)
			}
		}
		why := fmt.Sprintf("the queue has %d consumers and %d answered the roll call", consumers, answered)
		if len(missing) > 0 {
			why += " (gone since the first: " + strings.Join(missing, ", ") + ")"
		}
		return why
	}
	return ""
}

// rollCall asks every process and gathers the answers that come within
// rollCallWindow, by process.
func (q *Queue) rollCall(ctx context.Context) (map[string]rollCallReport, error) {
	conn, err := q.connection()
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: channel: %w", err)
	}
	defer ch.Close()
	// Direct reply-to: answers come straight to this channel, no queue.
	answers, err := ch.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: roll call: %w", err)
	}
	id := rand.Text()
	if err := ch.PublishWithContext(ctx, q.rollCallExchange(), "", false, false, amqp.Publishing{
		ReplyTo: "amq.rabbitmq.reply-to", CorrelationId: id,
	}); err != nil {
		return nil, fmt.Errorf("rabbitmq: roll call: %w", err)
	}
	out := map[string]rollCallReport{}
	timer := time.NewTimer(rollCallWindow)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return out, nil
		case d, ok := <-answers:
			if !ok {
				return nil, errors.New("rabbitmq: roll call: the channel closed")
			}
			var r rollCallReport
			if d.CorrelationId != id || json.Unmarshal(d.Body, &r) != nil || r.Process == "" {
				continue
			}
			out[r.Process] = r
		}
	}
}

// answerRollCalls answers every roll call until Close, on a queue of its
// own bound to the roll-call exchange, set up again after the broker
// dropped the connection.
func (q *Queue) answerRollCalls() {
	defer close(q.answered)
	for {
		err := q.answerUntilClosed()
		select {
		case <-q.done:
			return
		default:
		}
		q.log.Warn("rabbitmq: cannot answer roll calls; trying again", "err", err)
		select {
		case <-q.done:
			return
		case <-time.After(time.Second):
		}
	}
}

func (q *Queue) answerUntilClosed() error {
	conn, err := q.connection()
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("channel: %w", err)
	}
	defer ch.Close()
	// Exclusive and auto-deleted: gone with this process's connection.
	calls, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return fmt.Errorf("declare: %w", err)
	}
	if err := ch.QueueBind(calls.Name, "", q.rollCallExchange(), false, nil); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	ds, err := ch.Consume(calls.Name, "", true, true, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	for d := range ds {
		body, err := json.Marshal(q.report())
		if err != nil {
			return err
		}
		if err := ch.PublishWithContext(context.Background(), "", d.ReplyTo, false, false, amqp.Publishing{
			CorrelationId: d.CorrelationId, ContentType: "application/json", Body: body,
		}); err != nil {
			return fmt.Errorf("answer: %w", err)
		}
	}
	return errors.New("the channel closed")
}
