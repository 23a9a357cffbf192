package main

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// terminalSafe writes to a terminal what a dead letter's fields say, never
// what they would do: every control character but the newline and the tab
// that lay the text out (ESC, CSI, DEL, the C1 controls, the bidirectional
// overrides) is written as its escape. A letter's text is anyone's: the
// review's reason "\e[2J\e[H\e[32mno open dead letters\e[8m" cleared the
// operator's screen and hid what followed.
type terminalSafe struct{ w io.Writer }

func (t terminalSafe) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, escapeControls(string(p), "\n\t")); err != nil {
		return 0, err
	}
	return len(p), nil
}

// printable is v as one cell of a table: every control character escaped,
// the tab and the newline too.
func printable(v any) string { return escapeControls(fmt.Sprint(v), "") }

// escapeControls escapes the control characters of s but those in keep,
// and any byte that is not UTF-8.
func escapeControls(s, keep string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strings.ContainsRune(keep, r):
			b.WriteRune(r)
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
