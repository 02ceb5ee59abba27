package layout

import (
	"math"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/mrep-dev/mrep/kernels"
	"github.com/mrep-dev/mrep/timing"
)

// Megatron counts the embedding and the loss as pipeline layers when asked
// (--account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split): Llama-3.1-
// 405B's 126 layers run as PP16 x VP8, 128 units, one per chunk, so the first and last stages
// hold 7 decoder layers and the others 8. Without the accounting the layout is refused.
func TestPipelineAccounting405B(t *testing.T) {
	m := zooModel(t, "Llama-3.1-405B")
	l := Layout{TP: 8, PP: 16, VP: 8, CP: 1, DP: 1, EP: 1, MBS: 1, GBS: 128, Seq: 8192, DistOptimizer: true}
	if err := l.Validate(m.Fingerprint); err == nil || !strings.Contains(err.Error(), "exceed the 126 layers") {
		t.Errorf("PP16 x VP8 without accounting: %v", err)
	}
	l.EmbeddingInPipe, l.LossInPipe = true, true
	if err := l.Validate(m.Fingerprint); err != nil {
		t.Fatalf("PP16 x VP8 with the embedding and loss counted: %v", err)
	}
	if f, mid, last := l.StageCounts(126); f != 7 || mid != 8 || last != 7 {
		t.Errorf("stages hold %d, %d, %d layers, want 7, 8, 7", f, mid, last)
	}
	chip, _ := chips.Default().Lookup("H100")
	tm, _ := timing.New(chip, "bf16")
	if _, err := Train(m, analyzer.DefaultScenario(), l, tm, 989.4e12, 8); err != nil {
		t.Fatal(err)
	}
	// uneven first and last stages (--decoder-first/last-pipeline-num-layers)
	u := Layout{TP: 8, PP: 16, VP: 1, CP: 1, DP: 1, EP: 1, MBS: 1, GBS: 16, Seq: 8192, FirstStageLayers: 6, LastStageLayers: 8}
	if f, mid, last := u.StageCounts(126); f != 6 || mid != 8 || last != 8 {
		t.Errorf("uneven stages hold %d, %d, %d, want 6, 8 (112 over 14), 8", f, mid, last)
	}
	u.EmbeddingInPipe = true
	if err := u.Validate(m.Fingerprint); err == nil {
		t.Error("uneven stages with the embedding counted: want Megatron's refusal")
	}
}

// DeepSeek-V3's expert all-to-all at EP64 (MBS 1, 4,096 tokens, top-8 of 256 experts, hidden
// 7,168, bf16): each all-to-all moves tokens x top-k x hidden x 2 B = 469,762,048 B, four per MoE
// layer (dispatch and combine, forward and backward), of which each GPU sends 63/64; with 8 GPUs
// per NVLink domain, 56 of those 63 parts leave the node. DeepEP's FP8 dispatch and per-node
// deduplication cut what crosses the network.
func TestDeepSeekA2ABytesAtEP64(t *testing.T) {
	m := zooModel(t, "DeepSeek-V3")
	chip, _ := chips.Default().Lookup("H100")
	tm, _ := timing.New(chip, "bf16")
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 64, EP: 64, ETP: 1, MBS: 1, GBS: 64, Seq: 4096, DistOptimizer: true}
	st, err := Train(m, analyzer.DefaultScenario(), l, tm, 989.4e12, 8)
	if err != nil {
		t.Fatal(err)
	}
	msg := 4096.0 * 8 * 7168 * 2
	testutil.Near(t, "bytes per MoE layer", st.A2A.BytesPerLayer, 4*msg*63/64, 1e-9)
	// the permutation around it, forward and backward: read 4,096 x 7,168 and write 8 times
	// that (permute), the reverse (unpermute), 16-bit
	perm := NewTrainer(m, analyzer.DefaultScenario(), tm, 989.4e12, 8).permutation(l, 1)
	testutil.Near(t, "permutation bytes per MoE layer", perm.Bytes, 2*2*2*4096*7168*9, 1e-12)
	testutil.Near(t, "scale-out share", st.A2A.ScaleOutShare, 56.0/63, 1e-9)
	// overlapping it with the other micro-batch's compute hides what compute covers
	l.A2AOverlap = Overlap1F1B
	ov, err := Train(m, analyzer.DefaultScenario(), l, tm, 989.4e12, 8)
	if err != nil {
		t.Fatal(err)
	}
	if !(ov.A2A.Exposed < st.A2A.Exposed && ov.StepTime < st.StepTime) {
		t.Errorf("1f1b overlap: exposed %g vs %g, step %g vs %g", ov.A2A.Exposed, st.A2A.Exposed, ov.StepTime, st.StepTime)
	}
	l.A2AOverlap, l.Dispatcher, l.Precision, l.FP8Dispatch = "", DispatchDeepEP, "fp8-blockwise", true
	dp, err := Train(m, analyzer.DefaultScenario(), l, tm, 989.4e12, 8)
	if err != nil {
		t.Fatal(err)
	}
	// 8 nodes of 32 experts; top-8 drawn without replacement from 256 miss a node with
	// probability C(224, 8) / C(256, 8), so they touch 8(1 - that) = 5.27 nodes, 7/8 of them remote
	nodes := 8.0
	miss := 1.0
	for i := 0.0; i < 8; i++ {
		miss *= (224 - i) / (256 - i)
	}
	touched := nodes * (1 - miss)
	perLayer := msg * (3 + (1+1.0/128)/2)
	testutil.Near(t, "deepep bytes off-node", dp.A2A.BytesPerLayer*dp.A2A.ScaleOutShare, perLayer/8*touched*7/8, 1e-9)
	if dp.A2A.Time >= st.A2A.Time {
		t.Errorf("deepep all-to-all %g not below alltoall's %g", dp.A2A.Time, st.A2A.Time)
	}
}

// FSDP's per-layer traffic, by hand: a Llama-3.1-8B decoder layer holds 218,112,000 parameters
// (q and o 4096x4096, k and v 4096x1024, gate, up and down 4096x14336, two norms of 4096); each
// micro-batch all-gathers its bf16 weights and reduce-scatters its gradients over the 8-GPU shard
// group, each GPU sending 7/8 of 436,224,000 B. HSDP with 2 replicas shards over 4.
func TestFSDPTrafficPerLayer(t *testing.T) {
	m := zooModel(t, "Llama-3.1-8B")
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 2, GBS: 16, Seq: 8192, ZeRO: 3, Framework: FSDP}
	ag, rs := ShardTraffic(m, l)
	layer := 2.0 * (2*4096*4096 + 2*4096*1024 + 3*4096*14336 + 2*4096)
	testutil.Near(t, "all-gather per layer", ag, layer*7/8, 1e-9)
	testutil.Near(t, "reduce-scatter per layer", rs, layer*7/8, 1e-9)
	l.Replicas = 2
	if err := l.Validate(m.Fingerprint); err != nil {
		t.Fatal(err)
	}
	ag, _ = ShardTraffic(m, l)
	testutil.Near(t, "HSDP all-gather per layer", ag, layer*3/4, 1e-9)
	one := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 2, GBS: 16, Seq: 8192, ZeRO: 3, Framework: FSDP}
	if a, b := TrainingMemory(m, l).MasterWeights, TrainingMemory(m, one).MasterWeights; !(a > 1.99*b && a < 2.01*b) {
		t.Errorf("HSDP 2 replicas: master weights %g, want twice FSDP's %g", a, b)
	}
	l.Replicas = 3
	if err := l.Validate(m.Fingerprint); err == nil {
		t.Error("3 replicas of 8 ranks: want an error")
	}
}

// deepSeekOnH100 times DeepSeek-V3 at PP8 EP8 on 64 H100 with the all-to-all exposed and under
// the overlap given.
func deepSeekOnH100(t *testing.T, overlap string) (m *analyzer.Model, base, over Layout, a, b Step) {
	t.Helper()
	m = zooModel(t, "DeepSeek-V3")
	chip, _ := chips.Default().Lookup("H100")
	tm, _ := timing.New(chip, "bf16")
	base = Layout{TP: 1, PP: 8, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 128, Seq: 4096, DistOptimizer: true}
	over = base
	over.A2AOverlap = overlap
	var err error
	if a, err = Train(m, analyzer.DefaultScenario(), base, tm, 989.4e12, 8); err != nil {
		t.Fatal(err)
	}
	if b, err = Train(m, analyzer.DefaultScenario(), over, tm, 989.4e12, 8); err != nil {
		t.Fatal(err)
	}
	return m, base, over, a, b
}

// DualPipe's bubble and memory, the DeepSeek-V3 report's Table 2: bubble (PP/2 - 1)(F&B + B -
// 3W) against 1F1B's (PP - 1)(F + B); parameters twice, activations PP + 1 micro-batches.
func TestDualPipe(t *testing.T) {
	// by hand: PP 8, F 1, B 1, W 0.5, F&B 2: (4 - 1)(2 + 1 - 1.5) = 4.5 against 1F1B's 7 x 2.5
	testutil.Near(t, "dualpipe bubble", DualPipeBubble(8, 1, 1, 0.5, 2), 4.5, 1e-12)
	testutil.Near(t, "1f1b bubble", OneFOneBBubble(8, 1, 2.5), 17.5, 1e-12)
	m, base, dual, a, b := deepSeekOnH100(t, OverlapDualPipe)
	if !(b.Bubble < a.Bubble && b.StepTime < a.StepTime) {
		t.Errorf("dualpipe bubble %g step %g vs 1f1b %g, %g", b.Bubble, b.StepTime, a.Bubble, a.StepTime)
	}
	ma, mb := TrainingMemory(m, base), TrainingMemory(m, dual)
	if !(mb.Weights > 1.9*ma.Weights) {
		t.Errorf("dualpipe weights %g, want about twice 1f1b's %g", mb.Weights, ma.Weights)
	}
	if dual.inFlight(true) != 9 {
		t.Errorf("dualpipe holds %g micro-batches, want PP + 1 = 9", dual.inFlight(true))
	}
	// the MTP module sits on the last stage, which under DualPipe is the end rank's reverse-
	// direction chunk: one micro-batch in flight there (dualpipe.py's step: each chunk-1 forward
	// follows the previous chunk-1 backward), as on 1F1B's last stage, not the PP + 1 of the rank
	saved := func(l Layout, first bool) float64 {
		mm := stageMemory(m, l, first)
		return mm.Activations + mm.MoEBuffers
	}
	withMTP := func(l Layout) Layout { l.MTP = 1; return l }
	oneF1B := saved(withMTP(base), false) - saved(base, false)
	if oneF1B <= 0 {
		t.Fatalf("1f1b's last stage: MTP adds %g B of activations", oneF1B)
	}
	testutil.Near(t, "dualpipe MTP activations", saved(withMTP(dual), true)-saved(dual, true), oneF1B, 1e-9)
	// a DualPipe rank runs its two stages for half the micro-batches each: with the MTP module
	// making the last stage the heaviest, the end rank's micro-batch is the mean of the first
	// and last stages' where 1F1B waits on the last
	mtp1, mtpDual := withMTP(base), withMTP(dual)
	tr := NewTrainer(m, analyzer.DefaultScenario(), nil, 989.4e12, 8)
	chip, _ := chips.Default().Lookup("H100")
	tm, _ := timing.New(chip, "bf16")
	tr = tr.With(tm, 989.4e12, chip)
	step, err := tr.step(mtpDual)
	if err != nil {
		t.Fatal(err)
	}
	sk := splitKernels(step)
	L := m.Fingerprint.Layers
	nFirst, nMid, nLast := mtpDual.StageCounts(L)
	last := [][]kernels.Kernel{sk.head, nil, sk.head}
	mtp := make([]kernels.Kernel, len(sk.layers))
	for j, k := range sk.layers {
		mtp[j] = scaled(k, 1/float64(L))
	}
	last[1] = mtp
	f, la, mid := tr.stage(mtpDual, tm, sk, nFirst, sk.emb), tr.stage(mtpDual, tm, sk, nLast, last...), tr.stage(mtpDual, tm, sk, nMid)
	if !(la.mb > f.mb && (f.mb+la.mb)/2 > mid.mb) {
		t.Fatalf("want the last stage heaviest and the end rank slowest: first %g, last %g, middle %g", f.mb, la.mb, mid.mb)
	}
	sd, err := tr.Train(mtpDual)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "dualpipe end rank micro-batch", sd.Microbatch, (f.mb+la.mb)/2, 1e-9)
	s1, err := tr.Train(mtp1)
	if err != nil {
		t.Fatal(err)
	}
	if !(s1.Microbatch > sd.Microbatch) {
		t.Errorf("1f1b micro-batch %g, want the last stage's, above dualpipe's mean %g", s1.Microbatch, sd.Microbatch)
	}
	odd := dual
	odd.PP, odd.DP = 3, 8
	if err := odd.Validate(m.Fingerprint); err == nil {
		t.Error("dualpipe on 3 stages: want an error")
	}
	few := dual // dualpipe.py asserts num_chunks >= num_ranks * 2: GA 8 on 8 stages is too few
	few.GBS = 64
	if err := few.Validate(m.Fingerprint); err == nil || !strings.Contains(err.Error(), "at least 2 x pp = 16 micro-batches") {
		t.Errorf("dualpipe with GA %d on PP %d: %v", few.GA(), few.PP, err)
	}
}

// An overlapped all-to-all is hidden behind another micro-batch's computation, but its kernels
// hold SMs while they run: by hand, on H100's 132 SMs NCCL's 32 p2p channels leave a 10 ms
// all-to-all beside 100 ms of compute 10 x 32/132 = 2.42 ms exposed; DeepEP's 20 SMs 1.52 ms;
// an all-to-all longer than the compute shows what the compute does not cover.
func TestOverlappedA2ATakesSMs(t *testing.T) {
	l := Layout{A2AOverlap: Overlap1F1B, CUDAGraph: true}
	testutil.Near(t, "nccl", l.overlapA2A(10, 100, 132), 10*32.0/132, 1e-12)
	l.Dispatcher = DispatchDeepEP
	testutil.Near(t, "deepep", l.overlapA2A(10, 100, 132), 10*20.0/132, 1e-12)
	l.Dispatcher = DispatchHybridEP
	testutil.Near(t, "hybridep on GB200's 148", l.overlapA2A(10, 100, 148), 10*32.0/148, 1e-12)
	testutil.Near(t, "longer than the compute", l.overlapA2A(150, 100, 148), 50, 1e-12)
	// eager, each layer's forward dispatch (a quarter) runs alone after the host's
	// synchronization; the other three overlap as above: 2.5 + 7.5 x 32/132 = 4.318 ms, and
	// of a 400 ms all-to-all beside 100 ms of compute 100 + (300 - 100) = 300 ms
	l.CUDAGraph, l.Dispatcher = false, ""
	testutil.Near(t, "eager", l.overlapA2A(10, 100, 132), 2.5+7.5*32.0/132, 1e-12)
	testutil.Near(t, "eager, longer than the compute", l.overlapA2A(400, 100, 132), 300, 1e-12)
	l.A2AOverlap = OverlapDualPipe // DeepSeek's own schedule: no host synchronization modelled
	testutil.Near(t, "dualpipe eager", l.overlapA2A(10, 100, 132), 10*32.0/132, 1e-12)
	l.A2AOverlap = OverlapNone
	testutil.Near(t, "not overlapped", l.overlapA2A(10, 100, 132), 10, 1e-12)

	// through a whole layout: DeepSeek-V3's overlapped step is slower than the ideal overlap
	// (all-to-all minus compute) and faster than none
	_, _, _, a, b := deepSeekOnH100(t, Overlap1F1B)
	if !(b.StepTime < a.StepTime) {
		t.Errorf("1f1b step %g not below the exposed step %g", b.StepTime, a.StepTime)
	}
}

// The shipped lanes are physical and name their fit set.
func TestShippedLanes(t *testing.T) {
	for _, name := range []string{"H100-SXM", "B200", "GB200", "GB300", "B300", "H100-96GB"} {
		chip, err := chips.Default().Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		lane, ok := chip.Efficiency.Lanes[Megatron]
		if !ok {
			t.Fatalf("%s: no megatron lane", name)
		}
		for d, f := range lane.GEMMFrac {
			if !(f > 0 && f <= 1) {
				t.Errorf("%s megatron gemm_frac.%s = %g", name, d, f)
			}
		}
		if src := lane.Sources["gemm_frac"]; !strings.Contains(src, "Megatron-Bridge") && !strings.Contains(src, "dgxc") {
			t.Errorf("%s: gemm_frac source %q names no fit set", name, src)
		}
		if e := chip.Efficiency.Lane(Megatron); e.HBMFrac != chip.Efficiency.HBMFrac {
			t.Errorf("%s: a lane must keep the chip's figures it does not set", name)
		}
	}
}

// TP communication overlap (Megatron's userbuffers, torchtitan's async TP) hides the TP
// collectives behind the GEMMs: the step shortens by at most the exposed TP time, and never
// below the roofline.
func TestTPOverlap(t *testing.T) {
	m, k := llama70b(t)
	l := Layout{TP: 8, PP: 1, VP: 1, CP: 1, DP: 1, EP: 1, MBS: 1, GBS: 8, Seq: 8192, DistOptimizer: true, Recompute: "full"}
	a, err := Train(m, analyzer.DefaultScenario(), l, k.p, k.peak, 8)
	if err != nil {
		t.Fatal(err)
	}
	l.TPOverlap = true
	b, err := Train(m, analyzer.DefaultScenario(), l, k.p, k.peak, 8)
	if err != nil {
		t.Fatal(err)
	}
	if !(b.StepTime < a.StepTime && a.StepTime-b.StepTime <= a.LayerComm*(1+1e-9) && b.StepTime >= b.Roofline) {
		t.Errorf("tp overlap: step %g vs %g (TP exposed %g), roofline %g", b.StepTime, a.StepTime, a.LayerComm, b.Roofline)
	}
}

// FSDP over two TPU v6e slices of 256 chips (one ICI domain each, DCN between them): sharding
// over all 512 chips sends every layer's gathers and reduce-scatters across the data-center
// network, each slice's share of a ring step leaving through all 256 chips' DCN links at once;
// HSDP with 2 replicas shards within a slice over ICI and all-reduces each shard's gradients
// across the slices once per step. HSDP exposes no more than FSDP over both, and holds twice
// the shard.
func TestHSDPAcrossTPUSlices(t *testing.T) {
	m := zooModel(t, "Llama-3.1-8B")
	chip, err := chips.Default().Lookup("TPU-v6e")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := timing.New(chip, "bf16")
	if err != nil {
		t.Fatal(err)
	}
	peak, _ := chip.Peak("bf16")
	domain := int64(chip.Efficiency.ScaleUpDomain)
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 512, EP: 1, MBS: 1, GBS: 512, Seq: 8192, ZeRO: 3, Framework: FSDP, Recompute: "full"}
	flat, err := Train(m, analyzer.DefaultScenario(), l, tm, peak*1e12, domain)
	if err != nil {
		t.Fatal(err)
	}
	l.Replicas = 2
	hsdp, err := Train(m, analyzer.DefaultScenario(), l, tm, peak*1e12, domain)
	if err != nil {
		t.Fatal(err)
	}
	if !(hsdp.DPExposed <= flat.DPExposed) {
		t.Errorf("HSDP over 2 slices: exposed %g s (step %g) vs FSDP over both %g s (step %g)", hsdp.DPExposed, hsdp.StepTime, flat.DPExposed, flat.StepTime)
	}
	flatL := l
	flatL.Replicas = 0
	if a, b := TrainingMemory(m, l).Total, TrainingMemory(m, flatL).Total; !(a > b) {
		t.Errorf("HSDP holds twice the shard: %g vs %g bytes", a, b)
	}
}

// A full-iteration CUDA graph replays the step: the host issues nothing, so an eager MoE layer's
// host pace, which binds Qwen3-30B-A3B on 8 GB200 at MBS 1 (16 local experts, 2 x 30 + 16 x 6
// kernels per layer at the megatron lane's pace), is gone; what is left is the GPU's own time,
// never below the roofline. FSDP has no such graph in mrep.
func TestFullIterationGraphLiftsTheHostPace(t *testing.T) {
	m := zooModel(t, "Qwen3-30B-A3B")
	chip, _ := chips.Default().Lookup("GB200")
	chip.Efficiency = chip.Efficiency.Lane(Megatron)
	tm, _ := timing.New(chip, "bf16")
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 8, Seq: 4096, DistOptimizer: true}
	peak, _ := chip.Peak("bf16")
	eager, err := Train(m, analyzer.DefaultScenario(), l, tm, peak, 72)
	if err != nil {
		t.Fatal(err)
	}
	host := chip.Efficiency.MoELaunchUs * 1e-6 * float64(m.Fingerprint.MoE.MoELayers) * l.MoELaunches(m.Fingerprint)
	if want := float64(2*MoEFixedLaunches + 16*(moeFwdPerExpert+moeBwdPerExpert)); l.MoELaunches(m.Fingerprint) != want {
		t.Errorf("%g launches per MoE layer, want %g", l.MoELaunches(m.Fingerprint), want)
	}
	if !(host > 0 && eager.Kernels >= host*(1-1e-9)) { // equal when the host binds, to rounding
		t.Fatalf("eager kernels %.1f ms, host %.1f ms: the host pace should bind", 1e3*eager.Kernels, 1e3*host)
	}
	// what the host adds is the host's time beyond the GPU's: the kernels less the host's, at most
	if !(eager.HostBound > 0 && eager.HostBound <= host && eager.Kernels-eager.HostBound <= host) {
		t.Errorf("host bound %.1f ms of kernels %.1f ms, host %.1f ms", 1e3*eager.HostBound, 1e3*eager.Kernels, 1e3*host)
	}
	l.CUDAGraph = true
	if err := l.Validate(m.Fingerprint); err != nil {
		t.Fatal(err)
	}
	graphed, err := Train(m, analyzer.DefaultScenario(), l, tm, peak, 72)
	if err != nil {
		t.Fatal(err)
	}
	if !(graphed.Kernels < host && graphed.StepTime < eager.StepTime && graphed.StepTime >= graphed.Roofline && graphed.HostBound == 0) {
		t.Errorf("graphed: kernels %.1f ms (host %.1f), step %.1f ms vs eager %.1f, roofline %.1f", 1e3*graphed.Kernels, 1e3*host,
			1e3*graphed.StepTime, 1e3*eager.StepTime, 1e3*graphed.Roofline)
	}
	if !strings.Contains(l.String(), "graphed") || !strings.Contains(strings.Join(l.AnalyzeFlags(), " "), "--cuda-graph") {
		t.Errorf("layout %q, flags %v: the graph is not shown", l, l.AnalyzeFlags())
	}
	l.Framework = FSDP
	if err := l.Validate(m.Fingerprint); err == nil || !strings.Contains(err.Error(), "full-iteration CUDA graph") {
		t.Errorf("fsdp with a CUDA graph: %v", err)
	}
}

// The routed experts' gradients reduce over the expert data-parallel group only (Megatron's
// expert_data_parallel_group): with EP across all eight data-parallel ranks of Qwen3-30B-A3B
// nothing of theirs is reduced or gathered, and with EP4 they go over pairs of ranks. With
// nothing to hide behind (a zero-length micro-batch) the exposed traffic is the collectives.
func TestExpertGradientsReduceOverTheExpertGroup(t *testing.T) {
	m := zooModel(t, "Qwen3-30B-A3B")
	chip, _ := chips.Default().Lookup("H100")
	tm, _ := timing.New(chip, "bf16")
	tr := NewTrainer(m, analyzer.DefaultScenario(), tm, 989.4e12, 8)
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 8, Seq: 4096, DistOptimizer: true, ZeRO: 1, Framework: Megatron}
	all := tr.split(l).Trainable
	experts := tr.expertParams(l)
	if !(experts > 0.5*all && experts < all) {
		t.Fatalf("experts %.4g of %.4g parameters per GPU", experts, all)
	}
	gradB, paramB := l.dpBytes()
	dense := all - experts
	want := tr.dpCollective(tm, kernels.ReduceScatter, dense*gradB, 8, kernels.ScaleUp, 8) +
		tr.dpCollective(tm, kernels.AllGather, dense*paramB, 8, kernels.ScaleUp, 8)
	testutil.Near(t, "EP8: exposed data-parallel traffic", tr.dataParallel(l, tm, 0, 1), want, 1e-12)
	l.EP = 4
	experts = tr.expertParams(l)
	dense = tr.split(l).Trainable - experts
	want = tr.dpCollective(tm, kernels.ReduceScatter, dense*gradB, 8, kernels.ScaleUp, 8) + tr.dpCollective(tm, kernels.ReduceScatter, experts*gradB, 2, kernels.ScaleUp, 2) +
		tr.dpCollective(tm, kernels.AllGather, dense*paramB, 8, kernels.ScaleUp, 8) + tr.dpCollective(tm, kernels.AllGather, experts*paramB, 2, kernels.ScaleUp, 2)
	testutil.Near(t, "EP4: exposed data-parallel traffic", tr.dataParallel(l, tm, 0, 1), want, 1e-12)
}

// MXFP8's GEMMs carry a block scale per 32 elements and run below tensor-scaled FP8's
// (Transformer Engine's pre-quantized GEMM timings on a B300: 0.951 of the rate), while current
// scaling's amax pass costs memory traffic MXFP8 does not pay. Megatron-Bridge's published pairs
// of the same layout run current scaling 4-6% faster (25.11: Llama 3 8B on GB300, GB200 and
// B200, 405B on B200); without the share mrep has MXFP8 the faster, with it current scaling by
// about 1.6% (the GEMMs are most of the step, the casts some of the rest).
func TestCurrentScalingOutrunsMXFP8OnBlackwell(t *testing.T) {
	m := zooModel(t, "Llama-3.1-8B")
	chip, _ := chips.Default().Lookup("GB300")
	chip.Efficiency = chip.Efficiency.Lane(Megatron)
	peak, _ := chip.Peak("fp8")
	step := func(recipe string, share float64) float64 {
		c := chip
		c.Efficiency.MXFP8GEMMShare = share
		tm, _ := timing.New(c, "fp8")
		l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 1, GBS: 128, Seq: 8192, DistOptimizer: true, Precision: recipe}
		sc := analyzer.DefaultScenario()
		sc.ComputeDType = "fp8"
		st, err := Train(m, sc, l, tm, peak, 72)
		if err != nil {
			t.Fatal(err)
		}
		return st.StepTime
	}
	share := chip.Efficiency.MXFP8GEMMShare
	if !(share > 0.9 && share < 1) {
		t.Fatalf("GB300 mxfp8_gemm_share %g, want TE's measured ~0.95", share)
	}
	if r := step("mxfp8", share) / step("fp8-cs", share); !(r > 1.01 && r < 1.08) {
		t.Errorf("MXFP8 step / current-scaling step %.3f, want 1.01-1.08 (measured 1.04-1.06)", r)
	}
	if r := step("mxfp8", 0) / step("fp8-cs", 0); !(r < 1) {
		t.Errorf("without the share MXFP8 / current scaling %.3f: the share should be what slows MXFP8", r)
	}
}

// Megatron's LM head is its own ColumnParallelLinear outside Transformer Engine's FP8 autocast,
// so under every low-precision recipe it trains in 16-bit and pays no cast; fp8_output_proj
// (MXFP8 only) puts it under the recipe, at the FP8 rate. Llama-3.1-8B's 128k-vocabulary head
// is 7% of its linear FLOPs, so the 16-bit head costs an 8B step a few percent.
func TestLMHeadTrainsIn16BitUnlessFP8OutputProj(t *testing.T) {
	tr := megatronTrainer(t, "Llama-3.1-8B", "GB300", "fp8")
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 1, GBS: 64, Seq: 8192, DistOptimizer: true, Precision: "mxfp8"}
	head := func(l Layout) (dtypes map[string]int, cast bool, step float64) {
		st, err := tr.step(l)
		if err != nil {
			t.Fatal(err)
		}
		dtypes = map[string]int{}
		for _, k := range st.Kernels {
			if k.Category == string(analyzer.CatLMHead) {
				if k.Kind == kernels.GEMM {
					dtypes[k.DType]++
				} else if strings.HasSuffix(k.Name, ".cast") {
					cast = true
				}
			}
		}
		s, err := tr.Train(l)
		if err != nil {
			t.Fatal(err)
		}
		return dtypes, cast, s.StepTime
	}
	d16, cast16, t16 := head(l)
	l.FP8OutputProj = true
	d8, cast8, t8 := head(l)
	if d16["bf16"] != 3 || d16["fp8"] != 0 || cast16 {
		t.Errorf("default: LM head GEMMs by dtype %v, cast %v; want its three GEMMs in bf16 and no cast", d16, cast16)
	}
	if d8["fp8"] != 3 || !cast8 {
		t.Errorf("fp8_output_proj: LM head GEMMs by dtype %v, cast %v; want three fp8 GEMMs and their cast", d8, cast8)
	}
	if r := t16 / t8; !(r > 1.01 && r < 1.10) {
		t.Errorf("16-bit head step / FP8 head step %.3f, want 1.01-1.10", r)
	}
	// and only a head under MXFP8 keeps MXFP8's row- and column-wise copies of its weight
	params := float64(tr.m.Fingerprint.Vocab * tr.m.Fingerprint.Hidden)
	mx := TrainingMemory(tr.m, l).Total
	l.FP8OutputProj = false
	if d := mx - TrainingMemory(tr.m, l).Total; math.Abs(d-params*2*(1+1.0/32)) > 1e6 {
		t.Errorf("the MXFP8 head's weight copies: %.3g bytes, want %.3g", d, params*2*(1+1.0/32))
	}
}

// Megatron's unfused expert MLP adds GPT-OSS's expert output bias in fp32 outside the GEMM and
// runs the activation as a kernel of its own; the fused grouped MLP does both in the GEMMs'
// epilogues, so on the same layout it is faster and moves no fp32 bias pass. FSDP (torchtitan)
// is not Megatron's code and pays neither.
func TestFusedGroupedMLPDropsMegatronsExpertPasses(t *testing.T) {
	tr := megatronTrainer(t, "gpt-oss-120b", "GB200", "bf16")
	l := Layout{Framework: Megatron, TP: 1, PP: 1, VP: 1, CP: 1, DP: 64, EP: 64, ETP: 1, MBS: 1, GBS: 256, Seq: 4096, DistOptimizer: true}
	bias := func(l Layout) (bytes, step float64) {
		st, err := tr.step(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range st.Kernels {
			if k.Name == "experts.down_proj_bias.fp32" {
				bytes += k.Bytes
			}
		}
		s, err := tr.Train(l)
		if err != nil {
			t.Fatal(err)
		}
		return bytes, s.StepTime
	}
	unfused, tUnfused := bias(l)
	l.FusedGroupedMLP = true
	fused, tFused := bias(l)
	// 64 ranks each compute 4,096 tokens x top-4 assignments a layer, 2880 wide, 36 layers
	want := 64.0 * 4096 * 4 * 2880 * 36
	if math.Abs(unfused-want)/want > 1e-9 || fused != 0 {
		t.Errorf("fp32 bias bytes: unfused %.4g (want %.4g), fused %.4g (want 0)", unfused, want, fused)
	}
	if !(tFused < tUnfused) {
		t.Errorf("fused grouped MLP step %.3f s, unfused %.3f s: want the fused one faster", tFused, tUnfused)
	}
	l.FusedGroupedMLP, l.Framework, l.DistOptimizer, l.ZeRO = false, FSDP, false, 3
	if b, _ := bias(l); b != 0 {
		t.Errorf("fsdp pays Megatron's fp32 bias pass: %.4g bytes", b)
	}
}

// megatronTrainer times a zoo model on an NVL72 chip with its megatron lane's figures.
func megatronTrainer(t *testing.T, model, chipName, dtype string) *Trainer {
	t.Helper()
	chip, err := chips.Default().Lookup(chipName)
	if err != nil {
		t.Fatal(err)
	}
	chip.Efficiency = chip.Efficiency.Lane(Megatron)
	tm, err := timing.New(chip, dtype)
	if err != nil {
		t.Fatal(err)
	}
	peak, _ := chip.Peak(dtype)
	sc := analyzer.DefaultScenario()
	sc.ComputeDType = dtype
	return NewTrainer(zooModel(t, model), sc, tm, peak, 72)
}

// GPT-OSS's eager clamp concatenates a clamped copy of each expert's FC1 output, which the fused
// activation keeps for the backward beside the output the clamps keep: 2 bytes x 2 x 2,880 per
// assignment in every MoE layer, unless the activation is recomputed or fused into the GEMMs.
// (Megatron-Bridge's B200 presets recompute moe_act at MBS 4; without it the step does not fit.)
func TestEagerClampKeepsItsCopy(t *testing.T) {
	m := zooModel(t, "gpt-oss-120b")
	l := Layout{Framework: Megatron, TP: 1, PP: 1, VP: 1, CP: 1, DP: 64, EP: 8, ETP: 1, MBS: 4, GBS: 1280, Seq: 4096, DistOptimizer: true}
	unclamped := *m
	unclamped.Fingerprint.GLUClamp = 0
	with, without := TrainingMemory(m, l).Activations, TrainingMemory(&unclamped, l).Activations
	// 4 x 4,096 tokens x top-4 x MoEImbalance assignments a layer, 36 layers
	want := 4.0 * 4096 * 4 * MoEImbalance * 2 * 2 * 2880 * 36
	if math.Abs(with-without-want)/want > 1e-9 {
		t.Errorf("the clamp's copy adds %.4g bytes of activations, want %.4g", with-without, want)
	}
	l.Recompute = "selective:moe_act"
	if a, b := TrainingMemory(m, l).Activations, TrainingMemory(&unclamped, l).Activations; a != b {
		t.Errorf("recomputing the activation still keeps the clamp's copy: %.4g vs %.4g bytes", a, b)
	}
	l.Recompute, l.FusedGroupedMLP = "", true
	if a, b := TrainingMemory(m, l).Activations, TrainingMemory(&unclamped, l).Activations; a != b {
		t.Errorf("the fused grouped MLP clamps in its epilogue, yet keeps a copy: %.4g vs %.4g bytes", a, b)
	}
}

// Megatron's activation_func_fp8_input_store keeps the SwiGLU's input, the FC1 output, as an
// e4m3 cast: by hand, Llama-3.1-8B (FFN 14,336, gated: 28,672 elements a token) at 4,096 tokens
// saves 4,096 x 28,672 B in each of its 32 layers; DeepSeek-V3's dense layers (18,432) and MoE
// layers (8 routed + 1 shared expert of 2,048) both save 36,864 B a token, the fused grouped MLP
// keeping the routed experts' 16-bit input; a recomputed activation keeps its 16-bit input, so
// the flag saves nothing there.
func TestActFP8InputStoreByHand(t *testing.T) {
	m := zooModel(t, "Llama-3.1-8B")
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 1, GBS: 8, Seq: 4096, DistOptimizer: true}
	fp8 := l
	fp8.ActFP8InputStore = true
	if err := fp8.Validate(m.Fingerprint); err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "llama 8b saved", TrainingMemory(m, l).Activations-TrainingMemory(m, fp8).Activations, 4096*28672*32, 1e-9)
	l.Recompute, fp8.Recompute = "selective:act", "selective:act"
	testutil.Near(t, "recomputed activation", TrainingMemory(m, fp8).Activations, TrainingMemory(m, l).Activations, 1e-12)

	ds := zooModel(t, "DeepSeek-V3")
	d := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 64, EP: 64, ETP: 1, MBS: 1, GBS: 64, Seq: 4096, DistOptimizer: true, Precision: "fp8-blockwise"}
	dfp8 := d
	dfp8.ActFP8InputStore = true
	testutil.Near(t, "deepseek saved", TrainingMemory(ds, d).Activations-TrainingMemory(ds, dfp8).Activations, 4096*36864*61, 1e-9)
	d.FusedGroupedMLP, dfp8.FusedGroupedMLP = true, true
	testutil.Near(t, "deepseek, fused grouped MLP", TrainingMemory(ds, d).Activations-TrainingMemory(ds, dfp8).Activations,
		4096*(3*36864+58*2*2048), 1e-9)

	// Megatron refuses it off SwiGLU, and it is Megatron's
	for _, c := range []struct {
		model string
		l     Layout
		want  string
	}{
		{"gpt-oss-20b", Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 8, Seq: 4096, ActFP8InputStore: true}, "SwiGLU only"},
		{"gpt2", Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 1, GBS: 8, Seq: 1024, ActFP8InputStore: true}, "ungated gelu"},
		{"Llama-3.1-8B", Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 1, GBS: 8, Seq: 4096, Framework: FSDP, ActFP8InputStore: true}, "needs --framework megatron"},
	} {
		err := c.l.Validate(zooModel(t, c.model).Fingerprint)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.model, err, c.want)
		}
	}
}
