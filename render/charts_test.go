package render

import (
	"bytes"
	"os"
	"testing"

	chart "github.com/wcharczuk/go-chart/v2"
)

// A point with AI_hbm = OI_knee and TF_est = P_peak must sit exactly on the ridge.
func TestRooflinePointAtKneeLandsOnRidge(t *testing.T) {
	c := Ceiling{Label: "H200 fp8", Peak: 1978.9, BW: 4.8e12}
	spec := RooflineSpec{Ceilings: []Ceiling{c}, Points: []RoofPoint{{Label: "at knee", AI: c.Knee(), TF: c.Peak}}}
	xmin, xmax, ymin, ymax := spec.Limits()
	xr, yr := LogRange{Min: xmin, Max: xmax, Domain: 1000}, LogRange{Min: ymin, Max: ymax, Domain: 600}
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
	gl := chart.LogarithmicRange{Min: xmin, Max: xmax, Domain: 1000}
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
