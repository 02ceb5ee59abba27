package analyzer

import (
	"math"
	"testing"

	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/mrep-dev/mrep/kernels"
)

// ExpertsKernels against a hand count of Qwen3-235B-A22B's MoE layer (hidden 4096, 128 experts
// of width 1536, top-8), in BF16, with the tokens dealt round-robin as the kernel tables do.
func TestExpertsKernelsByHand(t *testing.T) {
	const h, inter, E, k = 4096.0, 1536.0, 128.0, 8.0
	for _, tc := range []struct {
		name           string
		tokens         float64
		tp, ep         int64
		touched, assig float64 // experts this GPU reads, token-expert pairs it computes
	}{
		// one token: its 8 experts, one row each
		{"one token", 1, 1, 1, 8, 8},
		// 64 tokens over EP8: 512 pairs reach all 128 experts; this GPU holds 16 and gets 64 pairs
		{"EP8", 64, 1, 8, 16, 64},
		// 4 tokens over TP4: 32 experts, each a quarter of its width on this GPU
		{"TP4", 4, 4, 1, 32, 32},
	} {
		x := ExpertsShape{Tokens: tc.tokens, Hidden: h, Inter: inter, Experts: E, TopK: k, TP: tc.tp, EP: tc.ep,
			DType: "bf16", WeightBytes: 2, ActBytes: 2}
		ks := ExpertsKernels(x)
		if len(ks) != 3 || ks[0].Kind != kernels.GEMM || ks[1].Kind != kernels.Memory || ks[2].Kind != kernels.GEMM {
			t.Fatalf("%s: want gate/up GEMM, activation, down GEMM; got %+v", tc.name, ks)
		}
		tp := float64(tc.tp)
		upW := tc.touched * h * 2 * inter / tp * 2 // bytes of the touched gate/up weights on this GPU
		downW := tc.touched * inter * h / tp * 2
		for i, want := range []struct{ flops, weights float64 }{{2 * tc.assig * h * 2 * inter / tp, upW}, {0, 0}, {2 * tc.assig * inter * h / tp, downW}} {
			if i == 1 {
				continue
			}
			g := ks[i]
			testutil.Near(t, tc.name+" FLOPs", g.FLOPs, want.flops, 1e-9)
			// bytes: the weights plus the activations in and out of every pair
			if g.Bytes < want.weights || g.Bytes > want.weights*1.05+1e6 {
				t.Errorf("%s kernel %d: %g bytes, want the weights' %g and a little activation", tc.name, i, g.Bytes, want.weights)
			}
			if !g.Grouped || !g.Graphed || g.Backward {
				t.Errorf("%s kernel %d: grouped %v graphed %v backward %v", tc.name, i, g.Grouped, g.Graphed, g.Backward)
			}
			testutil.Near(t, tc.name+" expert groups", g.Groups, tc.touched, 1e-9)
		}
		// the gated activation reads gate and up and writes their product for every pair
		testutil.Near(t, tc.name+" activation bytes", ks[1].Bytes, 3*tc.assig*inter/tp*2, 1e-9)
	}
	// uniform random routing (live traffic) touches fewer experts than dealing them out does
	s := DefaultScenario()
	if u := DistinctExperts(E, k, 16); !(u < math.Min(E, 16*k)) || s.BalancedRouting {
		t.Errorf("16 random tokens touch %g experts, dealt out %g; the default scenario routes balanced: %v", u, math.Min(E, 16*k), s.BalancedRouting)
	}
}
