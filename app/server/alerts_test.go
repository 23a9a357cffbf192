package server

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/seckill-lab/seckill/adapters/testenv/redistopology"
)

// TestTheAlertRulesFollowTheMetrics: docs/prometheus/alerts.yml names only
// metrics this server exports (a renamed metric would silence its alert
// for ever), every alert has its runbook entry in docs/production.md, and
// promtool checks the rules and runs their unit tests (CI installs it;
// elsewhere the test skips without it).
func TestTheAlertRulesFollowTheMetrics(t *testing.T) {
	rules, err := os.ReadFile("../../docs/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	source, err := os.ReadFile("metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile(`"(seckill_[a-z_]+)"`).FindAllStringSubmatch(string(source), -1) {
		exported[m[1]] = true
	}
	used := regexp.MustCompile(`seckill_[a-z_]+`).FindAllString(string(rules), -1)
	if len(used) < 10 {
		t.Fatalf("only %d metric names found in the rules", len(used))
	}
	for _, name := range used {
		if !exported[name] {
			t.Errorf("alerts.yml uses %s, which the server does not export", name)
		}
	}
	guide, err := os.ReadFile("../../docs/production.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`alert: (\w+)`).FindAllStringSubmatch(string(rules), -1) {
		if !strings.Contains(string(guide), "### "+m[1]) {
			t.Errorf("alert %s has no runbook entry (### %s) in docs/production.md", m[1], m[1])
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if redistopology.InCI() {
			t.Fatal("promtool is not installed: .ci/run installs Debian's prometheus package for it")
		}
		t.Skip("promtool is not installed (apt-get install prometheus): the rules are not checked here")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../../docs/prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
