package lab

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// openingRow is one part of one step of an opening: its first second, or
// the rest of it.
type openingRow struct {
	Backend  string
	Capacity float64 // reservations a second, closed-loop
	Multiple float64
	Part     string // "first 1 s" or "rest"
	Seconds  float64
	// Offered arrivals, Answered answers (any status) and Goodput
	// reservations, a second.
	Offered, Answered, Goodput float64
	// Kinds are the answers of each kind, with their latencies from the
	// moment each arrival was due.
	Kinds map[string]latencies
	// ServerErrors are 5xx answers; Timeouts arrivals not answered in time.
	ServerErrors, Timeouts int
}

// latencies are one kind's, sorted.
type latencies []time.Duration

func (l latencies) at(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	return l[int(float64(len(l)-1)*p)]
}

// all is every kind's latencies but the unanswered, sorted.
func (r openingRow) all() latencies {
	var out latencies
	for kind, l := range r.Kinds {
		if kind != "timeout" && kind != "error" {
			out = append(out, l...)
		}
	}
	slices.Sort(out)
	return out
}

// openingRows splits the hits by step, and each step into its first
// second and the rest.
func openingRows(backend string, capacity float64, pacer stepPacer, multiples []float64, hits []openingHit) []openingRow {
	var rows []openingRow
	for i, m := range multiples {
		from := time.Duration(i) * pacer.step
		for _, part := range []struct {
			name     string
			from, to time.Duration
		}{{"first 1 s", from, from + time.Second}, {"rest", from + time.Second, from + pacer.step}} {
			if part.to <= part.from {
				continue // a step of one second has no rest
			}
			row := openingRow{Backend: backend, Capacity: capacity, Multiple: m, Part: part.name,
				Seconds: (part.to - part.from).Seconds(), Kinds: map[string]latencies{}}
			arrivals, answers, reserved := 0, 0, 0
			for _, h := range hits {
				if h.due < part.from || h.due >= part.to {
					continue
				}
				arrivals++
				row.Kinds[h.kind] = append(row.Kinds[h.kind], h.latency)
				switch {
				case h.kind == "timeout":
					row.Timeouts++
				case h.kind == "error":
				default:
					answers++
					if h.kind == "200" {
						reserved++
					}
					if strings.HasPrefix(h.kind, "5") {
						row.ServerErrors++
					}
				}
			}
			for _, l := range row.Kinds {
				slices.Sort(l)
			}
			row.Offered, row.Answered, row.Goodput = float64(arrivals)/row.Seconds, float64(answers)/row.Seconds, float64(reserved)/row.Seconds
			rows = append(rows, row)
		}
	}
	return rows
}

// printOpening writes the table: a line per part of each step, then each
// answer kind's count and p50/p99/max.
func printOpening(w io.Writer, rows []openingRow) {
	fmt.Fprintf(w, "%-12s %8s %5s %-9s %9s %9s %9s %9s %9s %9s %5s %8s  %s\n",
		"backend", "capacity", "step", "part", "offered/s", "answer/s", "goodput/s", "p50", "p99", "max", "5xx", "timeouts", "answers: count p50/p99/max")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
	for _, r := range rows {
		all := r.all()
		kinds := make([]string, 0, len(r.Kinds))
		for k := range r.Kinds {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		var each []string
		for _, k := range kinds {
			l := r.Kinds[k]
			each = append(each, fmt.Sprintf("%s: %d %s/%s/%s", k, len(l), ms(l.at(0.5)), ms(l.at(0.99)), ms(l.at(1))))
		}
		fmt.Fprintf(w, "%-12s %8.0f %4.1fx %-9s %9.0f %9.0f %9.0f %9s %9s %9s %5d %8d  %s\n",
			r.Backend, r.Capacity, r.Multiple, r.Part, r.Offered, r.Answered, r.Goodput,
			ms(all.at(0.5)), ms(all.at(0.99)), ms(all.at(1)), r.ServerErrors, r.Timeouts, strings.Join(each, "; "))
	}
}
