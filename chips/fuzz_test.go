package chips

import (
	"bytes"
	"math"
	"testing"
)

// FuzzParseChips: any bytes as a chips file either fail naming the file or give chips whose
// figures are finite, positive and within physical bounds.
func FuzzParseChips(f *testing.F) {
	f.Add([]byte(`{"chips":[{"name":"X","peak_tflops":{"bf16":1000},"memory_gib":80,"hbm_gbps":3000,"scale_up_gbps":450,"tdp_w":700,"sources":["s"]}]}`))
	f.Add([]byte(`{"chips":[{"name":"Y","peak_tflops":{"bf16":-1},"memory_gib":1e300,"hbm_gbps":0,"scale_up_gbps":450,"sources":[]}]}`))
	f.Add([]byte(`{"chips":[{"name":"Z","peak_tflops":{"fp8":2000},"memory_gib":141,"hbm_gbps":4800,"scale_up_gbps":450,"tdp_w":700,"sources":["s"],"efficiency":{"hbm_frac":2}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		db, err := Parse("c.json", bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, c := range db.All() {
			if err := c.physical(); err != nil {
				t.Fatalf("%s accepted: %v", c.Name, err)
			}
			for d, v := range c.PeakTFLOPs {
				if !(v > 0) || math.IsInf(v, 0) {
					t.Fatalf("%s peak %s %g", c.Name, d, v)
				}
			}
		}
	})
}
