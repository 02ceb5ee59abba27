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

// Megatron's TEGroupedMLP adds the experts' output bias outside the GEMM, in fp32 (its
// _apply_bias): by hand, GPT-OSS-120B (hidden 2880, top-4, 36 MoE layers) at 4,096 tokens on EP8
// moves 28 bytes an element forward and 36 backward over tokens x 4 x 2880 elements a layer.
// The fused grouped MLP makes no such pass and no activation pass; serving never pays it.
func TestExpertOutputBiasInFP32ByHand(t *testing.T) {
	m := NewModel(load(t, "gpt-oss-120b"))
	s := DefaultScenario()
	s.Batch, s.Seq, s.EP = 1, 4096, 8
	named := func(st Step, name string) (fwd, bwd float64, n int) {
		for _, k := range st.Kernels {
			if k.Name == name {
				n++
				if k.Bytes == 0 {
					continue
				}
				if fwd == 0 {
					fwd = k.Bytes
				} else {
					bwd = k.Bytes
				}
			}
		}
		return fwd, bwd, n
	}
	plain, err := m.Analyze(Training, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, n := named(plain, "experts.down_proj_bias.fp32"); n != 0 {
		t.Fatalf("the fp32 bias pass without ExpertBiasFP32: %d kernels", n)
	}
	s.ExpertBiasFP32 = true
	st, err := m.Analyze(Training, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	elems := 4096.0 * 4 * 2880 * 36 // tokens x top-k x hidden, every MoE layer
	fwd, bwd, n := named(st, "experts.down_proj_bias.fp32")
	if n != 2 {
		t.Fatalf("%d fp32 bias kernels, want the forward and the backward", n)
	}
	testutil.Near(t, "forward bytes", fwd, 28*elems, 1e-9)
	testutil.Near(t, "backward bytes", bwd, 36*elems, 1e-9)
	if st.Cost.BytesHBM() <= plain.Cost.BytesHBM() {
		t.Errorf("the fp32 bias pass adds no bytes: %g vs %g", st.Cost.BytesHBM(), plain.Cost.BytesHBM())
	}

	s.FusedGroupedMLP = true
	fused, err := m.Analyze(Training, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, n := named(fused, "experts.down_proj_bias.fp32"); n != 0 {
		t.Errorf("the fused grouped MLP scales the bias in its epilogue, yet %d fp32 bias kernels", n)
	}
	for _, k := range fused.Kernels {
		if k.Name == "mlp_activation" && k.Category == string(CatRoutedExperts) && (k.Bytes != 0 || k.Count != 0) {
			t.Errorf("fused grouped MLP: the experts' activation still moves %g bytes in %g launches", k.Bytes, k.Count)
		}
	}
	if fused.Cost.BytesHBM() >= plain.Cost.BytesHBM() {
		t.Errorf("the fused grouped MLP moves no fewer bytes than the unfused one: %g vs %g", fused.Cost.BytesHBM(), plain.Cost.BytesHBM())
	}

	pre, err := m.Analyze(Prefill, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, n := named(pre, "experts.down_proj_bias.fp32"); n != 0 {
		t.Errorf("prefill pays Megatron's training bias pass: %d kernels", n)
	}
}

// Megatron clamps GPT-OSS's GLU input (swiglu_limit 7) in eager PyTorch before its fused
// activation: weighted_bias_quick_geglu_impl chunks the FC1 output, clamps each half and
// concatenates them. Counted by hand from the PyTorch ops (clampKernels), with the share of a
// copy's rate those passes reached on a lent H100.
func TestEagerGLUClampByHand(t *testing.T) {
	m := NewModel(load(t, "gpt-oss-120b"))
	if got := m.Fingerprint.GLUClamp; got != 7 {
		t.Fatalf("gpt-oss-120b's swiglu_limit read as %g, want 7", got)
	}
	s := DefaultScenario()
	s.Batch, s.Seq, s.EP = 1, 4096, 8
	clamp := func(st Step) (fwd, bwd kernels.Kernel, n int) { return passKernels(st, "mlp_activation.clamp") }
	plain, err := m.Analyze(Training, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, n := clamp(plain); n != 0 {
		t.Fatalf("a clamp pass without EagerGLUClamp: %d kernels", n)
	}
	s.EagerGLUClamp = true
	st, err := m.Analyze(Training, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	half := 4096.0 * 4 * 2880 * 36 // assignments x the intermediate width, every MoE layer
	fwd, bwd, n := clamp(st)
	if n != 2 {
		t.Fatalf("%d clamp kernels, want the forward and the backward", n)
	}
	testutil.Near(t, "forward bytes", fwd.Bytes, 8*2*half, 1e-9)
	testutil.Near(t, "backward bytes", bwd.Bytes, (11*2+8)*half, 1e-9)
	testutil.Near(t, "forward launches", fwd.Count, 3*36, 1e-9)
	testutil.Near(t, "backward launches", bwd.Count, 7*36, 1e-9)
	if fwd.MemShare != EagerPassShare || bwd.MemShare != EagerPassShare {
		t.Errorf("the clamp runs at %g/%g of the memory rate, want the measured %g", fwd.MemShare, bwd.MemShare, EagerPassShare)
	}
	testutil.Near(t, "HBM bytes added", st.Cost.BytesHBM()-plain.Cost.BytesHBM(), (8*2+11*2+8)*half, 1e-9)

	// recomputing the activation (Megatron's moe_act) re-runs the forward clamp
	s.Recompute = "selective:moe_act"
	rec, err := m.Analyze(Training, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	recFwd, _, _ := clamp(rec)
	testutil.Near(t, "forward bytes with the activation recomputed", recFwd.Bytes, 2*8*2*half, 1e-9)
	s.Recompute = ""

	s.FusedGroupedMLP = true
	fused, err := m.Analyze(Training, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, n := clamp(fused); n != 0 {
		t.Errorf("the fused grouped MLP clamps in its epilogue, yet %d clamp kernels", n)
	}
	s.FusedGroupedMLP = false
	pre, err := m.Analyze(Prefill, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, n := clamp(pre); n != 0 {
		t.Errorf("prefill pays Megatron's training clamp: %d kernels", n)
	}
	// a model whose GLU does not clamp pays nothing
	q := NewModel(load(t, "Qwen3-30B-A3B"))
	if q.Fingerprint.GLUClamp != 0 {
		t.Fatalf("Qwen3-30B-A3B clamps at %g", q.Fingerprint.GLUClamp)
	}
	qs, err := q.Analyze(Training, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, n := clamp(qs); n != 0 {
		t.Errorf("Qwen3-30B-A3B has no swiglu_limit, yet %d clamp kernels", n)
	}
}

// GPT-OSS's attention has a learnable sink per head and alternates 128-key windows with full
// causal layers: the training kernels carry both, so timing can price them.
func TestAttentionWindowAndSinkReachTheKernels(t *testing.T) {
	m := NewModel(load(t, "gpt-oss-120b"))
	if !m.Fingerprint.AttnSinks {
		t.Fatal("gpt-oss-120b's self_attn.sinks not seen")
	}
	if l := NewModel(load(t, "Llama-3.1-8B")); l.Fingerprint.AttnSinks {
		t.Fatal("Llama-3.1-8B has no sinks")
	}
	s := DefaultScenario()
	s.Batch, s.Seq = 1, 4096
	st, err := m.Analyze(Training, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	var windowed, full int
	for _, k := range st.Kernels {
		if k.Kind != kernels.Attention {
			continue
		}
		if !k.Sink {
			t.Errorf("%s: attention kernel without the sink", k.Name)
		}
		switch k.Window {
		case 128:
			windowed++
		case 0:
			full++
		default:
			t.Errorf("%s: window %g, want 128 or none", k.Name, k.Window)
		}
	}
	if windowed == 0 || full == 0 {
		t.Fatalf("%d windowed and %d full attention kernels, want both", windowed, full)
	}
	// a window no shorter than the sequence is no window
	s.Seq = 128
	short, err := m.Analyze(Training, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range short.Kernels {
		if k.Kind == kernels.Attention && k.Window != 0 {
			t.Errorf("128 tokens under a 128-key window: kernel says window %g", k.Window)
		}
	}
}

// GPT-OSS's YaRN-scaled RoPE runs unfused under Megatron (Megatron-Bridge turns the fusion off
// for a "yarn" position embedding): its eager passes over every query and key element, counted
// from _apply_rotary_pos_emb_bshd's PyTorch ops (ropeKernels); plain RoPE and MLA pay nothing.
func TestEagerScaledRoPEByHand(t *testing.T) {
	m := NewModel(load(t, "gpt-oss-120b"))
	s := DefaultScenario()
	s.Batch, s.Seq, s.TP = 1, 4096, 2
	rope := func(m *Model, s Scenario, ph Phase) (fwd, bwd kernels.Kernel, n int) {
		st, err := m.Analyze(ph, s, Achievable)
		if err != nil {
			t.Fatal(err)
		}
		return passKernels(st, "attention_core.rope")
	}
	if _, _, n := rope(m, s, Training); n != 0 {
		t.Fatalf("a RoPE pass without EagerScaledRoPE: %d kernels", n)
	}
	s.EagerScaledRoPE = true
	fwd, bwd, n := rope(m, s, Training)
	if n != 4 {
		t.Fatalf("%d RoPE kernels, want the forward and the backward of the windowed and the full layers", n)
	}
	// 4,096 tokens x (64/2 query + 8/2 key heads) x 64 dims, 36 layers, 2-byte activations
	elems := 4096.0 * (32 + 4) * 64 * 36
	testutil.Near(t, "forward bytes", fwd.Bytes, 12*2*elems, 1e-9)
	testutil.Near(t, "backward bytes", bwd.Bytes, 13*2*elems, 1e-9)
	testutil.Near(t, "launches", fwd.Count+bwd.Count, 13*36, 1e-9)
	s.Recompute = "full" // the whole layer re-runs, its RoPE too
	again, _, _ := rope(m, s, Training)
	testutil.Near(t, "forward bytes under full recompute", again.Bytes, 2*12*2*elems, 1e-9)
	s.Recompute = "selective:core_attn" // RoPE is applied before the core attention Megatron recomputes
	again, _, _ = rope(m, s, Training)
	testutil.Near(t, "forward bytes under core-attention recompute", again.Bytes, 12*2*elems, 1e-9)
	s.Recompute = ""
	if _, _, n := rope(m, s, Prefill); n != 0 {
		t.Errorf("prefill pays Megatron's training RoPE: %d kernels", n)
	}
	for _, name := range []string{"Llama-3.1-8B", "DeepSeek-V3"} { // plain RoPE; MLA's own rotary path
		if _, _, n := rope(NewModel(load(t, name)), s, Training); n != 0 {
			t.Errorf("%s: %d eager RoPE kernels", name, n)
		}
	}
}

// passKernels sums a step's kernels named name into one forward and one backward kernel (bytes,
// launches and share), and counts them: an op's classes (windowed and full layers) and a
// recompute's re-run each add one.
func passKernels(st Step, name string) (fwd, bwd kernels.Kernel, n int) {
	for _, k := range st.Kernels {
		if k.Name != name {
			continue
		}
		n++
		p := &fwd
		if k.Backward {
			p = &bwd
		}
		p.Bytes, p.Count, p.MemShare = p.Bytes+k.Bytes, p.Count+k.Count, k.MemShare
	}
	return fwd, bwd, n
}
