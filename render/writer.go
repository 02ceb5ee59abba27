package render

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// errWriter keeps the first write error so rendering code reads as plain prose.
type errWriter struct {
	w   io.Writer
	err error
}

// md is text the renderer composed itself (several lines, table rows, diagrams): it passes
// printf as is. Every plain string argument is someone's data (a model, module, label, chip
// or profile name) and has its control characters escaped, so a name cannot start a line, a
// heading or a table row of its own.
type md string

func (e *errWriter) printf(format string, args ...any) {
	if e.err != nil {
		return
	}
	for i, a := range args {
		switch v := a.(type) {
		case string:
			args[i] = Visible(v)
		case md:
			args[i] = string(v)
		}
	}
	_, e.err = fmt.Fprintf(e.w, format, args...)
}

// Visible escapes what a terminal or a markdown line must not receive raw: control characters
// (newline, ESC, NUL, BEL, DEL, C1), bidirectional overrides and isolates, and invalid UTF-8,
// each as a visible \x.. or \u.... escape. Printable text is unchanged.
func Visible(s string) string {
	clean := true
	for i, r := range s {
		if r == utf8.RuneError || unsafeRune(r) {
			_ = i
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case unsafeRune(r):
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true // bidi embeddings, overrides, isolates and marks
	case r == 0x2028 || r == 0x2029:
		return true // line and paragraph separators
	}
	return !unicode.IsPrint(r) && !unicode.IsSpace(r) && unicode.Is(unicode.Cc, r)
}
