package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// linkPattern finds markdown links and images: [text](target).
var linkPattern = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestEveryLinkInTheDocsLeadsSomewhere: each relative link in the README
// and docs/*.md names a file that exists and, with #anchor, a heading of
// that file (GitHub's slug of it). A renamed heading or file breaks the
// reader's way, not the build: this test makes it break the build.
func TestEveryLinkInTheDocsLeadsSomewhere(t *testing.T) {
	files, _ := filepath.Glob("*.md")
	files = append(files, "../README.md")
	headings := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := headings[path]; ok {
			return a
		}
		a := map[string]bool{}
		raw, _ := os.ReadFile(path)
		inCode := false
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "```") {
				inCode = !inCode
			}
			if !inCode && strings.HasPrefix(line, "#") {
				a[slug(strings.TrimLeft(line, "# "))] = true
			}
		}
		headings[path] = a
		return a
	}
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkPattern.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(filepath.Dir(f), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link to %s: no such file", f, target)
					continue
				}
			}
			checked++
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
				t.Errorf("%s: link to %s: no heading with that anchor in %s", f, target, path)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d links checked: the pattern finds none?", checked)
	}
}

// slug is GitHub's anchor of a heading: lower case, spaces to hyphens,
// punctuation dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
