package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Variable is one setting the server reads from the environment: one of
// the server's own (its table, bound to a Config field) or a backend's
// (Backend.Variables, read with Parse). Every variable, either kind, is a
// row of the one table that README.md's configuration table, `seckill
// serve -h`, the env template (`seckill env`), the unknown-name warning at
// start and the environment of a child process (Config.Environment) are
// made from.
type Variable struct {
	Name string
	// Default is what an unset variable means, as the README shows it.
	Default string
	// Summary is one line for `seckill serve -h`; Meaning the README's
	// full text (markdown).
	Summary, Meaning string
	// Parse checks and reads a backend's variable: value is the
	// environment's, trimmed ("" when unset, which Parse turns into its
	// default). What it returns is what the backend reads back
	// (Config.Setting); an error stops the start, naming the variable. Nil
	// keeps the value as the string it is.
	Parse func(value string) (any, error)
	// field binds one of the server's own variables to its Config field.
	field field
}

// field reads one of the server's own variables into Config (value is
// the environment's, trimmed; "" when unset) and writes it back as the
// environment would carry it.
type field struct {
	load func(c *Config, value string) error
	env  func(c Config) string
}

// textField is a string variable, def when unset; check, if set, refuses
// a bad value other than "".
func textField(at func(*Config) *string, def string, check func(string) error) field {
	return field{
		load: func(c *Config, v string) error {
			if v == "" {
				v = def
			}
			if check != nil && v != "" {
				if err := check(v); err != nil {
					return err
				}
			}
			*at(c) = v
			return nil
		},
		env: func(c Config) string { return *at(&c) },
	}
}

// intField is an integer variable from lo to hi, def when unset.
func intField(at func(*Config) *int, def, lo, hi int) field {
	return field{
		load: func(c *Config, v string) error {
			n, err := parseInt(v, def, lo, hi)
			*at(c) = n
			return err
		},
		env: func(c Config) string { return strconv.Itoa(*at(&c)) },
	}
}

func parseInt(v string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want an integer from %d to %d", lo, hi)
	}
	return n, nil
}

// durationField is a positive duration, def when unset; check, if set,
// bounds it further.
func durationField(at func(*Config) *time.Duration, def time.Duration, check func(time.Duration) error) field {
	return field{
		load: func(c *Config, v string) error {
			d := def
			if v != "" {
				var err error
				if d, err = time.ParseDuration(v); err != nil || d <= 0 {
					return errors.New("want a positive Go duration, e.g. 30s or 1m")
				}
			}
			if check != nil {
				if err := check(d); err != nil {
					return err
				}
			}
			*at(c) = d
			return nil
		},
		env: func(c Config) string { return at(&c).String() },
	}
}

// fractionField is a share from 0 to 1, 0 when unset.
func fractionField(at func(*Config) *float64) field {
	return field{
		load: func(c *Config, v string) error {
			f := 0.0
			if v != "" {
				var err error
				if f, err = strconv.ParseFloat(v, 64); err != nil || f < 0 || f > 1 {
					return errors.New("want a fraction from 0 to 1, e.g. 0.3")
				}
			}
			*at(c) = f
			return nil
		},
		env: func(c Config) string { return strconv.FormatFloat(*at(&c), 'g', -1, 64) },
	}
}

// boolField is a boolean variable (1 or 0, true or false), def when unset.
func boolField(at func(*Config) *bool, def bool) field {
	return field{
		load: func(c *Config, v string) error {
			b, err := parseBool(v, def)
			*at(c) = b
			return err
		},
		env: func(c Config) string { return boolEnv(*at(&c)) },
	}
}

// boolSetting and intSetting parse a backend's boolean and integer
// variables (Variable.Parse).
func boolSetting(def bool) func(string) (any, error) {
	return func(v string) (any, error) { return parseBool(v, def) }
}

func intSetting(def, lo, hi int) func(string) (any, error) {
	return func(v string) (any, error) { return parseInt(v, def, lo, hi) }
}

func parseBool(v string, def bool) (bool, error) {
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errors.New("want 1 or 0 (true or false)")
	}
	return b, nil
}

func boolEnv(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// hostPort refuses what is not host:port.
func hostPort(example string) func(string) error {
	return func(v string) error {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return errors.New("want host:port, e.g. " + example)
		}
		return nil
	}
}

// oneOf refuses a value not among the allowed ones.
func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(allowed, v) {
			return errors.New("want " + strings.Join(allowed, " or "))
		}
		return nil
	}
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
	for _, v := range Variables() {
		fmt.Fprintf(tw, "  %s\t%s\n  \tdefault: %s\n", v.Name, v.Summary, plainText(v.Default))
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, line := range tracingNote {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w, "  "+strings.Join(OTELVariables, "\n  "))
}

// tracingNote says, in serve -h and the env template, which variables
// turn traces on: the OpenTelemetry specification's, read by its SDK, not
// the server's table (a new user looked for them there).
var tracingNote = []string{
	"Traces are off unless OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set:",
	"spans then go over OTLP http/protobuf (docs/production.md, Traces). The OpenTelemetry SDK reads these:",
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
	for _, v := range Variables() {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, v.Meaning, v.Default)
	}
	return b.String()
}

// PrintEnvTemplate writes an environment file of every variable, each
// commented out with its default and one line of meaning: `seckill env`,
// the start of a deployment's configuration.
func PrintEnvTemplate(w io.Writer) {
	fmt.Fprintln(w, "# The seckill server's settings (seckill serve -h; README.md has each in full).")
	fmt.Fprintln(w, "# Uncomment what you set; an unset variable takes its default.")
	for _, v := range Variables() {
		fmt.Fprintf(w, "\n# %s\n# default: %s\n#%s=\n", v.Summary, plainText(v.Default), v.Name)
	}
	fmt.Fprintln(w)
	for _, line := range tracingNote {
		fmt.Fprintln(w, "# "+line)
	}
	for _, name := range OTELVariables {
		fmt.Fprintf(w, "#%s=\n", name)
	}
}

// Variables are every variable the server reads, in the table's order: its
// own, with each registered backend's after SECKILL_QUEUE.
func Variables() []Variable {
	var out []Variable
	for _, v := range variables {
		out = append(out, v)
		if v.Name == "SECKILL_QUEUE" {
			for _, b := range Backends() {
				out = append(out, b.Variables...)
			}
		}
	}
	return out
}

// variable is the declared variable of that name.
func variable(name string) (Variable, bool) {
	all := Variables()
	i := slices.IndexFunc(all, func(v Variable) bool { return v.Name == name })
	if i < 0 {
		return Variable{}, false
	}
	return all[i], true
}

// declared reports whether name is a variable of the table.
func declared(name string) bool {
	_, ok := variable(name)
	return ok
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
	for _, v := range Variables() {
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
