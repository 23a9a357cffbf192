package history

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Operators' actions on a voucher, beside the sale's and the lifecycle's.
const (
	// PauseSale is POST /api/admin/vouchers/{id}/pause.
	PauseSale Kind = iota + Cancel + 1
	// ResumeSale is POST /api/admin/vouchers/{id}/resume.
	ResumeSale
	// ChangeStock is POST /api/admin/vouchers/{id}/stock {"delta":
	// Input.Delta}; Accepted answers the stock left (Output.Stock).
	ChangeStock
	// EndSale is POST /api/admin/vouchers/{id}/end: the sale ends now.
	EndSale
)

// Paused: 403 paused (Buy); Ended: 403 ended.
const (
	Paused Outcome = Denied + 1
	Ended  Outcome = Paused + 1
)

// SteerFault is an operator steering the sale while it runs: every Every,
// on a random voucher, a pause (resumed after a while), a few units added
// or one taken. Each action is an operation of the history (the model
// learns the pause and the stock it moves).
type SteerFault struct {
	Every time.Duration
	// Skip tells a voucher to leave alone (nil: none).
	Skip func(voucher int64) bool
	// EndAt, once the run has done this fraction of its operations, ends
	// the sale of the next voucher it steers (0: none is ended); an ended
	// voucher is steered no more.
	EndAt float64
}

// memoLifetime is how long an instance answers a sale sold out from
// memory (SECKILL_ANSWER_MEMO's default, which the checked servers run);
// finishedWithin bounds when an action answered 503 is finished by another
// instance's duty (pending 5 s, looked for every second) and told to all.
const (
	memoLifetime   = int64(200 * time.Millisecond)
	finishedWithin = int64(10 * time.Second)
)

// steerClient is the client id an operator's actions are recorded under.
const steerClient = -1

// run steers until ctx ends.
func (f *SteerFault) run(ctx context.Context, s Sale, rec *Recorder) {
	client := &http.Client{Timeout: s.Timeout}
	paused, ended := map[int64]bool{}, map[int64]bool{}
	for ctx.Err() == nil {
		sleep(ctx, f.Every)
		v := s.Vouchers[rand.IntN(len(s.Vouchers))]
		if (f.Skip != nil && f.Skip(v)) || ended[v] {
			continue
		}
		in := Input{Voucher: v, Kind: PauseSale}
		switch p := rand.IntN(4); {
		case f.EndAt > 0 && len(ended) == 0 && float64(rec.Len()) >= f.EndAt*float64(s.Ops):
			in.Kind = EndSale
		case paused[v]:
			in.Kind = ResumeSale
		case p == 0:
			in.Kind, in.Delta = ChangeStock, 1+rand.Int64N(3)
		case p == 1:
			in.Kind, in.Delta = ChangeStock, -1
		}
		call := rec.Now()
		out := f.steer(ctx, client, s, in)
		rec.Add(steerClient, in, call, out)
		if in.Kind == PauseSale || in.Kind == ResumeSale {
			paused[v] = in.Kind == PauseSale
		}
		if in.Kind == EndSale {
			ended[v] = true // answered or not: it may have ended
		}
	}
	// The sale ends on sale: a pause left in place would hold its last
	// shoppers' buys.
	for v, on := range paused {
		if on && !ended[v] {
			in := Input{Voucher: v, Kind: ResumeSale}
			call := rec.Now()
			rec.Add(steerClient, in, call, f.steer(context.WithoutCancel(ctx), client, s, in))
		}
	}
}

// steer sends one action and classifies its answer.
func (f *SteerFault) steer(ctx context.Context, client *http.Client, s Sale, in Input) Output {
	path := "/api/admin/vouchers/" + strconv.FormatInt(in.Voucher, 10) + "/"
	body := "{}"
	switch in.Kind {
	case PauseSale:
		path += "pause"
	case ResumeSale:
		path += "resume"
	case EndSale:
		path += "end"
	case ChangeStock:
		path += "stock"
		body = `{"delta":` + strconv.FormatInt(in.Delta, 10) + `}`
	}
	req, err := http.NewRequestWithContext(ctx, "POST", s.URLs[rand.IntN(len(s.URLs))]+path, strings.NewReader(body))
	if err != nil {
		return Output{Outcome: Wrong, Body: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Seckill-Operator", "history")
	resp, err := client.Do(req)
	if err != nil {
		return unanswered(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var got struct {
		Stock *int64 `json:"stock"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &got)
	out := Output{Status: resp.StatusCode, Body: string(raw)}
	switch {
	case resp.StatusCode >= 500:
		out.Outcome = Unknown // recorded and pending: the duty may yet finish it
	case resp.StatusCode == 200 && in.Kind != ChangeStock:
		out.Outcome = Accepted
	case resp.StatusCode == 200 && got.Stock != nil:
		out.Outcome, out.Stock = Accepted, *got.Stock
	case got.Error.Code == "not_enough_stock":
		out.Outcome = Denied
	default:
		out.Outcome = Wrong
	}
	return out
}

// steered is the states an operator's action answered out may leave.
func (s state) steered(in Input, out Output, inBuckets bool) []any {
	if out.Outcome == Refused { // never reached an instance
		return []any{s}
	}
	switch in.Kind {
	case PauseSale, ResumeSale:
		next := s.pausedAs(in.Kind == PauseSale)
		switch {
		case out.Outcome == Accepted:
			return []any{next}
		case out.Outcome == Unknown && inBuckets && s.paused != next.paused:
			// Part of the buckets changed (a voucher already as asked
			// stays so: the duty writes the database's setting, not its
			// opposite).
			part := s
			part.mixed = true
			return []any{s, next, part}
		case out.Outcome == Unknown:
			return []any{s, next}
		}
	case EndSale:
		return s.endedAs(out, inBuckets)
	case ChangeStock:
		after := s.stock + in.Delta
		restocked := s.stocked(after)
		if s.stock == 0 && after > 0 {
			// Each instance remembered the sale sold out, for at most the
			// memo's lifetime, and forgets it once told of the change
			// (its answer, or a failed one's finish by the duty).
			until := out.Ret
			if out.Outcome == Unknown {
				until = in.At + finishedWithin
			}
			restocked.memoUntil = max(s.memoUntil, until+memoLifetime)
		}
		switch {
		case out.Outcome == Accepted && after >= 0 && out.Stock == after:
			return []any{restocked}
		case out.Outcome == Denied && after < 0:
			return []any{s}
		case out.Outcome == Unknown && after >= 0:
			return []any{s, restocked}
		case out.Outcome == Unknown:
			return []any{s}
		}
	}
	return nil
}

// endedAs is the states an end answered out may leave: ended for good;
// answered 503, perhaps not, or (in buckets) in part of them until the
// duty finishes it.
func (s state) endedAs(out Output, inBuckets bool) []any {
	ended := s
	ended.ended, ended.endMixed = true, false
	switch {
	case out.Outcome == Accepted:
		return []any{ended}
	case out.Outcome == Unknown && inBuckets && !s.ended:
		part := ended
		part.endMixed = true
		return []any{s, ended, part}
	case out.Outcome == Unknown:
		return []any{s, ended}
	}
	return nil
}

func (s state) pausedAs(paused bool) state {
	s.paused, s.mixed = paused, false
	return s
}

func (s state) stocked(stock int64) state {
	s.stock = stock
	return s
}
