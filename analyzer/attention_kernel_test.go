package analyzer

import (
	"math"
	"testing"

	"github.com/mrep-dev/mrep/kernels"
)

// AttentionKernel is the kernel a real model's step carries for the same shape: Llama-3.1-8B
// (32 heads, 8 KV heads of 128) in decode at B=8, L=4096 and in prefill of 2 x 2048 tokens.
func TestAttentionKernelIsTheStepsKernel(t *testing.T) {
	m := NewModel(load(t, "Llama-3.1-8B"))
	for _, tc := range []struct {
		ph   Phase
		s    func(*Scenario)
		want AttentionShape
	}{
		{Decode, func(s *Scenario) { s.Batch, s.KVLen = 8, 4096 }, AttentionShape{Batch: 8, Queries: 1, KVLen: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, Decode: true, ActBytes: 2, KVBytes: 2}},
		{Prefill, func(s *Scenario) { s.Batch, s.Seq = 2, 2048 }, AttentionShape{Batch: 2, Queries: 2048, KVLen: 2048, Heads: 32, KVHeads: 8, HeadDim: 128, CacheWrite: true, ActBytes: 2, KVBytes: 2}},
	} {
		s := DefaultScenario()
		tc.s(&s)
		want := AttentionKernel(tc.want)
		if one := stepAttention(t, m, tc.ph, s, want); one != want {
			t.Errorf("%s: the step's attention kernel per layer\n%+v\nAttentionKernel\n%+v", tc.ph, one, want)
		}
	}
}

// DeepSeek-V3's latent attention at TP8 in decode: the step's kernel is AttentionKernel's for
// one GPU's 16 heads over the 576-element latent, and those 16 heads are all the query rows a
// tile gets (the latent is replicated on every rank: GroupM is the rank's heads, not the
// model's 128).
func TestMLAKernelIsTheStepsKernel(t *testing.T) {
	m := NewModel(load(t, "DeepSeek-V3"))
	s := DefaultScenario()
	s.TP, s.Batch, s.KVLen = 8, 32, 4096
	want := AttentionKernel(AttentionShape{Batch: 32, Queries: 1, KVLen: 4096, Heads: 16, Decode: true, ActBytes: 2, KVBytes: 2, MLA: true})
	one := stepAttention(t, m, Decode, s, want)
	if math.Abs(one.FLOPs/want.FLOPs-1) > 1e-9 || math.Abs(one.Bytes/want.Bytes-1) > 1e-9 || one.GroupM != 16 || want.GroupM != 16 || !one.Latent || !want.Latent {
		t.Errorf("TP8 latent decode per layer\n%+v\nAttentionKernel\n%+v", one, want)
	}
}

// stepAttention is the attention kernel of a step of m as one launch of one layer (the step's
// counts every layer's launch; a kernel benchmark times one), named as want for comparison.
func stepAttention(t *testing.T, m *Model, ph Phase, s Scenario, want kernels.Kernel) kernels.Kernel {
	t.Helper()
	st, err := m.Analyze(ph, s, Achievable)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range st.Kernels {
		if k.Kind == kernels.Attention {
			layers := k.Count
			one := k
			one.Count, one.FLOPs, one.VectorFLOPs, one.Bytes = 1, k.FLOPs/layers, k.VectorFLOPs/layers, k.Bytes/layers
			one.Name, one.Category = want.Name, want.Category
			return one
		}
	}
	t.Fatalf("%s: no attention kernel in the step", ph)
	return kernels.Kernel{}
}

// A training step's attention kernels carry their head dimension, the tensor FLOPs per score
// over 4: GPT-OSS's 64-wide heads, and DeepSeek-V3's MLA in training (192 query-key and 128
// value dimensions per head, 4 x 160 FLOPs per score), forward and backward alike.
func TestAttentionKernelsCarryTheirHeadDim(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  float64
	}{{"gpt-oss-120b", 64}, {"DeepSeek-V3", 160}, {"Llama-3.1-8B", 128}} {
		m := NewModel(load(t, tc.model))
		s := DefaultScenario()
		s.Batch, s.Seq = 1, 4096
		st, err := m.Analyze(Training, s, Achievable)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, k := range st.Kernels {
			if k.Kind != kernels.Attention {
				continue
			}
			n++
			if k.HeadDim != tc.want {
				t.Errorf("%s: attention kernel %s (backward %v) head dim %g, want %g", tc.model, k.Name, k.Backward, k.HeadDim, tc.want)
			}
			if d := k.FLOPs / (4 * k.HeadDim); math.Abs(d-math.Round(d)) > 1e-6*d {
				t.Errorf("%s: %g FLOPs are not 4 x %g x a whole number of scores", tc.model, k.FLOPs, k.HeadDim)
			}
		}
		if n < 2 {
			t.Errorf("%s: %d attention kernels in a training step, want the forward and the backward", tc.model, n)
		}
	}
}
