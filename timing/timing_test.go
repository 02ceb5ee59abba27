package timing

import (
	"fmt"
	"math"
	"testing"

	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/kernels"
)

func h100(t *testing.T) *Model {
	t.Helper()
	c, err := chips.Default().Lookup("H100-SXM")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(c, "bf16")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.9g, want %.9g", what, got, want)
	}
}

// Hand calculations on the H100's 132 SMs.
func TestWaveQuantization(t *testing.T) {
	m := h100(t)
	m.tiles = [][2]float64{{128, 128}} // one tile shape, to count by hand
	// 133 full tiles (one more than the SMs): two waves, the second with one tile busy
	near(t, "133 tiles", m.WaveEfficiency(128, 133*128, 4096, 1), 133.0/264)
	// exactly 132 tiles: one full wave
	near(t, "132 tiles", m.WaveEfficiency(128*12, 11*128, 4096, 1), 1)
	// tile quantization: M=129 pads to 256 rows; 2x66 tiles = 132, one wave
	near(t, "M=129", m.WaveEfficiency(129, 66*128, 4096, 1), 129.0/256)
	// a small grid splits K: 4 tiles on 132 SMs could take 33 slices each, but K=4096 gives at
	// most 32 slices of 128: 128 CTAs busy of 132
	near(t, "split-K", m.WaveEfficiency(128, 4*128, 4096, 1), 128.0/132)
	// ... but not below 128-deep slices: K=256 allows 2, so 8 of 132 SMs work
	near(t, "split-K bounded by K", m.WaveEfficiency(128, 4*128, 256, 1), 8.0/132)
}

// A decode GEMM (M = 8 rows) is limited by reading its weights, not by a tensor-core penalty:
// its time is the weight bytes at achievable bandwidth, plus launch latency.
func TestSmallMGEMMIsWeightBound(t *testing.T) {
	m := h100(t)
	n, k := 4096.0, 4096.0
	kn := kernels.Kernel{Kind: kernels.GEMM, Count: 1, M: 8, N: n, K: k, Groups: 1, FLOPs: 2 * 8 * n * k, DType: "bf16", Bytes: n * k * 2, Graphed: true}
	kt := m.Kernel(kn)
	if kt.Compute >= kt.Memory {
		t.Fatalf("decode GEMM should be memory-bound: compute %g, memory %g", kt.Compute, kt.Memory)
	}
	near(t, "memory time", kt.Memory, n*k*2/(3350e9*m.Eff.HBMFrac))
	near(t, "kernel time", kt.Time(), kt.Memory+m.Eff.KernelLatencyUs*1e-6)
}

// MHA decode attention streams the KV cache at bandwidth and is never charged at 1/64 of
// tensor-core peak: its compute runs at least at the vector rate.
func TestDecodeAttentionIsKVBound(t *testing.T) {
	m := h100(t)
	// Llama-2-7B-like layer: B=384, L=2048, 32 heads x 128, MHA (group 1), bf16 KV
	b, l, h, d := 384.0, 2048.0, 32.0, 128.0
	kv := b * l * 2 * h * d * 2
	k := kernels.Kernel{Kind: kernels.Attention, Count: 1, Decode: true, GroupM: 1, DType: "bf16",
		FLOPs: 4 * b * h * l * d, VectorFLOPs: 3 * b * h * l, Bytes: kv, Batch: b, Heads: h, Queries: 1, Graphed: true}
	kt := m.Kernel(k)
	if kt.Compute >= kt.Memory {
		t.Errorf("MHA decode attention labelled compute-bound: compute %g s, KV read %g s", kt.Compute, kt.Memory)
	}
	p := m.Predict([]kernels.Kernel{k})
	if p.Regime != "hbm-bound" {
		t.Errorf("regime %s", p.Regime)
	}
}

// Achievable time is never below the ideal roofline, kernel by kernel and in sum.
func TestAchievableNeverBeatsTheRoofline(t *testing.T) {
	for _, name := range []string{"H100-SXM", "H200", "B200", "A100-SXM", "MI300X", "TPU-v5p", "Gaudi3"} {
		c, _ := chips.Default().Lookup(name)
		m, err := New(c, "bf16")
		if err != nil {
			t.Fatal(err)
		}
		var ks []kernels.Kernel
		for _, mm := range []float64{1, 7, 64, 129, 1000, 8192, 65536} {
			ks = append(ks, kernels.Kernel{Kind: kernels.GEMM, Count: 1, M: mm, N: 4096, K: 4096, Groups: 1, FLOPs: 2 * mm * 4096 * 4096, DType: "bf16", Bytes: 4096 * 4096 * 2})
			ks = append(ks, kernels.Kernel{Kind: kernels.Attention, Count: 1, Queries: mm, Batch: 1, Heads: 32, FLOPs: 4 * mm * mm * 32 * 128 / 2, DType: "bf16", Bytes: mm * 32 * 128 * 8})
		}
		ks = append(ks, kernels.Kernel{Kind: kernels.Memory, Count: 1, Bytes: 1e9, VectorFLOPs: 1e9},
			kernels.Kernel{Kind: kernels.Collective, Coll: kernels.AllReduce, Count: 10, Ranks: 8, Message: 1e8, Exposed: 1})
		for _, k := range ks {
			p := m.Predict([]kernels.Kernel{k})
			if p.TEst < p.TRoofline*(1-1e-12) {
				t.Errorf("%s %v M=%g: T_est %g below the roofline %g", name, k.Kind, k.M, p.TEst, p.TRoofline)
			}
		}
		p := m.Predict(ks)
		if p.TEst < p.TRoofline {
			t.Errorf("%s: step T_est %g below the roofline %g", name, p.TEst, p.TRoofline)
		}
		near(t, name+" breakdown sums to T_est", p.TGEMM+p.TAttention+p.TMemory+p.TComm+p.TLatency, p.TEst)
	}
}

// Collectives: latency plus the ring's bytes at achievable link bandwidth.
func TestCollectiveRing(t *testing.T) {
	m := h100(t)
	k := kernels.Kernel{Kind: kernels.Collective, Coll: kernels.AllReduce, Count: 1, Ranks: 4, Message: 64e6, Exposed: 1}
	want := 10e-6 + 2*3.0/4*64e6/(450e9*0.83)
	near(t, "TP4 all-reduce of 64 MB", m.Kernel(k).Comm, want)
	k.Ranks = 16 // beyond the 8-GPU NVLink domain: scale-out
	want = 10e-6 + 2*15.0/16*64e6/(50e9*0.83)
	near(t, "16-rank all-reduce over InfiniBand", m.Kernel(k).Comm, want)

	// Two nodes of eight ranks each: NCCL's rings leave each node through its eight NICs at
	// once, so the ring runs at 8 x 50 GB/s (x 0.83), below NVLink's 450 GB/s.
	k.DomainRanks = 8
	want = 10e-6 + 2*15.0/16*64e6/(8*50e9*0.83)
	near(t, "16-rank all-reduce, 8 ranks per node", m.Kernel(k).Comm, want)
	k.DomainRanks = 16 // more rails than NVLink carries: NVLink caps the ring
	want = 10e-6 + 2*15.0/16*64e6/(450e9*0.83)
	near(t, "16-rank all-reduce, 16 ranks per domain", m.Kernel(k).Comm, want)
	k.DomainRanks = 4 // TP 2: four of the group's ranks per node, on four NICs
	want = 10e-6 + 2*15.0/16*64e6/(4*50e9*0.83)
	near(t, "16-rank all-reduce, 4 ranks per node", m.Kernel(k).Comm, want)
	k.Coll = kernels.AllToAll // an all-to-all sends each peer its own bytes: no rail sharing
	want = 10e-6 + 15.0/16*64e6/(50e9*0.83)
	near(t, "16-rank all-to-all, 4 ranks per node", m.Kernel(k).Comm, want)
}

// Eager kernels are bounded by the host's launch rate; graphed (decode) ones are not.
func TestHostLaunchBound(t *testing.T) {
	m := h100(t)
	tiny := kernels.Kernel{Kind: kernels.Memory, Count: 100, Bytes: 1e3}
	eager := m.Predict([]kernels.Kernel{tiny})
	tiny.Graphed = true
	graphed := m.Predict([]kernels.Kernel{tiny})
	near(t, "eager: 100 launches at the host rate", eager.TEst, 100*m.Eff.HostLaunchUs*1e-6)
	if graphed.TEst >= eager.TEst {
		t.Errorf("CUDA graphs should remove the host bound: %g vs %g", graphed.TEst, eager.TEst)
	}
}

// Decode attention streams the KV cache at its lane's own share of the HBM bandwidth, and at
// the 8-bit figure for an FP8 cache; without them, at hbm_frac like any memory-bound kernel.
// By hand on H100's 3.35 TB/s: 1 GB of KV at 0.6 is 497.5 us, at 0.3 (8-bit) 995 us.
func TestDecodeAttentionBandwidth(t *testing.T) {
	c, err := chips.Default().Lookup("H100-SXM")
	if err != nil {
		t.Fatal(err)
	}
	k := kernels.Kernel{Kind: kernels.Attention, Count: 1, Decode: true, Bytes: 1e9, FLOPs: 1, GroupM: 8, KVElem: 2, DType: "bf16"}
	for _, tc := range []struct {
		frac, frac8, kvElem, want float64
	}{
		{0, 0, 2, 1e9 / (3350e9 * c.Efficiency.HBMFrac)},
		{0.6, 0, 2, 1e9 / (3350e9 * 0.6)},
		{0.6, 0.3, 2, 1e9 / (3350e9 * 0.6)},
		{0.6, 0.3, 1, 1e9 / (3350e9 * 0.3)},
		{0.6, 0, 1, 1e9 / (3350e9 * 0.6)},
	} {
		cc := c
		cc.Efficiency.AttnDecodeHBMFrac, cc.Efficiency.AttnDecodeHBMFrac8 = tc.frac, tc.frac8
		m, err := New(cc, "bf16")
		if err != nil {
			t.Fatal(err)
		}
		k.KVElem = tc.kvElem
		near(t, fmt.Sprintf("KV stream at %g/%g, %g-byte cache", tc.frac, tc.frac8, tc.kvElem), m.Kernel(k).Memory, tc.want)
	}
}

// A flash kernel pays one exponential per score beside 4·d tensor FLOPs. On H100 (989.4
// TFLOP/s BF16, 3.865e12 exponentials/s: 4,096 FLOPs and 16 exponentials per SM per clock)
// d0 = P / 4E = 64: a 64-wide head takes (64+64)/64 x 128/(128+64) = 4/3 of a 128-wide head's
// time per FLOP; its backward, 2.5x the FLOPs per exponential (d0 = 25.6), (89.6/64) x
// (128/153.6) = 7/6. Heads of 128 keep the fitted figures; MLA timed with its own fitted
// figure and chips with no published exponential rate have no term.
func TestSmallHeadsPayTheirExponentials(t *testing.T) {
	m := h100(t)
	if d0 := m.Peak("bf16") / (4 * m.Chip.ExpTera * 1e12); math.Abs(d0-64) > 0.02 {
		t.Fatalf("H100 d0 = %g, want 64 (4,096 FLOPs / (4 x 16 exponentials))", d0)
	}
	at := func(m *Model, d float64, bwd, latent bool) float64 {
		k := kernels.Kernel{Kind: kernels.Attention, Count: 1, FLOPs: 1e13, DType: "bf16", Batch: 64, Heads: 64, Queries: 8192,
			HeadDim: d, Backward: bwd, Latent: latent}
		return m.Kernel(k).Compute
	}
	d0 := m.Peak("bf16") / (4 * m.Chip.ExpTera * 1e12)
	fwd := (64 + d0) / 64 * 128 / (128 + d0)
	bwd := (64 + d0/2.5) / 64 * 128 / (128 + d0/2.5)
	near(t, "forward d=64 / d=128", at(m, 64, false, false)/at(m, 128, false, false), fwd)
	near(t, "backward d=64 / d=128", at(m, 64, true, false)/at(m, 128, true, false), bwd)
	if math.Abs(fwd-4.0/3) > 1e-3 || math.Abs(bwd-7.0/6) > 1e-3 {
		t.Errorf("hand calculation: forward %g (want 4/3), backward %g (want 7/6)", fwd, bwd)
	}
	near(t, "d=256 is faster per FLOP", at(m, 256, false, false)/at(m, 128, false, false), (256+d0)/256*128/(128+d0))
	near(t, "MLA timed as flash attention pays it", at(m, 64, false, true)/at(m, 128, false, true), fwd)
	withMLA := *m
	withMLA.Eff.MLAFrac = 0.4
	near(t, "MLA with its own figure keeps it", at(&withMLA, 64, false, true), at(&withMLA, 128, false, true))
	noExp := *m
	noExp.Chip.ExpTera = 0
	near(t, "no published rate", at(&noExp, 64, false, false), at(&noExp, 128, false, false))
	// Blackwell Ultra's doubled exponential rate halves the term against Blackwell's
	b2, err := chips.Default().Lookup("B200")
	if err != nil {
		t.Fatal(err)
	}
	b3, err := chips.Default().Lookup("B300")
	if err != nil {
		t.Fatal(err)
	}
	mb2, _ := New(b2, "bf16")
	mb3, _ := New(b3, "bf16")
	r2 := at(mb2, 128, false, false) / at(mb2, 64, false, false)
	r3 := at(mb3, 128, false, false) / at(mb3, 64, false, false)
	if !(r2 < r3 && r3 < 0.8 && r2 > 0.6) {
		t.Errorf("a 64-wide head's FLOP rate over a 128-wide one's: B200 %.3f, B300 %.3f; want B200 < B300, both in (0.6, 0.8)", r2, r3)
	}
}

// A GEMM tile spends K0 steps outside its K loop: with K0 = 64 (BF16) a 1,024-deep GEMM runs at
// 1024 x 4160 / (4096 x 1088) = 0.956 of a 4,096-deep one's fraction, an 8,192-deep one
// 8192 x 4160 / (4096 x 8256) = 1.008 (the term carries past 4,096, as NVIDIA's tables do), and
// no fraction passes 1 however deep; FP4 takes FP8's K0 (400: 1024 x 4496 / (4096 x 1424) = 0.789); a chip without K0
// has no term.
func TestShallowGEMMsPayTheirEpilogue(t *testing.T) {
	m := h100(t)
	m.tiles = [][2]float64{{128, 128}}
	m.Eff.GEMMK0 = map[string]float64{"bf16": 64, "fp8": 400}
	eta := func(dtype string, k float64) float64 {
		return m.GEMMEta(kernels.Kernel{Kind: kernels.GEMM, M: 8192, N: 8192, K: k, Groups: 1, DType: dtype})
	}
	deep := eta("bf16", 4096)
	near(t, "K 1024 bf16", eta("bf16", 1024)/deep, 1024.0*4160/(4096*1088))
	near(t, "K 8192 bf16", eta("bf16", 8192)/deep, 8192.0*4160/(4096*8256))
	fitted := m.Eff.GEMMFrac
	m.Eff.GEMMFrac = map[string]float64{"bf16": 0.99}
	if e := eta("bf16", 1<<20); e > 1 {
		t.Errorf("a 0.99 fraction at K = 2^20: eta %g, above the peak", e)
	}
	m.Eff.GEMMFrac = fitted
	near(t, "K 1024 fp4 (fp8's K0)", eta("fp4", 1024)/eta("fp4", 4096), 1024.0*4496/(4096*1424))
	m.Eff.GEMMK0 = nil
	near(t, "no K0", eta("bf16", 1024)/eta("bf16", 4096), 1)
}

// A sliding window of w keys runs at w/(w+K0) of the causal kernel's rate per score (K0 the
// per-query-tile work outside the window's key loop, measured with cuDNN on a lent H100:
// calib/sources/write_attn_window.py), never slower than the causal kernel it trims; a
// learnable sink adds its measured backward cost per token and head; an eager pass runs at its
// memory share of the chip's rate.
func TestWindowsSinksAndEagerPasses(t *testing.T) {
	m := h100(t)
	k0, k0b, ns := m.Eff.AttnWindowK0, m.Eff.AttnWindowK0Bwd, m.Eff.AttnSinkBwdNs
	if !(k0 > 200 && k0 < 600 && k0b > k0 && ns > 1 && ns < 2) {
		t.Fatalf("H100 window K0 %g/%g keys and sink %g ns: not the measured figures", k0, k0b, ns)
	}
	at := func(w float64, bwd, sink bool, q float64) float64 {
		k := kernels.Kernel{Kind: kernels.Attention, Count: 1, FLOPs: 1e12, DType: "bf16", Batch: 1, Heads: 64, Queries: q,
			HeadDim: 64, Backward: bwd, Window: w, Sink: sink}
		return m.Kernel(k).Compute
	}
	near(t, "128-key window forward", at(128, false, false, 8192)/at(0, false, false, 8192), (128+k0)/128)
	near(t, "128-key window backward", at(128, true, false, 8192)/at(0, true, false, 8192), (128+k0b)/128)
	near(t, "4,096-key window forward", at(4096, false, false, 8192)/at(0, false, false, 8192), (4096+k0)/4096)
	// a 1,024-key window over 1,100 tokens keeps 89% of the causal scores: capped at the causal
	// kernel's time for them
	q, w := 1100.0, 1024.0
	kept := (w*(w+1)/2 + (q-w)*w) / (q * (q + 1) / 2)
	near(t, "a window as long as the sequence", at(w, false, false, q)/at(0, false, false, q), 1/kept)
	// the sink: 8,192 tokens x 64 heads x the measured ns, added to the backward only
	near(t, "sink backward", at(128, true, true, 8192)-at(128, true, false, 8192), 8192*64*ns*1e-9)
	near(t, "sink forward", at(128, false, true, 8192), at(128, false, false, 8192))

	// an eager pass at 0.7 of the memory rate takes 1/0.7 of a plain one's memory time
	k := kernels.Kernel{Kind: kernels.Memory, Count: 1, Bytes: 1e9}
	plain := m.Kernel(k).Memory
	k.MemShare = 0.7
	near(t, "eager pass", m.Kernel(k).Memory, plain/0.7)
	// Blackwell carries no sink figure: none measured there
	b, err := chips.Default().Lookup("GB200")
	if err != nil {
		t.Fatal(err)
	}
	if b.Efficiency.AttnSinkBwdNs != 0 || b.Efficiency.AttnWindowK0 <= 0 {
		t.Errorf("GB200: sink %g ns, window K0 %g: want no sink figure and a window one", b.Efficiency.AttnSinkBwdNs, b.Efficiency.AttnWindowK0)
	}
}
