package serve

import (
	"bytes"
	"math"
	"testing"
)

// FuzzParseWorkload: any bytes as a workload CSV parse into whole, positive lengths and
// positive finite weights, or fail naming the line; the means and quantiles of a parsed one
// are finite.
func FuzzParseWorkload(f *testing.F) {
	f.Add([]byte("isl,osl\n100,200\n300,50\n"))
	f.Add([]byte("1000,100,5\n# comment\n\n2000,300,1e3\n"))
	f.Add([]byte("1,1,NaN\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWorkload("w.csv", bytes.NewReader(data))
		if err != nil {
			return
		}
		for i := range w.ISL {
			if !(w.ISL[i] >= 1 && w.OSL[i] >= 1 && w.Weight[i] > 0) || math.IsInf(w.Weight[i], 0) {
				t.Fatalf("row %d: %g, %g, %g", i, w.ISL[i], w.OSL[i], w.Weight[i])
			}
		}
		if len(w.ISL) > 0 {
			isl, osl := w.Means()
			if math.IsNaN(isl) || math.IsNaN(osl) || math.IsInf(isl, 0) || math.IsNaN(w.Quantile(0.9)) {
				t.Fatalf("means %g %g", isl, osl)
			}
		}
	})
}
