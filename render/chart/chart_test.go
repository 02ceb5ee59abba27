package chart

import (
	"bytes"
	"strings"
	"testing"

	gochart "github.com/wcharczuk/go-chart/v2"
)

// Equal ratios get equal distances on a LogRange, and the ends map to the domain's ends.
func TestLogRangeDecades(t *testing.T) {
	r := LogRange{Min: 0.1, Max: 1e5, Domain: 600}
	if r.Translate(0.1) != 0 || r.Translate(1e5) != 600 {
		t.Fatalf("ends at %d and %d px", r.Translate(0.1), r.Translate(1e5))
	}
	if d1, d2 := r.Translate(10)-r.Translate(1), r.Translate(1e4)-r.Translate(1e3); d1 != d2 || d1 != 100 {
		t.Fatalf("decades %d and %d px, want 100", d1, d2)
	}
	var labels []string
	for _, tk := range LogTicks(0.1, 1e5) {
		labels = append(labels, tk.Label)
	}
	if got := strings.Join(labels, " "); got != "0.1 1 10 100 1000 10⁴ 10⁵" {
		t.Fatalf("log ticks %q", got)
	}
}

// Nice axes widen to round ticks around the data, written without exponents.
func TestNiceAxis(t *testing.T) {
	lo, hi, ticks := niceRange(0.95, 2.1)
	if lo > 0.95 || hi < 2.1 || len(ticks) < 3 {
		t.Fatalf("range [%g, %g] with %d ticks does not hold [0.95, 2.1]", lo, hi, len(ticks))
	}
	for v, want := range map[float64]string{0: "0", 0.25: "0.25", 40: "40", 12000: "12,000", -25000: "-25,000"} {
		if got := TickNumber(v); got != want {
			t.Errorf("TickNumber(%g) = %q, want %q", v, got, want)
		}
	}
}

// SVG output escapes every string: a title holding markup stays text.
func TestRenderSVGEscapes(t *testing.T) {
	c := gochart.Chart{Title: "<script>x</script>", Width: 300, Height: 200,
		Series: []gochart.Series{gochart.ContinuousSeries{XValues: []float64{1, 2}, YValues: []float64{1, 2}}}}
	var buf bytes.Buffer
	if err := RenderSVG(c, &buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "<script>") || !strings.Contains(buf.String(), "&lt;script&gt;") {
		t.Fatal("markup in a title reached the SVG unescaped")
	}
}
