// Package render writes analysis values as markdown (and, elsewhere, charts). Pure: it takes
// values and writes to an io.Writer; it never reads files or the database.
package render

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	"github.com/mrep-dev/mrep/internal/units"
)

// Comma formats an integer with thousands separators: 671026404352 -> 671,026,404,352.
func Comma(n int64) string { return units.Comma(n) }

// IEC formats a size in bytes with binary units, labelled as such (KiB, MiB, GiB, TiB).
func IEC(n float64) string { return units.IEC(n) }

// Shape formats a tensor shape as torch prints it: (512, 256); lazy tensors have none.
func Shape(s []int64) string {
	if s == nil {
		return "(lazy)"
	}
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatInt(d, 10)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// Sci formats a float for tables: fixed for ordinary magnitudes, scientific otherwise.
func Sci(x float64) string {
	ax := math.Abs(x)
	if x == 0 || (ax >= 1e-3 && ax < 1e6) {
		return strconv.FormatFloat(x, 'f', 6, 64)
	}
	return strconv.FormatFloat(x, 'e', 4, 64)
}

// cell escapes a value for a markdown table cell: no raw control characters, no bare '|'.
func cell(s string) string { return strings.ReplaceAll(Visible(s), "|", `\|`) }

// mdName is a name from a user's file (a chip, a price source) as markdown text: visible, and
// with the characters a markdown viewer would take for HTML escaped, so a "<script>" in a
// chips file is shown, never run.
func mdName(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(Visible(s))
}

// table writes a markdown table; align holds one of l, r, c (left, right, centre) per column.
func table(w *errWriter, header []string, align string, rows [][]string) {
	w.printf("|")
	for _, h := range header {
		w.printf(" %s |", cell(h))
	}
	w.printf("\n|")
	for i := range header {
		switch {
		case i < len(align) && align[i] == 'r':
			w.printf("---:|")
		case i < len(align) && align[i] == 'c':
			w.printf(":---:|")
		default:
			w.printf("---|")
		}
	}
	w.printf("\n")
	for _, r := range rows {
		w.printf("|")
		for _, c := range r {
			w.printf(" %s |", cell(c))
		}
		w.printf("\n")
	}
}

// FileStem turns a user-chosen name (a profile's) into a file-name stem that cannot leave its
// directory or confuse a shell: letters, digits, '-', '_' and '.' are kept (no leading dot),
// anything else becomes '_', and a name that had to change gets a short hash so that two
// names never share a file.
func FileStem(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.TrimLeft(b.String(), ".")
	if len(s) > 48 {
		s = s[:48]
	}
	if s == name && s != "" {
		return s
	}
	h := sha256.Sum256([]byte(name))
	return s + "-" + hex.EncodeToString(h[:4])
}
