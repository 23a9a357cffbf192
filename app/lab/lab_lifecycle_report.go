package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seckill-lab/seckill/app/server"
)

// writeLifecycle writes the lifecycle lab's tables, keeping what an author
// wrote below keptMarker in the file it replaces.
func writeLifecycle(o lifecycleOptions, cfg server.Config, results []lifecycleResult, command string) error {
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# The order lifecycle, measured\n\n")
	fmt.Fprintf(&b, "Written by `make lifecycle` (`%s`) on %s, real Redis and MySQL.\n\n", strings.TrimSpace(command), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "- Machine: %s\n", machine())
	fmt.Fprintf(&b, "- Versions: %s\n", versions(cfg))
	fmt.Fprintf(&b, "- Instances: separate server processes of this binary with the defaults users get, `SECKILL_PAY_WINDOW=%v`, the sandbox payment provider, and `SECKILL_EXPIRY` as the row says (`deadlines`: each reservation records its deadline in a Redis sorted set, claimed by the sweep every second, the database's sweep 2 s behind as the safety net; `sweep`: the database's sweep alone, every second).\n\n", o.window)

	b.WriteString("## Units that come back are sold again\n\n")
	fmt.Fprintf(&b, "%d units on two instances; the first buyers take them all over a second (so their deadlines fall at every phase of the once-a-second sweep) and %d%% of them, spread among them, never pay; new shoppers, who pay at once, arrive every %v until every unit is paid (or the pay window plus 20 s has passed). *Deadline → cancelled*: from an expired order's deadline to its cancellation (the mechanism's part); *deadline → resale*: to the next order accepted for the voucher.\n\n", o.units, o.neverPayPct, shopperEvery)
	b.WriteString("| backend | expiry | never paid | expired | deadline → cancelled p50 / p99 | resold | deadline → resale p50 | p99 | max | unsold at the end | new shoppers | sale took |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		s := r.Resale
		if !s.Ran {
			fmt.Fprintf(&b, "| %s | %s | %s | | | | | | | | | |\n", r.Backend, r.Expiry, cell(s.Note))
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %v / %v | %d | %v | %v | %v | %d | %d | %v |\n", r.Backend, r.Expiry, s.NeverPaid, s.Expired,
			round(s.ExpiredP50), round(s.ExpiredP99), s.Resold, round(s.P50), round(s.P99), round(s.Max), s.Unsold, s.Shoppers, s.Took.Round(100*time.Millisecond))
	}
	if len(results) > 0 && len(results[0].Races) > 0 {
		b.WriteString("\n## The races\n\n")
		fmt.Fprintf(&b, "Each on %d orders of a voucher of as many units, checked once it settled: every order paid, cancelled or refunded; the database's stock the initial less the paid; the stock shoppers are shown equal to it; no release pending; and, where every instance that ran is still up to count, as many units given back to Redis as orders cancelled (none twice). A cell says **held** or what broke, then paid / cancelled / refunded.\n\n", o.raceOrders)
		b.WriteString("- *payment completed at the deadline*: each payment started in time and completed from 300 ms before its deadline to 1.5 s after, on the other instance (a payment that arrives after the deadline and before the expiry still wins: the status is the arbiter);\n")
		b.WriteString("- *shopper cancels while paying*: the cancel on one instance and the payment's completion on the other, sent together;\n")
		b.WriteString("- *payment notified after the expiry*: every notification arrives once the orders expired; none may make an order paid;\n")
		b.WriteString("- *instance SIGKILLed mid-expiry*: one instance, all orders due together, killed as the first is cancelled; a new instance starts; *back in* is from the last deadline to every unit on sale in both stores;\n")
		b.WriteString("- *Redis restarted empty, unpaid orders pending*: the orders persisted, Redis (a server of the lab's own) restarted empty before their deadline;\n")
		b.WriteString("- *no consumer: orders still queued at their deadline*: the instance runs no consumer (`SECKILL_CONSUMERS=0`), so the orders are accepted and not persisted when they fall due; an instance with consumers starts 3 s after the last deadline.\n\n")
		b.WriteString("| backend | expiry | " + strings.Join(lifecycleRaces, " | ") + " |\n")
		b.WriteString("|---|---|" + strings.Repeat("---|", len(lifecycleRaces)) + "\n")
		for _, r := range results {
			fmt.Fprintf(&b, "| %s | %s |", r.Backend, r.Expiry)
			for _, race := range r.Races {
				fmt.Fprintf(&b, " %s |", raceCell(race))
			}
			b.WriteString("\n")
		}
	}
	if old, err := os.ReadFile(o.out); err == nil {
		if i := strings.Index(string(old), keptMarker); i >= 0 {
			b.WriteString("\n" + string(old[i:]))
		}
	}
	return os.WriteFile(o.out, []byte(b.String()), 0o644)
}

func raceCell(r raceResult) string {
	if !r.Ran {
		return cell(r.Note)
	}
	verdict := "**held**"
	if !r.Held {
		verdict = "**broke**: " + cell(r.Broken)
	}
	out := fmt.Sprintf("%s %d / %d / %d", verdict, r.Paid, r.Cancelled, r.Refunded)
	if r.StruckAt > 0 {
		out += fmt.Sprintf("; killed after %d", r.StruckAt)
	}
	if r.BackIn > 0 {
		out += fmt.Sprintf("; back in %v", round(r.BackIn))
	}
	return out
}

// cell keeps a note inside its table cell.
func cell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(firstLine(s))
}
