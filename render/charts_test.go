package render

import (
	"bytes"
	"os"
	"strings"
	"testing"

	gochart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"

	"github.com/mrep-dev/mrep/render/chart"
)

// A point with AI_hbm = OI_knee and TF_est = P_peak must sit exactly on the ridge.
func TestRooflinePointAtKneeLandsOnRidge(t *testing.T) {
	c := Ceiling{Label: "H200 fp8", Peak: 1978.9, BW: 4.8e12}
	spec := RooflineSpec{Ceilings: []Ceiling{c}, Points: []RoofPoint{{Label: "at knee", AI: c.Knee(), TF: c.Peak}}}
	xmin, xmax, ymin, ymax := spec.Limits()
	xr, yr := chart.LogRange{Min: xmin, Max: xmax, Domain: 1000}, chart.LogRange{Min: ymin, Max: ymax, Domain: 600}
	if xr.Translate(c.Knee()) != xr.Translate(spec.Points[0].AI) || yr.Translate(c.Peak) != yr.Translate(spec.Points[0].TF) {
		t.Fatal("point and ridge differ")
	}
	// Equal ratios, equal distances: 10x is a decade wherever it is.
	if d1, d2 := xr.Translate(10)-xr.Translate(1), xr.Translate(1e4)-xr.Translate(1e3); d1 != d2 || d1 == 0 {
		t.Fatalf("decades %d and %d px", d1, d2)
	}
	// The slope meets the ceiling at the knee: BW * knee = peak.
	if got := c.BW * c.Knee() / 1e12; got != c.Peak {
		t.Fatalf("slope at knee %g", got)
	}
	// go-chart's LogarithmicRange puts the same knee elsewhere than a true log axis does.
	gl := gochart.LogarithmicRange{Min: xmin, Max: xmax, Domain: 1000}
	if gl.Translate(c.Knee()) == xr.Translate(c.Knee()) {
		t.Fatal("go-chart's LogarithmicRange was expected to misplace the knee (log of the offset from Min)")
	}
	var buf bytes.Buffer
	if err := RenderSVG(Roofline(spec), &buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte("H200 fp8 roof, ridge 412 FLOP/B")) {
		t.Fatal("ridge legend missing")
	}
	if out := os.Getenv("MREP_CHART_OUT"); out != "" { // look at it: MREP_CHART_OUT=/tmp/r.png
		var png bytes.Buffer
		spec.Ceilings = append(spec.Ceilings, Ceiling{Label: "B200 fp8", Peak: 4500, BW: 7.7e12})
		spec.Points = append(spec.Points, RoofPoint{Label: "decode", AI: 7.7, TF: 36, Group: 1}, RoofPoint{Label: "prefill", AI: 430, TF: 1800, Group: 2})
		spec.GroupNames = []string{"at knee", "decode", "prefill"}
		spec.LabelPoints = true
		RenderPNG(Roofline(spec), &png)
		os.WriteFile(out, png.Bytes(), 0o644)
	}
}

func TestPlainAndPct(t *testing.T) {
	for x, want := range map[float64]string{118.9: "118.9", 0.00123: "0.001230", 2156161.76: "2,156,162", 3.038: "3.038", 0.753: "0.7530", 1e-5: "1e-05", 0: "0", 9999: "9999"} {
		if got := Plain(x); got != want {
			t.Errorf("Plain(%g) = %q, want %q", x, got, want)
		}
	}
	for f, want := range map[float64]string{0.01637: "1.64%", 0.9908: "99.1%", 7.291e-07: "0.0000729%", 0.5: "50.0%", 0: "0%"} {
		if got := Pct(f); got != want {
			t.Errorf("Pct(%g) = %q, want %q", f, got, want)
		}
	}
}

// The chart conventions: value axis on the left with its name written horizontally, decades
// written 1000 and 10⁴ (never 1e3), hollow rings for points below the floor, sweep tags, and
// one colour per category in the pie, the stacks and the category rooflines.
func TestChartConventions(t *testing.T) {
	c := Ceiling{Label: "H100", Peak: 989, BW: 3.35e12}
	spec := RooflineSpec{Ceilings: []Ceiling{c}, GroupNames: []string{"attention"}, GroupColors: []drawing.Color{CategoryColor("attention", 5)},
		Points: []RoofPoint{{Label: "B=1", AI: 1, TF: 3, Tag: true}, {Label: "B=8", AI: 8, TF: 24, Tag: true, Hollow: true}}}
	var buf bytes.Buffer
	if err := RenderSVG(Roofline(spec), &buf); err != nil {
		t.Fatal(err)
	}
	svg := buf.String()
	for _, want := range []string{">1000<", ">10⁴<", ">B=1<", ">B=8<", "hollow: below the compulsory HBM traffic", ">TF_est (TFLOP/s, log)<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("roofline SVG lacks %q", want)
		}
	}
	if strings.Contains(svg, ">1e3<") || strings.Contains(svg, ">1e4<") {
		t.Error("decades written as 1e3")
	}
	// the axis name is not rotated, and the value axis sits left of the plot
	for _, line := range strings.Split(svg, "\n") {
		if strings.Contains(line, "TF_est (TFLOP/s, log)") && strings.Contains(line, "rotate") {
			t.Errorf("axis name rotated: %s", line)
		}
	}
	ch := Roofline(spec)
	if !ch.YAxis.Style.Hidden || ch.YAxisSecondary.Style.Hidden || len(ch.YAxisSecondary.Ticks) == 0 {
		t.Error("the value axis is not the left (secondary) one")
	}
	// a ring: a white dot stroked in the group's colour
	ringed := false
	for _, s := range ch.Series {
		if cs, ok := s.(gochart.ContinuousSeries); ok && cs.Style.DotColor == drawing.ColorWhite && cs.Style.StrokeColor == CategoryColor("attention", 0) {
			ringed = true
		}
	}
	if !ringed {
		t.Error("the below-floor point is not drawn hollow")
	}
	// one colour per category everywhere
	pie := chart.Pie("p", []string{"dense_ffn", "attention"}, []float64{70, 30}, CategoryColor)
	stacks := chart.Stacks("s", []chart.StackBar{{Name: "x", Labels: []string{"attention", "dense_ffn"}, Shares: []float64{0.3, 0.7}}}, []string{"attention", "dense_ffn"}, CategoryColor)
	if pie.Values[1].Style.FillColor != CategoryColor("attention", 0) || stacks.Bars[0].Values[0].Style.FillColor != CategoryColor("attention", 9) {
		t.Error("attention has different colours in the pie and the stacks")
	}
	if CategoryColor("attention", 0) == CategoryColor("dense_ffn", 0) {
		t.Error("two categories share a colour")
	}
}
