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

// By hand: 8 GPUs at $2 per GPU-hour cost $16 an hour; at 4,000 output tokens/s that is
// 14.4e6 tokens an hour, $1.111 per million. Fully busy at 1,000 W per GPU (node share
// included) they draw 8 kW: 2 J per token.
func TestServingByHand(t *testing.T) {
	p := chips.Power{TDPW: 800, IdleW: 100, NodeOverheadW: 200}
	c := Serving(4000, 8, 1, 2, p)
	for _, x := range []struct {
		what      string
		got, want float64
	}{{"$/1M tokens", c.USDPerMTok, 16 / 14.4}, {"J/token", c.JPerTok, 2}, {"watts", c.WattsPerGPU, 1000}} {
		if math.Abs(x.got-x.want) > 1e-12*x.want {
			t.Errorf("%s = %g, want %g", x.what, x.got, x.want)
		}
	}
	// no price: no dollars; no throughput: only the draw (idle floor and node share)
	if c := Serving(4000, 8, 1, 0, p); c.USDPerMTok != 0 || c.JPerTok != 2 {
		t.Errorf("unpriced: %+v", c)
	}
	if c := Serving(0, 8, 0, 2, p); c.USDPerMTok != 0 || c.JPerTok != 0 || c.WattsPerGPU != 300 {
		t.Errorf("no throughput: %+v", c)
	}
	// two pools: 2 prefill GPUs fully busy (1,000 W) and 6 decode GPUs half busy (650 W) draw
	// 5,900 W, 737.5 W per GPU on average; the dollars follow all 8 GPUs
	d := ServingPools(4000, 2, p, Pool{GPUs: 2, Busy: 1}, Pool{GPUs: 6, Busy: 0.5})
	if d.WattsPerGPU != 737.5 || d.JPerTok != 5900.0/4000 || math.Abs(d.USDPerMTok-16/14.4) > 1e-12 {
		t.Errorf("pools: %+v", d)
	}
	// one pool is Serving
	if one, s := ServingPools(4000, 2, p, Pool{GPUs: 8, Busy: 0.3}), Serving(4000, 8, 0.3, 2, p); math.Abs(one.WattsPerGPU-s.WattsPerGPU) > 1e-12 || one.JPerTok != s.JPerTok || one.USDPerMTok != s.USDPerMTok {
		t.Errorf("one pool %+v, Serving %+v", one, s)
	}
}

// The split by hand: a deployment spending $36/h (0.01 $/s) and drawing 7 kW for 1,000 output
// tokens/s of a 2000/500 workload (4,000 input tokens/s), prefill taking 30% of its time: input
// tokens cost 0.003/4000 $/s = $0.75 per 1M, output 0.007/1000 = $7 per 1M, blended
// 0.01/5000 = $2 per 1M; and input x price + output x price is the whole spend.
func TestSplitCostByHand(t *testing.T) {
	c := ServingCost{USDPerMTok: 10, JPerTok: 7}
	s := Split(c, 4000, 1000, 0.3, 0.3)
	for _, x := range []struct {
		name      string
		got, want float64
	}{{"input $/1M", s.InputUSDPerM, 0.75}, {"output $/1M", s.OutputUSDPerM, 7}, {"blended $/1M", s.BlendedUSDPerM, 2},
		{"input J", s.InputJ, 7000 * 0.3 / 4000}, {"output J", s.OutputJ, 7000 * 0.7 / 1000}, {"blended J", s.BlendedJ, 7000.0 / 5000}} {
		if math.Abs(x.got-x.want) > 1e-9*x.want {
			t.Errorf("%s = %g, want %g", x.name, x.got, x.want)
		}
	}
	if total := s.InputUSDPerM*4000 + s.OutputUSDPerM*1000; math.Abs(total-s.BlendedUSDPerM*5000) > 1e-9 {
		t.Errorf("input and output spend %g, blended %g", total, s.BlendedUSDPerM*5000)
	}
	if z := Split(ServingCost{JPerTok: 7}, 4000, 1000, 2, -1); z.InputUSDPerM != 0 || z.PrefillShareUSD != 1 || z.PrefillShareJ != 0 {
		t.Errorf("no price, shares clamped: %+v", z)
	}
}
