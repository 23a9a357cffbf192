package docs_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The measured files: what `make compare` and `make lifecycle` wrote (and
// results.md's hand-kept sections, each with its own run and command).
var measuredFiles = []string{"results.md", "lifecycle.md"}

// The files that quote them. A figure taken from a run is written in bold
// (or as a rate: "N req/s", "N orders/s"), and must be one of the measured
// files' figures: the outside review found iterations.md quoting runs of
// other days (sync 802 req/s where results.md said 958, list 17,329 where
// it said 9,553) and production.md a third set of Redis-restart losses.
var quotingFiles = []string{"iterations.md", "production.md", "../README.md"}

var (
	boldSpan = regexp.MustCompile(`\*\*([^*]+)\*\*`) // across a line's end too
	rate     = regexp.MustCompile(`(\d[\d,]*(?:\.\d+)?)\s*(?:req/s|orders/s)`)
	number   = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?`)
)

// figures are a text's numbers, commas dropped ("14,613" is 14613).
func figures(text string) []string {
	var out []string
	for _, n := range number.FindAllString(text, -1) {
		out = append(out, strings.ReplaceAll(strings.TrimRight(n, ","), ",", ""))
	}
	return out
}

// TestQuotedFiguresAreTheMeasuredOnes: every figure iterations.md,
// production.md and the README quote from a run — in bold, or a rate — is
// a figure of results.md or lifecycle.md. A re-measured results.md whose
// figures move makes this fail until the prose quoting them is brought
// along.
func TestQuotedFiguresAreTheMeasuredOnes(t *testing.T) {
	measured := map[string]bool{}
	for _, f := range measuredFiles {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range figures(string(raw)) {
			measured[n] = true
		}
	}
	for _, f := range quotingFiles {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := withoutCode(string(raw))
		lineOf := func(at int) int { return strings.Count(text[:at], "\n") + 1 }
		for _, re := range []*regexp.Regexp{boldSpan, rate} {
			for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
				for _, n := range figures(text[m[2]:m[3]]) {
					if !measured[n] {
						t.Errorf("%s:%d quotes %s, which neither results.md nor lifecycle.md holds: %q", f, lineOf(m[0]), n, text[m[0]:m[1]])
					}
				}
			}
		}
	}
}

// withoutCode blanks the fenced code blocks (commands, not quotes),
// keeping the lines where they were.
func withoutCode(text string) string {
	lines := strings.Split(text, "\n")
	inCode := false
	for i, line := range lines {
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		if inCode || fence {
			lines[i] = ""
		}
		if fence {
			inCode = !inCode
		}
	}
	return strings.Join(lines, "\n")
}
