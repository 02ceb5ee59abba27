package analyzer

import "testing"

// The eager GLU's passes beyond the fused kernel's, by hand, over e = 1,000 output elements of
// 2 B. Routed experts forward: silu 2e x 2, multiply 3e x 2, the fp32 router-weight scale
// (2 + 4)e and the cast back (4 + 2)e, 28e in all less the fused kernel's 6e: 16,000 B in 3
// more launches; backward 44e less the fused 12e: 32,000 B in 6 more. A dense MLP: silu and
// multiply, 10e less 6e forward (4,000 B, 1 more launch), 26e less 12e backward (14,000 B, 3).
func TestUnfusedGLUKernels(t *testing.T) {
	op := Op{Name: "mlp_activation", ElemsPerToken: 3 * 768, FlopsPerToken: 5 * 768}
	if !gatedAct(op) || gatedAct(Op{ElemsPerToken: 2 * 768, FlopsPerToken: 8 * 768}) {
		t.Fatal("gatedAct: a GLU's activation not told from GELU's")
	}
	for _, c := range []struct {
		routed               bool
		fwd, bwd, nFwd, nBwd float64
	}{{true, 16000, 32000, 3, 6}, {false, 4000, 14000, 1, 3}} {
		k := unfusedGLUKernels(op, 1000, 2, c.routed)
		if k[0].Bytes != c.fwd || k[1].Bytes != c.bwd || k[0].Count != c.nFwd || k[1].Count != c.nBwd || !k[1].Backward {
			t.Errorf("routed %v: forward %g B in %g, backward %g B in %g; want %g in %g, %g in %g",
				c.routed, k[0].Bytes, k[0].Count, k[1].Bytes, k[1].Count, c.fwd, c.nFwd, c.bwd, c.nBwd)
		}
		if k[0].MemShare != EagerPassShare {
			t.Errorf("routed %v: eager passes at %g of the copy rate, want EagerPassShare", c.routed, k[0].MemShare)
		}
	}
}
