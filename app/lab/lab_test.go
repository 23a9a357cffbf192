package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill-lab/seckill/app/server"
)

// TestCompareWritesResults runs the lab on one backend for a moment and
// checks the results file, its row and the charts.
func TestCompareWritesResults(t *testing.T) {
	if testing.Short() {
		t.Skip("the lab runs a sale")
	}
	for _, k := range []string{"SECKILL_REDIS_URL", "SECKILL_MYSQL_DSN"} {
		t.Setenv(k, "") // embedded: the lab's own servers
	}
	out := filepath.Join(t.TempDir(), "results.md")
	if code := RunCompare([]string{"-duration", "300ms", "-conns", "4", "-drain-orders", "200",
		"-sellout-stock", "100", "-sellout-shoppers", "300",
		"-backends", "streamgroup", "-no-faults", "-out", out}); code != 0 {
		t.Fatalf("compare exited %d", code)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	var row string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "| streamgroup |") {
			row = l
		}
	}
	cells := strings.Split(row, "|")
	if len(cells) < 11 {
		t.Fatalf("no streamgroup row in:\n%s", text)
	}
	// | backend | req/s | p50 | p99 | row | drain | accepted of stock | oversold | dup | unpersisted |
	if strings.TrimSpace(cells[7]) != "100 of 100" || strings.TrimSpace(cells[8]) != "0" ||
		strings.TrimSpace(cells[9]) != "0" || strings.TrimSpace(cells[10]) != "0" {
		t.Fatalf("the sell-out row is wrong: %s", row)
	}
	if strings.TrimSpace(cells[2]) == "0" || strings.TrimSpace(cells[6]) == "0" {
		t.Fatalf("no throughput or drain measured: %s", row)
	}
	for _, svg := range []string{"results-throughput.svg", "results-drain.svg"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(out), svg))
		if err != nil || !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "streamgroup") {
			t.Fatalf("%s: %v", svg, err)
		}
	}
	if !strings.Contains(text, time.Now().UTC().Format("2006-01-02")) {
		t.Fatal("the results carry no date")
	}
	if !strings.Contains(text, "EMBEDDED STAND-INS") {
		t.Fatal("a run on the stand-ins does not say so at the top of its results")
	}
	// No fault ran: one line says so, not each fault's method and a table
	// of "not run" cells; and the stand-in's whole-second row times are a
	// dash, not a measured 0s.
	if n := strings.Count(text, "not run"); n > 1 || strings.Contains(text, "## Faults") || !strings.Contains(text, "Faults were not injected in this run") {
		t.Fatalf("the results repeat that faults did not run (%d times):\n%s", n, text)
	}
	if strings.Contains(row, "0s / 0s") {
		t.Fatalf("reservation → row reads 0s on the stand-in: %s", row)
	}
}

// TestTheSummaryUsesTheFilesDashes: the console summary shows a dash where
// the file does (no drain for sync and pubsub) and says when no fault ran,
// rather than a 0 drain rate and "lost 0".
func TestTheSummaryUsesTheFilesDashes(t *testing.T) {
	got := summary([]labResult{{Backend: "sync", Load: loadResult{Duration: time.Second}}, {Backend: "pubsub", Load: loadResult{Duration: time.Second}}})
	if strings.Contains(got, " 0 \n") || strings.Count(got, "—") < 2 || !strings.Contains(got, "faults: not injected") {
		t.Fatalf("summary:\n%s", got)
	}
}

// TestTheCommittedResultsNeedRealServers: on the stand-ins, -write-docs is
// refused before anything runs, and the default output is the untracked
// folder, not docs/results.md.
func TestTheCommittedResultsNeedRealServers(t *testing.T) {
	for _, k := range []string{"SECKILL_REDIS_URL", "SECKILL_MYSQL_DSN"} {
		t.Setenv(k, "")
	}
	if code := RunCompare([]string{"-write-docs", "-backends", "none"}); code != 2 {
		t.Fatalf("-write-docs on the stand-ins exited %d, want 2 (refused)", code)
	}
	if defaultOut == docsOut || !strings.HasPrefix(defaultOut, "compare-results/") {
		t.Fatalf("the default output %q is not the untracked folder", defaultOut)
	}
	ignored, err := os.ReadFile("../../.gitignore")
	if err != nil || !strings.Contains(string(ignored), "/compare-results/") {
		t.Fatalf(".gitignore does not keep compare-results/ untracked: %v", err)
	}
}

// TestRewritingResultsKeepsTheHandWrittenPart: make compare rewrites the
// measured part of a results file and keeps what follows the marker.
func TestRewritingResultsKeepsTheHandWrittenPart(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results.md")
	kept := keptMarker + "\n\n## By hand\n\nmeasured elsewhere\n"
	if err := os.WriteFile(out, []byte("# old table\n\n"+kept), 0o644); err != nil {
		t.Fatal(err)
	}
	o := labOptions{out: out, vouchers: 12, duration: time.Second, conns: 1}
	if err := writeResults(o, server.Config{}, []labResult{{Backend: "memory"}}, "seckill compare"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	if strings.Contains(string(got), "# old table") || !strings.HasSuffix(string(got), kept) ||
		!strings.Contains(string(got), "12 vouchers") {
		t.Fatalf("rewritten file:\n%s", got)
	}
}

// TestALabFaultThatFailsBecomesItsNote: a topology that fails or skips
// inside a lab fault ends that fault alone, as its cell's note, with what
// it had started cleaned up, last first.
func TestALabFaultThatFailsBecomesItsNote(t *testing.T) {
	var order []string
	ran := false
	note := withLabT(func(lt *labT) {
		dir := lt.TempDir()
		lt.Cleanup(func() { order = append(order, "first") })
		lt.Cleanup(func() { order = append(order, "second") })
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("TempDir: %v", err)
		}
		lt.Skip("no redis-server binary on this machine")
		ran = true
	})
	if ran || note != "not run: no redis-server binary on this machine" {
		t.Fatalf("note %q (went on after the skip: %v), want the skip as the note", note, ran)
	}
	if strings.Join(order, ",") != "second,first" {
		t.Fatalf("cleanups ran as %v, want last first", order)
	}
	if note := withLabT(func(lt *labT) { lt.Fatalf("port %d did not answer", 7) }); note != "port 7 did not answer" {
		t.Fatalf("note %q, want the failure", note)
	}
	if note := withLabT(func(*labT) {}); note != "" {
		t.Fatalf("note %q from a run that did not fail", note)
	}
}

// TestRowLatencyIsADashWhereItWasNotMeasured: on the stand-ins every row
// reads 0s (SQLite's whole seconds); the progress line and the report say
// so instead of printing "p50 0s, p99 0s" for every backend.
func TestRowLatencyIsADashWhereItWasNotMeasured(t *testing.T) {
	if got := rowLatencyCell(0, 0, ", "); !strings.HasPrefix(got, "—") {
		t.Errorf("not measured: %q, want a dash", got)
	}
	if got := rowLatencyCell(3*time.Millisecond, 40*time.Millisecond, " / "); got != "3ms / 40ms" {
		t.Errorf("measured: %q", got)
	}
}
