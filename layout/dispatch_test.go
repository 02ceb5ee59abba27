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

// How many ranks (or nodes) a token's top-k experts fall in, by hand. Random routing draws the
// k experts without replacement, so a group of 16 of Qwen3-30B-A3B's 128 experts is missed with
// probability C(112, 8) / C(128, 8): 8 ranks of 16 are touched 8 x (1 - 0.3326) = 5.34 times.
// Primus's even routing gives token t experts 8t mod 128 to 8t + 7: always inside one rank's 16.
// With DeepSeek-V2-Lite's 64 experts, top-6 and 8 a rank, token t starts at 6t mod 64, an even
// number: starting at 0 or 2 mod 8 its six stay in one rank, at 4 or 6 they cross to a second,
// 1.5 ranks on average.
func TestTouchedGroups(t *testing.T) {
	miss := 1.0
	for i := 0.0; i < 8; i++ {
		miss *= (112 - i) / (128 - i)
	}
	testutil.Near(t, "random, 8 ranks of 16", touchedGroups(128, 8, 16, ""), 8*(1-miss), 1e-12)
	testutil.Near(t, "random, named", touchedGroups(128, 8, 16, RoutingUniform), 8*(1-miss), 1e-12)
	testutil.Near(t, "even, 8 ranks of 16", touchedGroups(128, 8, 16, RoutingEven), 1, 1e-12)
	testutil.Near(t, "even, 8 ranks of 8, top-6", touchedGroups(64, 6, 8, RoutingEven), 1.5, 1e-12)
	// one rank holding every expert is touched once; one expert a rank, k ranks
	testutil.Near(t, "one group", touchedGroups(128, 8, 128, ""), 1, 0)
	testutil.Near(t, "an expert a rank", touchedGroups(64, 6, 1, ""), 6, 1e-12)
	testutil.Near(t, "an expert a rank, even", touchedGroups(64, 6, 1, RoutingEven), 6, 1e-12)
}

// DeepEP sends a token once to each rank holding any of its experts (its dispatch's
// is_token_in_rank; the combine returns one partial sum per rank), where NCCL's all-to-all sends
// each of its top-k copies: Qwen3-30B-A3B at EP8 on one 8-GPU node, bf16, moves 5.34 / 8 of
// the all-to-all's bytes under random routing, and 1 / 8 under Primus's even routing.
func TestDeepEPSendsOneCopyPerRank(t *testing.T) {
	m := zooModel(t, "Qwen3-30B-A3B")
	chip, _ := chips.Default().Lookup("H100")
	tm, _ := timing.New(chip, "bf16")
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 64, Seq: 4096, DistOptimizer: true}
	a2a := func(l Layout) A2A {
		t.Helper()
		if err := l.Validate(m.Fingerprint); err != nil {
			t.Fatal(err)
		}
		st, err := Train(m, analyzer.DefaultScenario(), l, tm, 989.4e12, 8)
		if err != nil {
			t.Fatal(err)
		}
		return st.A2A
	}
	msg := 4096.0 * 8 * 2048 * 2 // tokens x top-8 x hidden x 2 B
	nccl := a2a(l)
	testutil.Near(t, "alltoall bytes per layer", nccl.BytesPerLayer, 4*msg*7/8, 1e-12)
	l.Dispatcher = DispatchDeepEP
	random := a2a(l)
	testutil.Near(t, "deepep bytes per layer, random routing", random.BytesPerLayer, 4*msg/8*touchedGroups(128, 8, 16, "")*7/8, 1e-12)
	l.Routing = RoutingEven
	even := a2a(l)
	testutil.Near(t, "deepep bytes per layer, even routing", even.BytesPerLayer, 4*msg/8*7/8, 1e-12)
	if !(even.Time < random.Time && random.Time < nccl.Time) {
		t.Errorf("all-to-all times: even %g, random %g, alltoall %g: want that order", even.Time, random.Time, nccl.Time)
	}
	// NCCL's all-to-all moves every copy whatever the routing
	l.Dispatcher = DispatchAllToAll
	testutil.Near(t, "alltoall bytes, even routing", a2a(l).BytesPerLayer, nccl.BytesPerLayer, 0)
	// under an FP8 recipe Megatron's DeepEP still sends 16-bit tokens; DeepSeek-V3's stack sends
	// the forward dispatch in FP8 with 1x128 scales (one of the four exchanges at 129/256 the bytes)
	l.Dispatcher, l.Routing, l.Precision = DispatchDeepEP, "", "mxfp8"
	testutil.Near(t, "deepep under mxfp8", a2a(l).BytesPerLayer, random.BytesPerLayer, 1e-12)
	l.Precision, l.FP8Dispatch = "fp8-blockwise", true
	testutil.Near(t, "deepep, fp8 dispatch", a2a(l).BytesPerLayer, random.BytesPerLayer*(3+(1+1.0/128)/2)/4, 1e-12)
}

// Primus-Turbo's grouped GEMM runs all of a rank's experts in one launch per linear (Primus's
// moe-training guide), so an MoE layer's host launches no longer grow with its local experts:
// Qwen3-30B-A3B at EP8 (16 local experts), bf16, issues 15 + 16 x 2 + 15 = 62 forward and
// 30 + 16 x 4 = 94 backward launches under Transformer Engine (or Megatron's legacy multi-stream
// grouped GEMM), and 15 + 2 + 15 = 32 and 30 + 4 = 34 under Turbo's.
func TestTurboGroupedGEMMLaunches(t *testing.T) {
	fp := zooModel(t, "Qwen3-30B-A3B").Fingerprint
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 64, Seq: 4096, DistOptimizer: true, Framework: Megatron}
	for _, c := range []struct {
		gg   string
		want float64
	}{{"", 62 + 94}, {GroupedTE, 62 + 94}, {GroupedLegacy, 62 + 94}, {GroupedTurbo, 32 + 34}} {
		l.GroupedGEMM = c.gg
		if got := l.MoELaunches(fp); got != c.want {
			t.Errorf("grouped gemm %q: %g launches a layer and micro-batch, want %g", c.gg, got, c.want)
		}
	}
	// an FP8 recipe adds two quantizations a pass (the inputs' forward, the gradients'
	// backward), once for all the experts under Turbo
	l.Precision = "fp8-cs"
	if got, want := l.MoELaunches(fp), 34.0+36; got != want {
		t.Errorf("turbo under fp8-cs: %g launches, want %g", got, want)
	}
}

// Sync-free MoE from stage 2 drops the forward's copy of the token counts to the host, so the
// host issues ahead of the GPU and the step is max(host, GPU) over the micro-batch: the close
// case of TestSynchronizedForwardByHand (15.55 ms a layer synchronized) becomes the GPU's
// 14.2 ms, and each limit stays as it was.
func TestSyncFreeHostPace(t *testing.T) {
	ph := moeLaunches{experts: 79, router: 15, forwards: 1, backward: 126, syncFree: true}
	const launch, layers = 50e-6, 48.0
	host := launch * layers * (ph.experts + ph.router + ph.backward)
	if got, want := moeHostPace(launch, ph, layers, layers*2.6e-3, layers*1.9e-3, layers*14.2e-3), layers*14.2e-3; math.Abs(got-want) > 1e-12 {
		t.Errorf("sync-free close case %.4f s, want the GPU's %.4f", got, want)
	}
	if got := moeHostPace(launch, ph, layers, layers*0.1e-3, layers*0.1e-3, layers*0.5e-3); math.Abs(got-host) > 1e-12 {
		t.Errorf("sync-free, host-bound: %.4f s, want the host's %.4f", got, host)
	}
	synced := ph
	synced.syncFree = false
	if s, f := moeHostPace(launch, synced, layers, layers*2.6e-3, layers*1.9e-3, layers*14.2e-3), moeHostPace(launch, ph, layers, layers*2.6e-3, layers*1.9e-3, layers*14.2e-3); !(f < s) {
		t.Errorf("sync-free %.4f s not below the synchronized %.4f", f, s)
	}
	// the layout sets it from stage 2 only: stage 1 still waits on the dispatch's counts
	fp := zooModel(t, "Qwen3-30B-A3B").Fingerprint
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 64, Seq: 4096, DistOptimizer: true,
		Framework: Megatron, Dispatcher: DispatchDeepEP, GroupedGEMM: GroupedTurbo}
	for stage, want := range map[int64]bool{0: false, 1: false, 2: true, 3: true} {
		l.SyncFreeMoE = stage
		if got := l.moeLaunchPhases(fp).syncFree; got != want {
			t.Errorf("stage %d: sync-free %v, want %v", stage, got, want)
		}
	}
}

// Settings that cannot run together are refused with what each needs, as Primus's own argument
// checks refuse them (rocm_arg_validation.py: stages 2 and 3 turn on Turbo's grouped GEMM and
// DeepEP, and refuse the legacy grouped GEMM).
func TestPrimusMoESettingsRefused(t *testing.T) {
	moe := zooModel(t, "Qwen3-30B-A3B").Fingerprint
	dense := zooModel(t, "Llama-3.1-8B").Fingerprint
	base := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 64, Seq: 4096, DistOptimizer: true, Framework: Megatron}
	for _, c := range []struct {
		name string
		fp   analyzer.Fingerprint
		edit func(*Layout)
		want string
	}{
		{"unknown grouped gemm", moe, func(l *Layout) { l.GroupedGEMM = "cutlass\x1b[31m" }, "want te, legacy or turbo"},
		{"unknown routing", moe, func(l *Layout) { l.Routing = "skewed" }, "want uniform or even"},
		{"stage out of range", moe, func(l *Layout) { l.SyncFreeMoE = 4 }, "want 0 (off) to 3"},
		{"stage 2 on the legacy grouped gemm", moe, func(l *Layout) { l.SyncFreeMoE, l.GroupedGEMM, l.Dispatcher = 2, GroupedLegacy, DispatchDeepEP }, "needs grouped gemm turbo (it is legacy)"},
		{"stage 2 on alltoall", moe, func(l *Layout) { l.SyncFreeMoE, l.GroupedGEMM = 2, GroupedTurbo }, "needs dispatcher deepep (it is alltoall)"},
		{"turbo under fsdp", moe, func(l *Layout) { l.GroupedGEMM, l.Framework = GroupedTurbo, FSDP }, "need --framework megatron"},
		{"dense model", dense, func(l *Layout) { l.EP, l.GroupedGEMM = 1, GroupedTurbo }, "the model is dense"},
		{"dense model, routing", dense, func(l *Layout) { l.EP, l.Routing = 1, RoutingEven }, "the model is dense"},
		{"fp8 dispatch on hybridep", moe, func(l *Layout) { l.Dispatcher, l.Precision, l.FP8Dispatch = DispatchHybridEP, "mxfp8", true }, "needs dispatcher deepep and an FP8 recipe (the run is hybridep, mxfp8)"},
		{"fp8 dispatch in bf16", moe, func(l *Layout) { l.Dispatcher, l.FP8Dispatch = DispatchDeepEP, true }, "(the run is deepep, bf16)"},
	} {
		l := base
		c.edit(&l)
		err := l.Validate(c.fp)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	ok := base
	ok.SyncFreeMoE, ok.GroupedGEMM, ok.Dispatcher, ok.Routing = 2, GroupedTurbo, DispatchDeepEP, RoutingEven
	if err := ok.Validate(moe); err != nil {
		t.Errorf("stage 2 with Turbo's grouped GEMM and DeepEP: %v", err)
	}
}

// Megatron with bias_swiglu_fusion off runs the routed experts' SwiGLU as eager ops and scales
// by the router weight in fp32 (experts.py's activation_func_with_probs @d98e8a6): each
// assignment keeps the silu output and the product, 16-bit, 2 x 2 x 768 B more for
// Qwen3-30B-A3B, in each of its 48 layers, unless the activation is recomputed; and the step
// pays the extra passes. Primus's Qwen3 configs run so; the FP8 run AMD measured at 277 GB
// (calib.TestAMDHeldOutTrainingRows holds the total within 5%).
func TestUnfusedSwiGLU(t *testing.T) {
	m := zooModel(t, "Qwen3-30B-A3B")
	fused := Layout{Framework: Megatron, TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 64, Seq: 4096, DistOptimizer: true}
	unfused := fused
	unfused.NoSwiGLUFusion = true
	if err := unfused.Validate(m.Fingerprint); err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "kept per layer", (TrainingMemory(m, unfused).Activations-TrainingMemory(m, fused).Activations)/48, 4096*8*2*2*768, 1e-9)
	rec := unfused
	rec.Recompute = "selective:act"
	recF := fused
	recF.Recompute = "selective:act"
	testutil.Near(t, "recomputed activation", TrainingMemory(m, rec).Activations, TrainingMemory(m, recF).Activations, 1e-12)
	// (replayed from a graph, so the host's eager pace at MBS 1 does not hide the GPU's passes)
	tr := megatronTrainer(t, "Qwen3-30B-A3B", "B200", "bf16")
	fused.CUDAGraph, unfused.CUDAGraph = true, true
	a, err := tr.Train(fused)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.Train(unfused)
	if err != nil {
		t.Fatal(err)
	}
	if !(b.Kernels > a.Kernels) {
		t.Errorf("unfused kernels %.3f s, fused %.3f s: the eager passes cost nothing", b.Kernels, a.Kernels)
	}
	// refused where it means nothing
	dense := zooModel(t, "gpt2")
	g := Layout{Framework: Megatron, TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 1, GBS: 8, Seq: 1024, NoSwiGLUFusion: true}
	if err := g.Validate(dense.Fingerprint); err == nil || !strings.Contains(err.Error(), "not gated") {
		t.Errorf("gpt2 (GELU): %v", err)
	}
	unfused.Framework, unfused.CUDAGraph, unfused.DistOptimizer = FSDP, false, false
	if err := unfused.Validate(m.Fingerprint); err == nil || !strings.Contains(err.Error(), "--no-bias-swiglu-fusion is Megatron's") {
		t.Errorf("under fsdp: %v", err)
	}
}

// Megatron's legacy GroupedMLP (--moe-use-legacy-grouped-gemm, as AMD's Primus DeepSeek recipes
// run it) calls grouped_gemm's gmm on 16-bit stacked weights: under an FP8 recipe its experts'
// GEMMs stay BF16 with no casts (Megatron-LM experts.py before bf8c7901: gg.ops.gmm, no FP8
// path), while Transformer Engine's GroupedLinear quantizes them. By hand for Qwen3-30B-A3B on
// EP8 (16 local experts of 3 x 2,048 x 768 weights, 48 layers): the FP8 weight copies the
// legacy experts do not keep are 2 bytes each, 2.42 GB a rank; the host issues no per-expert
// quantizations, 2 a pass per expert fewer.
func TestLegacyGroupedMLPKeepsExperts16Bit(t *testing.T) {
	m := zooModel(t, "Qwen3-30B-A3B")
	te := Layout{Framework: Megatron, TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 2, GBS: 64, Seq: 4096, DistOptimizer: true, Precision: "fp8-ds"}
	legacy := te
	legacy.GroupedGEMM = GroupedLegacy
	for _, l := range []Layout{te, legacy} {
		if err := l.Validate(m.Fingerprint); err != nil {
			t.Fatal(err)
		}
	}
	tr := megatronTrainer(t, "Qwen3-30B-A3B", "MI355X", "fp8")
	dtypes := func(l Layout) (gemm map[string]bool, casts int) {
		st, err := tr.step(l)
		if err != nil {
			t.Fatal(err)
		}
		gemm = map[string]bool{}
		for _, k := range st.Kernels {
			if k.Category != string(analyzer.CatRoutedExperts) {
				continue
			}
			switch {
			case k.Kind == kernels.GEMM:
				gemm[k.DType] = true
			case strings.HasSuffix(k.Name, ".cast"):
				casts++
			}
		}
		return gemm, casts
	}
	if g, c := dtypes(te); !g["fp8"] || g["bf16"] || c == 0 {
		t.Errorf("Transformer Engine's experts under fp8-ds: GEMMs in %v, %d casts; want fp8 and casts", g, c)
	}
	if g, c := dtypes(legacy); !g["bf16"] || g["fp8"] || c != 0 {
		t.Errorf("legacy experts under fp8-ds: GEMMs in %v, %d casts; want bf16 and none", g, c)
	}
	// the non-expert linears stay FP8 under both: attention's projections
	st, err := tr.step(legacy)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range st.Kernels {
		if k.Name == "q_proj" && k.Kind == kernels.GEMM && k.DType != "fp8" {
			t.Errorf("legacy layout's q_proj in %s, want fp8", k.DType)
		}
	}
	const expertWeights = 48 * 16 * 3 * 2048 * 768
	testutil.Near(t, "FP8 copies the legacy experts skip (bytes)", TrainingMemory(m, te).Weights-TrainingMemory(m, legacy).Weights, 2*expertWeights, 1e-9)
	if got, want := te.MoELaunches(m.Fingerprint)-legacy.MoELaunches(m.Fingerprint), float64(16*2*2); got != want {
		t.Errorf("legacy issues %g fewer launches a layer and micro-batch, want %g (no per-expert casts)", got, want)
	}
	// a 16-bit recipe: the two paths count the same
	te.Precision, legacy.Precision = "", ""
	a, err := tr.Train(te)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.Train(legacy)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "bf16 step, legacy against te", b.StepTime, a.StepTime, 1e-12)
}
