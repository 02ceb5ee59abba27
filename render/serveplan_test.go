package render

import (
	"bytes"
	"strings"
	"testing"

	gochart "github.com/wcharczuk/go-chart/v2"

	"github.com/mrep-dev/mrep/render/chart"
	"github.com/mrep-dev/mrep/serve"
)

// The chip chart answers "which chip" at the SLO: one curve per chip in its own colour, the
// legend ranked by each chip's most tokens/s per GPU right of the TPOT line (a point left of it,
// however high, does not count), that point ringed, and a chip that cannot reach the line last.
func TestServeChipsChartRanksChipsAtTheSLO(t *testing.T) {
	pt := func(chip string, user, gpu, b float64) serve.Config {
		return serve.Config{Chip: chip, TP: 1, EP: 1, PP: 1, Replicas: 1, BatchCap: b, TokSPerUser: user, TokSPerGPU: gpu}
	}
	p := serve.Plan{Options: serve.PlanOptions{TPOT: 0.05}, Pareto: []serve.Config{
		pt("slow", 10, 5000, 256), pt("slow", 25, 900, 64), pt("slow", 40, 500, 16), // highest anywhere, lowest at 20 tok/s/user
		pt("fast", 10, 3000, 256), pt("fast", 22, 2000, 64), pt("fast", 60, 800, 8),
		pt("never", 5, 4000, 512), pt("never", 15, 3500, 128),
	}}
	ch := ServeChipsChart("t", p)
	var legend []string
	var svg bytes.Buffer
	if err := RenderSVG(ch, &svg); err != nil {
		t.Fatal(err)
	}
	s := svg.String()
	for _, want := range []string{"1. fast: 2000 tok/s/GPU at 22 tok/s/user, TP1 B64", "2. slow: 900 tok/s/GPU at 25 tok/s/user, TP1 B64", "never: misses the TPOT SLO"} {
		i := strings.Index(s, want)
		if i < 0 {
			t.Errorf("legend lacks %q", want)
		}
		legend = append(legend, want)
		if len(legend) > 1 && i < strings.Index(s, legend[len(legend)-2]) {
			t.Errorf("%q comes before %q", legend[len(legend)-2], want)
		}
	}
	curves := map[string]gochart.ContinuousSeries{}
	rings := 0
	for _, sr := range ch.Series {
		cs, ok := sr.(gochart.ContinuousSeries)
		if !ok {
			continue
		}
		if cs.Name != "" {
			curves[cs.Name] = cs
		} else if cs.Style.DotColor == chart.ColorAt(0) || cs.Style.DotColor == chart.ColorAt(1) {
			rings++
			if cs.XValues[0] < 20 {
				t.Errorf("a ringed point at %g tok/s/user, left of the SLO", cs.XValues[0])
			}
		}
	}
	if len(curves) != 4 || rings != 2 {
		t.Fatalf("curves %d (3 chips and the SLO), rings %d", len(curves), rings)
	}
	if curves["fast"].Style.StrokeColor != chart.ColorAt(0) || curves["slow"].Style.StrokeColor != chart.ColorAt(1) ||
		curves["never"].Style.StrokeColor != chart.ColorAt(2) {
		t.Error("colours do not follow the ranking")
	}
}

// Seven chips get seven colours.
func TestPaletteHoldsSevenChips(t *testing.T) {
	seen := map[string]bool{}
	for i := range 7 {
		seen[chart.ColorAt(i).String()] = true
	}
	if len(seen) != 7 {
		t.Errorf("%d colours for 7 chips", len(seen))
	}
}
