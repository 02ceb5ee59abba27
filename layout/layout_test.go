package layout

import (
	"math"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/mrep-dev/mrep/internal/testutil/bundled"
	"github.com/mrep-dev/mrep/kernels"
	"github.com/mrep-dev/mrep/timing"
)

// ZeRO (Rajbhandari et al. 2019), a 7.5B model with Adam on 64 GPUs: 120 GB per GPU of model
// states without sharding, 31.4 GB with optimizer states sharded (stage 1), 16.6 GB (stage 2),
// 1.9 GB (stage 3): DeepSpeed's counting, 2 + 2 + 12 bytes per parameter.
func TestModelStatesMatchZeRO(t *testing.T) {
	m := &analyzer.Model{Params: map[analyzer.Category]int64{analyzer.CatDenseFFN: 7_500_000_000}}
	m.Fingerprint.Layers, m.Fingerprint.Hidden = 1, 1
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 64, EP: 1, MBS: 1, GBS: 64, Seq: 2, Framework: DeepSpeed}
	states := func(mem Memory) float64 { return mem.Weights + mem.MasterWeights + mem.Gradients + mem.Optimizer }
	testutil.Near(t, "stage 0", states(TrainingMemory(m, l)), 120e9, 1e-9)
	l.DistOptimizer = true
	testutil.Near(t, "stage 1", states(TrainingMemory(m, l)), 31.40625e9, 1e-9)
	l.ZeRO = 2
	testutil.Near(t, "stage 2", states(TrainingMemory(m, l)), 16.640625e9, 1e-9)
	l.ZeRO = 3
	testutil.Near(t, "stage 3", states(TrainingMemory(m, l)), 1.875e9, 1e-9)
}

// Megatron's theoretical memory (megatron/training/theoretical_memory_usage.py): 18 bytes per
// parameter without the distributed optimizer (bf16 weights, fp32 main gradients, fp32 master
// and Adam moments), 6 + 12/d with it; context parallel ranks share the optimizer's shards.
func TestModelStatesMatchMegatron(t *testing.T) {
	m := &analyzer.Model{Params: map[analyzer.Category]int64{analyzer.CatDenseFFN: 7_500_000_000}}
	m.Fingerprint.Layers, m.Fingerprint.Hidden = 1, 1
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 64, EP: 1, MBS: 1, GBS: 64, Seq: 2}
	states := func(mem Memory) float64 { return mem.Weights + mem.MasterWeights + mem.Gradients + mem.Optimizer }
	testutil.Near(t, "no distributed optimizer", states(TrainingMemory(m, l)), 18*7.5e9, 1e-12)
	l.DistOptimizer = true
	testutil.Near(t, "distributed optimizer, d = 64", states(TrainingMemory(m, l)), (6+12.0/64)*7.5e9, 1e-12)
	l.DP, l.CP, l.GBS, l.Seq = 16, 4, 16, 8
	testutil.Near(t, "d = DP x CP = 64", states(TrainingMemory(m, l)), (6+12.0/64)*7.5e9, 1e-12)
}

// Korthikanti et al. 2022, Table 2: tensor + sequence parallel keeps (s·b·h/t)·34 bytes per
// layer once flash attention drops the 5·a·s/h score term.
func TestActivationsPerLayer(t *testing.T) {
	s, b, h, tp := 2048.0, 1.0, 12288.0, 8.0
	testutil.Near(t, "TP+SP", ActivationBytesPerLayer(s, b, h, tp), s*b*h/tp*34, 1e-12)
}

// zooModel is a bundled example dump as a model.
func zooModel(t testing.TB, name string) *analyzer.Model {
	t.Helper()
	return analyzer.NewModel(bundled.Dump(t, name))
}

// llama70b is the NeMo recipe's model and the H100's time model.
func llama70b(t testing.TB) (*analyzer.Model, chipModel) {
	t.Helper()
	chip, _ := chips.Default().Lookup("H100")
	tm, err := timing.New(chip, "bf16")
	if err != nil {
		t.Fatal(err)
	}
	return zooModel(t, "Llama-3.1-70B-Instruct"), chipModel{tm, 989.4e12}
}

type chipModel struct {
	p    *timing.Model
	peak float64
}

// The published recipe's layout: the bubble is (PP-1)/VP micro-batches (Narayanan et al.
// 2021), more DP never changes a GPU's micro-batch, and the step grows with DP only by the
// exposed gradient traffic (weak scaling, as measured).
func TestPipelineAndDataParallel(t *testing.T) {
	m, k := llama70b(t)
	s := analyzer.DefaultScenario()
	prev := 0.0
	var mb float64
	for i, dp := range []int64{2, 4, 16, 64} {
		l := Layout{TP: 4, PP: 4, VP: 5, CP: 2, DP: dp, EP: 1, MBS: 1, GBS: 64 * dp, Seq: 8192, DistOptimizer: true}
		st, err := Train(m, s, l, k.p, k.peak, 8)
		if err != nil {
			t.Fatal(err)
		}
		testutil.Near(t, "bubble", st.Bubble, 3.0/5*st.Microbatch, 1e-12)
		if i == 0 {
			mb = st.Microbatch
		} else if st.Microbatch != mb {
			t.Errorf("DP %d changed the micro-batch time: %g vs %g", dp, st.Microbatch, mb)
		}
		if st.StepTime < prev {
			t.Errorf("DP %d: step %g shorter than with less DP %g", dp, st.StepTime, prev)
		}
		if st.StepTime < st.Roofline {
			t.Errorf("faster than the roofline")
		}
		prev = st.StepTime
	}
	bad := Layout{TP: 3, PP: 4, VP: 5, CP: 2, DP: 2, EP: 1, MBS: 1, GBS: 128, Seq: 8192}
	if _, err := Train(m, s, bad, k.p, k.peak, 8); err == nil {
		t.Error("TP 3 does not divide 64 heads")
	}
}

// Korthikanti Table 2 without sequence parallel (flash attention: no s^2 term): s·b·h·(10 + 24/t).
func TestActivationsWithoutSequenceParallel(t *testing.T) {
	m := &analyzer.Model{Params: map[analyzer.Category]int64{analyzer.CatDenseFFN: 1}}
	m.Fingerprint.Layers, m.Fingerprint.Hidden = 8, 4096
	l := Layout{TP: 8, PP: 1, VP: 1, CP: 1, DP: 1, EP: 1, MBS: 2, GBS: 2, Seq: 4096}
	sp := TrainingMemory(m, l).Activations
	l.NoSP = true
	noSP := TrainingMemory(m, l).Activations
	testutil.Near(t, "with SP", sp, 8*34*4096*2*4096/8.0, 1e-12)
	testutil.Near(t, "without SP", noSP, 8*4096*2*4096*(10+24/8.0), 1e-12)
}

// Expert tensor parallel apart from the attention's: Mixtral with attention TP8 and experts
// EP8 x ETP1 on the same 8 GPUs holds one expert per GPU (an eighth of the experts), and its
// per-GPU FLOPs equal TP8 over everything; EP8 x ETP8 needs 64 GPUs' worth of shards. Norms and
// the router stay whole on every TP rank.
func TestExpertTensorParallel(t *testing.T) {
	m := zooModel(t, "Mixtral-8x7B-v0.1")
	experts := float64(m.Params[analyzer.CatRoutedExperts])
	whole := float64(m.Params[analyzer.CatNorm] + m.Params[analyzer.CatRouter])
	rest := float64(m.TotalParams) - experts - whole
	testutil.Near(t, "EP8 ETP1", m.ParamsPerGPU(8, 1, 8, 1), rest/8+experts/8+whole, 1e-12)
	testutil.Near(t, "EP8 ETP8", m.ParamsPerGPU(8, 1, 8, 8), rest/8+experts/64+whole, 1e-12)
	s := analyzer.DefaultScenario()
	s.Seq, s.TP = 4096, 8
	a, _ := m.AnalyzeTotals(analyzer.Training, s, analyzer.Achievable)
	s.EP, s.ETP = 8, 1
	b, _ := m.AnalyzeTotals(analyzer.Training, s, analyzer.Achievable)
	testutil.Near(t, "per-GPU F_theory, TP8 vs attention TP8 + experts EP8", b.Cost.FTheory, a.Cost.FTheory, 1e-9)
	l := Layout{TP: 8, PP: 1, VP: 1, CP: 1, DP: 1, EP: 8, ETP: 8, MBS: 1, GBS: 8, Seq: 4096}
	if err := l.Validate(m.Fingerprint); err == nil {
		t.Error("EP8 x ETP8 on 8 GPUs must be refused")
	}
	l.ETP = 1
	if err := l.Validate(m.Fingerprint); err != nil {
		t.Errorf("attention TP8 + experts EP8 on 8 GPUs: %v", err)
	}
}

// Recomputing some layers lands between recomputing none and all, in memory and in time.
func TestPartialRecompute(t *testing.T) {
	m, k := llama70b(t)
	tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 8)
	base := Layout{TP: 8, PP: 4, VP: 1, CP: 1, DP: 2, EP: 1, MBS: 1, GBS: 16, Seq: 4096, DistOptimizer: true}
	var mem, tm []float64
	for _, rc := range []struct {
		mode string
		n    int64
	}{{"none", 0}, {"full", 10}, {"full", 0}} {
		l := base
		l.Recompute, l.RecomputeLayers = rc.mode, rc.n
		st, err := tr.Train(l)
		if err != nil {
			t.Fatal(err)
		}
		mem = append(mem, TrainingMemory(m, l).Activations)
		tm = append(tm, st.Microbatch)
	}
	if !(mem[0] > mem[1] && mem[1] > mem[2]) || !(tm[0] < tm[1] && tm[1] < tm[2]) {
		t.Errorf("half the stage's layers recomputed: activations %v, micro-batch %v", mem, tm)
	}
	testutil.Near(t, "time halfway", tm[1], (tm[0]+tm[2])/2, 1e-9)
}

// Data parallel across nodes runs NCCL's rings over every NIC of a node at once: 16 ranks on
// two 8-GPU nodes reduce-scatter about 8x faster than 16 ranks one per node (the latency aside),
// and a layout whose DP group has eight ranks per node exposes less than one with one per node.
func TestDataParallelRingsUseEveryRail(t *testing.T) {
	m, k := llama70b(t)
	tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 8)
	grads := 2 * tr.split(Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 16, EP: 1, MBS: 1, GBS: 64, Seq: 4096}).Trainable
	one := tr.dpCollective(k.p, kernels.ReduceScatter, grads, 16, kernels.ScaleOut, 1)
	eight := tr.dpCollective(k.p, kernels.ReduceScatter, grads, 16, kernels.ScaleOut, 8)
	if r := one / eight; r < 7 || r > 8.01 {
		t.Errorf("16 ranks on 2 nodes: a ring per NIC is %.2fx faster than one rail, want about 8x", r)
	}
	// the same job, TP 8 x DP 4 (one DP rank per node) vs TP 2 x DP 16 (four per node)
	exposed := func(tp int64) float64 {
		l := Layout{TP: tp, PP: 1, VP: 1, CP: 1, DP: 32 / tp, EP: 1, MBS: 1, GBS: 64, Seq: 4096, DistOptimizer: true}
		st, err := tr.Train(l)
		if err != nil {
			t.Fatal(err)
		}
		return st.DPExposed / (2 * tr.split(l).Trainable)
	}
	if tp2, tp8 := exposed(2), exposed(8); !(tp2 < tp8) {
		t.Errorf("exposed DP seconds per gradient byte: TP2 (4 ranks per node) %g, TP8 (1 per node) %g", tp2, tp8)
	}
}

// Megatron's buckets: a model that fits one bucket (max(40M, 1M x DP) parameters) cannot start
// reducing before its backward ends, so its whole reduce-scatter and gather are exposed; with
// many buckets only the last one's is, when the backward is long enough. Gradients travel in
// fp32 unless grad_reduce_in_fp32 is off, parameters in one byte with FP8 parameter gather.
func TestMegatronBucketedOverlap(t *testing.T) {
	_, k := llama70b(t)
	m := zooModel(t, "Llama-3.2-1B-Instruct")
	tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 8)
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 2048, EP: 1, MBS: 1, GBS: 2048, Seq: 4096, DistOptimizer: true, ZeRO: 1}
	params := tr.split(l).Trainable
	if params > l.bucketParams(2048) {
		t.Fatalf("%g parameters: want one bucket of %g", params, l.bucketParams(2048))
	}
	g := math.Floor(8 / float64(l.TP))
	whole := tr.dpCollective(k.p, kernels.ReduceScatter, 4*params, 2048, kernels.ScaleOut, g) +
		tr.dpCollective(k.p, kernels.AllGather, 2*params, 2048, kernels.ScaleOut, g)
	testutil.Near(t, "one bucket: all of it exposed", tr.dataParallel(l, k.p, 10, 1), whole, 1e-9)

	bf16 := l
	bf16.BF16Grads, bf16.FP8ParamGather = true, true
	half := tr.dpCollective(k.p, kernels.ReduceScatter, 2*params, 2048, kernels.ScaleOut, g) +
		tr.dpCollective(k.p, kernels.AllGather, params, 2048, kernels.ScaleOut, g)
	testutil.Near(t, "bf16 gradients, FP8 parameters", tr.dataParallel(bf16, k.p, 10, 1), half, 1e-9)

	// 64 ranks: buckets of 64M parameters, about 20 of them; a long micro-batch hides all but
	// the last bucket of each collective
	l.DP, l.GBS = 64, 64
	nb := math.Ceil(params / 64e6)
	rs := tr.dpCollective(k.p, kernels.ReduceScatter, 4*params, 64, kernels.ScaleOut, g)
	ag := tr.dpCollective(k.p, kernels.AllGather, 2*params, 64, kernels.ScaleOut, g)
	testutil.Near(t, "many buckets, long backward", tr.dataParallel(l, k.p, 100, 1), (rs+ag)/nb, 1e-9)
}
