package server

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
)

// Variable is one setting the server reads from the environment.
type Variable struct {
	Name string
	// Default is what an unset variable means, as the README shows it.
	Default string
	// Summary is one line for `seckill serve -h`; Meaning the README's
	// full text (markdown).
	Summary, Meaning string
}

// PrintVariables writes every variable the server reads, with its default
// and one line of meaning: `seckill serve -h`.
func PrintVariables(w io.Writer) {
	fmt.Fprintln(w, "Usage: seckill [serve]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Serves the API. Settings are environment variables (README.md has each in full);")
	fmt.Fprintln(w, "with SECKILL_REDIS_URL and SECKILL_MYSQL_DSN both unset it runs on embedded stand-ins.")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range variables {
		fmt.Fprintf(tw, "  %s\t%s\n  \tdefault: %s\n", v.Name, v.Summary, plainText(v.Default))
	}
	tw.Flush()
}

var markdownLink = regexp.MustCompile(`\[([^\]]+)\]\([^)]+\)`)

// plainText drops the markdown of a README cell: code marks and links.
func plainText(s string) string {
	return strings.ReplaceAll(markdownLink.ReplaceAllString(s, "$1"), "`", "")
}

// readmeTable is README.md's configuration table, made from variables.
func readmeTable() string {
	var b strings.Builder
	b.WriteString("| variable | meaning | default |\n|---|---|---|\n")
	for _, v := range variables {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, v.Meaning, v.Default)
	}
	return b.String()
}

// declared reports whether name is a variable of the table.
func declared(name string) bool {
	return slices.ContainsFunc(variables, func(v Variable) bool { return v.Name == name })
}

// unknownVariables names each SECKILL_* variable of environ (KEY=value
// entries) the server does not read, with the nearest known name: a typo
// (SECKILL_QEUE) would otherwise leave its setting silently at the
// default. SECKILL_TEST_* are the test suite's, not the server's.
func unknownVariables(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "SECKILL_") || strings.HasPrefix(name, "SECKILL_TEST_") || declared(name) {
			continue
		}
		out = append(out, fmt.Sprintf("%s is not a variable the server reads (did you mean %s?)", name, nearestVariable(name)))
	}
	return out
}

// nearestVariable is the declared name fewest edits away from name.
func nearestVariable(name string) string {
	best, bestDistance := "", -1
	for _, v := range variables {
		d := editDistance(name, v.Name)
		if strings.HasPrefix(v.Name, name+"_") {
			d = 1 // its last word left out (SECKILL_REDIS)
		}
		if bestDistance < 0 || d < bestDistance {
			best, bestDistance = v.Name, d
		}
	}
	return best
}

// editDistance counts the insertions, deletions, substitutions and
// swaps of neighbours that turn a into b (optimal string alignment).
func editDistance(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
