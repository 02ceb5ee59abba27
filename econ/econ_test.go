package econ

import (
	"math"
	"testing"

	"github.com/mrep-dev/mrep/chips"
)

// By hand: 1e12 tokens at 1e6 tokens/s on 1,000 GPUs take 1e6 s, 277,778 GPU-hours; at
// $2 per GPU-hour $555,556; at 1,000 W per GPU (node share included) 1 MW for 1e6 s,
// 277.8 MWh.
func TestTrainingByHand(t *testing.T) {
	p := chips.Power{TDPW: 800, IdleW: 100, NodeOverheadW: 200}
	r, err := Training(1e12, 1e6, 1000, 1, 2, "test", p)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"seconds", r.Seconds, 1e6}, {"GPU-hours", r.GPUHours, 1e9 / 3600}, {"USD", r.USD, 2e9 / 3600},
		{"watts", r.WattsPerGPU, 1000}, {"MWh", r.MWh, 1e9 / 3.6e6},
	} {
		if math.Abs(c.got-c.want) > 1e-9*c.want {
			t.Errorf("%s = %g, want %g", c.what, c.got, c.want)
		}
	}
	// a half-busy GPU draws halfway between idle and TDP
	if h, _ := Training(1e12, 1e6, 1000, 0.5, 0, "", p); h.WattsPerGPU != 100+350+200 || h.USD != 0 {
		t.Errorf("half busy: %g W, $%g", h.WattsPerGPU, h.USD)
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := Training(bad, 1e6, 8, 1, 0, "", p); err == nil {
			t.Errorf("tokens %g accepted", bad)
		}
	}
}
