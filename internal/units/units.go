// Package units formats quantities the one way every mrep output uses: SI prefixes for FLOPs
// and traffic, IEC for capacities.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// SI formats x with decimal prefixes: SI(1.3e12, "B") = "1.30 TB".
func SI(x float64, unit string) string {
	prefixes := []string{"", "k", "M", "G", "T", "P", "E"}
	i := 0
	for math.Abs(x) >= 1000 && i < len(prefixes)-1 {
		x /= 1000
		i++
	}
	return fmt.Sprintf("%.2f %s%s", x, prefixes[i], unit)
}

// IEC formats a size in bytes with binary units (KiB, MiB, GiB, TiB, PiB).
func IEC(n float64) string {
	names := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for math.Abs(n) >= 1024 && i < len(names)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.2f %s", n, names[i])
}

// Comma formats an integer with thousands separators: 671026404352 -> 671,026,404,352.
func Comma(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
