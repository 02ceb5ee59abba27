package layout

import (
	"math"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/kernels"
	"github.com/mrep-dev/mrep/timing"
)

// Llama-3.1-70B on 64 H100s at the NeMo recipe's batch, with what NeMo 24.09's Megatron has
// (the distributed optimizer, ZeRO-1): the published layout (TP4 PP4 CP2 VP5 MBS1) fits and is
// within 10% of the planner's best, every ranked layout fits, and the ranking is by step time.
func TestPlanTrainRanksThePublishedLayout(t *testing.T) {
	m, k := llama70b(t)
	tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 8)
	plan, err := tr.PlanTrain(PlanOptions{GPUs: 64, GBS: 128, Seq: 8192, MemoryBytes: 80 * (1 << 30), Domain: 8, Top: 5, ZeRO: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Feasible == 0 || len(plan.Top) != 5 {
		t.Fatalf("plan: %+v", plan.NoFit)
	}
	for i, c := range plan.Top {
		if !c.Fit.Fits || c.Step.Layout.Stage() != 1 {
			t.Errorf("rank %d: %s, ZeRO-%d", i, c.Fit.Verdict(), c.Step.Layout.Stage())
		}
		// by step time, a tight layout counted NearEqual slower
		if i > 0 {
			k := func(c Candidate) float64 {
				if c.Fit.Status == Tight {
					return c.Step.StepTime * (1 + NearEqual)
				}
				return c.Step.StepTime
			}
			if k(c) < k(plan.Top[i-1]) {
				t.Errorf("rank %d ranks before rank %d", i, i-1)
			}
		}
	}
	pub, err := tr.Train(Layout{TP: 4, PP: 4, VP: 5, CP: 2, DP: 2, EP: 1, MBS: 1, GBS: 128, Seq: 8192, DistOptimizer: true, Recompute: "none"})
	if err != nil {
		t.Fatal(err)
	}
	best := plan.Top[0].Step.StepTime
	if pub.StepTime > 1.1*best {
		t.Errorf("the published layout %.2f s is more than 10%% behind the planner's best %.2f s (%+v)", pub.StepTime, best, plan.Top[0].Step.Layout)
	}
	if plan.Top[0].Why == "" {
		t.Error("the winner does not say why it wins")
	}
}

// One GPU with too little memory: nothing fits, and the planner says which term is short.
func TestPlanTrainSaysWhyNothingFits(t *testing.T) {
	m, k := llama70b(t)
	tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 8)
	plan, err := tr.PlanTrain(PlanOptions{GPUs: 8, GBS: 8, Seq: 8192, MemoryBytes: 80 * (1 << 30), Domain: 8, Top: 3})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Feasible != 0 || plan.NoFit == "" {
		t.Fatalf("70B with Adam on 8 GPUs cannot fit: %+v", plan)
	}
	if !strings.Contains(plan.NoFit, "too much") || !strings.Contains(plan.NoFit, "the nearest change that fits: 16 GPUs") {
		t.Errorf("the verdict must say what is short and the nearest change: %s", plan.NoFit)
	}
}

// A 1B model on 8 GPUs of 80 GiB, by hand: it fits on one GPU, so any TP, PP or CP only adds
// collectives, bubble or exchanges: the best layout is pure data parallel with the largest
// micro-batch (fewest launches, best GEMM shapes), its gradient traffic hidden behind compute
// but for the last bucket.
func TestPlanTrainSmallModelIsPureDataParallel(t *testing.T) {
	_, k := llama70b(t)
	tr := NewTrainer(zooModel(t, "Llama-3.2-1B-Instruct"), analyzer.DefaultScenario(), k.p, k.peak, 8)
	plan, err := tr.PlanTrain(PlanOptions{GPUs: 8, GBS: 64, Seq: 2048, MemoryBytes: 80 * (1 << 30), Domain: 8, Top: 3})
	if err != nil {
		t.Fatal(err)
	}
	l := plan.Top[0].Step.Layout
	if l.TP != 1 || l.PP != 1 || l.CP != 1 || l.DP != 8 || l.MBS != 8 { // GBS 64 / DP 8: the whole per-rank batch in one micro-batch
		t.Errorf("best layout %+v, want TP1 PP1 CP1 DP8 MBS8", l)
	}
	// all but the last of Megatron's 40M-parameter buckets hide behind the backward
	if st := plan.Top[0].Step; st.DPExposed <= 0 || st.DPExposed > 0.01*st.StepTime {
		t.Errorf("a 1B model's gradients hide behind its backward but for the last bucket; exposed %g s of %g", st.DPExposed, st.StepTime)
	}
}

// Invariants: more ZeRO never needs more memory; full recompute keeps less activation memory
// and costs compute.
func TestMemoryAndTimeMoveTheRightWay(t *testing.T) {
	m, k := llama70b(t)
	tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 8)
	base := Layout{TP: 8, PP: 2, VP: 1, CP: 1, DP: 4, EP: 1, MBS: 1, GBS: 64, Seq: 4096, Recompute: "none"}
	prev := math.Inf(1)
	for z := 0; z <= 3; z++ {
		l := base
		l.ZeRO, l.DistOptimizer = z, z >= 1
		if mem := TrainingMemory(m, l).Total; mem > prev {
			t.Errorf("ZeRO-%d needs more memory than ZeRO-%d", z, z-1)
		} else {
			prev = mem
		}
	}
	full := base
	full.Recompute = "full"
	if TrainingMemory(m, full).Activations >= TrainingMemory(m, base).Activations {
		t.Error("full recompute must keep fewer activations")
	}
	a, err := tr.Train(base)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.Train(full)
	if err != nil {
		t.Fatal(err)
	}
	if b.Microbatch <= a.Microbatch || b.HFU <= b.MFU {
		t.Errorf("full recompute must cost compute: %g vs %g s, HFU %g vs MFU %g", b.Microbatch, a.Microbatch, b.HFU, b.MFU)
	}
}

// The planner's scale: a 405B model on 16,384 GPUs (every layout). Goal: one layout ≤ 50 µs,
// the whole search ≤ 1 s on 2 cores.
// go test ./layout -run '^$' -bench Plan -benchmem
func BenchmarkPlanTrain405BOn16384(b *testing.B) {
	m := zooModel(b, "Llama-3.1-405B")
	_, k := llama70b(b)
	b.ResetTimer()
	var evaluated, feasible int
	for i := 0; i < b.N; i++ {
		tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 8)
		plan, err := tr.PlanTrain(PlanOptions{GPUs: 16384, GBS: 2048, Seq: 8192, MemoryBytes: 80 * (1 << 30), Domain: 8, Top: 10})
		if err != nil {
			b.Fatal(err)
		}
		evaluated, feasible = plan.Evaluated, plan.Feasible
	}
	b.ReportMetric(float64(evaluated), "layouts")
	b.ReportMetric(float64(feasible), "feasible")
	b.ReportMetric(float64(evaluated)*float64(b.N)/b.Elapsed().Seconds(), "layouts/s")
}

// The planner with the fine-tuning and offload options: a LoRA (r=16) of Llama-3.1-405B with
// the optimizer offloaded, on 16,384 GPUs. Goal: ≤ 1 s.
// go test ./layout -run '^$' -bench PlanTrainFineTune -benchmem
func BenchmarkPlanTrainFineTuneOn16384(b *testing.B) {
	base := zooModel(b, "Llama-3.1-405B")
	m, err := base.WithFineTune(analyzer.FineTune{LoRARank: 16, Freeze: []string{"model.embed_tokens"}})
	if err != nil {
		b.Fatal(err)
	}
	_, k := llama70b(b)
	b.ResetTimer()
	var evaluated, feasible int
	for i := 0; i < b.N; i++ {
		tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 8)
		plan, err := tr.PlanTrain(PlanOptions{GPUs: 16384, GBS: 2048, Seq: 8192, MemoryBytes: 80 * (1 << 30), Domain: 8, Top: 10,
			Knobs: Knobs{OffloadOptimizer: true, Optimizer: "adam8bit"}})
		if err != nil {
			b.Fatal(err)
		}
		evaluated, feasible = plan.Evaluated, plan.Feasible
	}
	b.ReportMetric(float64(evaluated), "layouts")
	b.ReportMetric(float64(feasible), "feasible")
}

// lanes is a chip's training lanes as time models.
func lanes(b testing.TB, chip chips.Chip, dtype string) map[string]kernels.Predictor {
	ls, err := timing.Lanes(chip, dtype)
	if err != nil {
		b.Fatal(err)
	}
	return ls
}

// benchPlan times PlanTrain of a bundled model on H100 with the chip's lanes, reporting the
// layouts evaluated and feasible.
func benchPlan(b *testing.B, model string, o PlanOptions) {
	m := zooModel(b, model)
	chip, _ := chips.Default().Lookup("H100")
	_, k := llama70b(b)
	ls := lanes(b, chip, "bf16")
	b.ResetTimer()
	var evaluated, feasible int
	for i := 0; i < b.N; i++ {
		tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 8)
		tr.Lanes = ls
		plan, err := tr.PlanTrain(o)
		if err != nil {
			b.Fatal(err)
		}
		evaluated, feasible = plan.Evaluated, plan.Feasible
	}
	b.ReportMetric(float64(evaluated), "layouts")
	b.ReportMetric(float64(feasible), "feasible")
}

// Both lanes searched: Llama-3.1-405B on 16,384 H100 with megatron's and fsdp's mechanisms and
// time models. Goal (issue 20): ≤ 1 s.
// go test ./layout -run '^$' -bench PlanTrainBothLanes -benchmem
func BenchmarkPlanTrainBothLanes405BOn16384(b *testing.B) {
	benchPlan(b, "Llama-3.1-405B", PlanOptions{GPUs: 16384, GBS: 2048, Seq: 8192, MemoryBytes: 80 * (1 << 30), Domain: 8, Top: 10,
		Frameworks: []string{Megatron, FSDP}})
}

// DeepSeek-V3 on 2,048 H100 searching EP, the all-to-all overlap (none, 1f1b, dualpipe) and
// the dispatcher (alltoall, deepep). Goal (issue 20): ≤ 1 s.
// go test ./layout -run '^$' -bench PlanTrainDeepSeek -benchmem
func BenchmarkPlanTrainDeepSeekV3On2048(b *testing.B) {
	benchPlan(b, "DeepSeek-V3", PlanOptions{GPUs: 2048, GBS: 4096, Seq: 4096, MemoryBytes: 80 * (1 << 30), Domain: 8, Top: 10,
		MoEOverlaps: []string{OverlapNone, Overlap1F1B, OverlapDualPipe}, Dispatchers: []string{DispatchAllToAll, DispatchDeepEP}})
}

// Where a Megatron layout without pipelining fits only with some layers' activations in host
// memory, the planner offers it so (NVIDIA's Llama-3.1-70B FP8 recipe on 64 GB200 runs TP1 PP1
// Megatron-FSDP, MBS 2, with 40 layers offloaded): the offloaded layout is considered, fits,
// offloads no more eighths of the layers than it needs, and respects Megatron's rules (no
// pipelining, no recompute); with the user's own offload setting nothing is added.
func TestPlanTrainOffersActivationOffload(t *testing.T) {
	m, k := llama70b(t)
	tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 72)
	o := PlanOptions{GPUs: 64, GBS: 256, Seq: 8192, MemoryBytes: 186 * (1 << 30), Domain: 72, Top: 3, ZeRO: []int{3}}
	plan, err := tr.PlanTrain(o)
	if err != nil {
		t.Fatal(err)
	}
	var off []Candidate
	for _, c := range plan.Considered {
		if c.Step.Layout.OffloadActivations > 0 {
			off = append(off, c)
		}
	}
	if len(off) == 0 {
		t.Fatal("no layout with activations offloaded was considered")
	}
	for _, c := range off {
		l := c.Step.Layout
		if !c.Fit.Fits || l.PP != 1 || (l.Recompute != "" && l.Recompute != "none") || c.Memory.Host <= 0 {
			t.Errorf("%s: fits %v, pp %d, recompute %q, host %.1f GiB", l, c.Fit.Fits, l.PP, l.Recompute, c.Memory.Host/(1<<30))
		}
		less := l
		less.OffloadActivations = min((m.Fingerprint.Layers*(l.OffloadActivations*8/m.Fingerprint.Layers-1)+7)/8, l.OffloadActivations-1)
		if less.OffloadActivations > 0 && CheckTraining("training", TrainingMemory(m, less), o.MemoryBytes).Fits {
			t.Errorf("%s offloads more layers than it needs (%d fit too)", l, less.OffloadActivations)
		}
	}
	o.Knobs.OffloadActivations = 10
	fixed, err := tr.PlanTrain(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range fixed.Considered {
		if n := c.Step.Layout.OffloadActivations; n != 10 && n != 0 {
			t.Fatalf("the user's --offload-activations 10 became %d", n)
		}
	}
}

// The settings that save memory are the ones the framework accepts: Megatron's activation
// offload only without pipelining or recompute and on fewer layers than the model, the
// pipeline split only where it is not set; every saver validates against the model. The
// fastest that fits is a fitting layout, no slower than any other saver that fits.
func TestMemorySaversAreWhatTheFrameworkAccepts(t *testing.T) {
	m, k := llama70b(t)
	L := m.Fingerprint.Layers
	for _, l := range []Layout{
		{TP: 1, PP: 1, VP: 1, CP: 1, DP: 64, EP: 1, MBS: 2, GBS: 256, Seq: 8192, ZeRO: 3},
		{TP: 4, PP: 4, VP: 1, CP: 1, DP: 4, EP: 1, MBS: 1, GBS: 256, Seq: 8192, DistOptimizer: true},
		{TP: 8, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 1, GBS: 64, Seq: 8192, ZeRO: 3, Framework: FSDP},
	} {
		svs := MemorySavers(l, m.Fingerprint)
		if len(svs) == 0 {
			t.Fatalf("%s: no savers", l)
		}
		for _, sv := range svs {
			v := sv.Layout
			if err := v.Validate(m.Fingerprint); err != nil {
				t.Errorf("%s with %s: %v", l, sv.Name, err)
			}
			if v.OffloadActivations > 0 && (v.PP > 1 || v.Recompute != "" && v.Recompute != "none" || v.OffloadActivations >= L || v.framework() != Megatron) {
				t.Errorf("%s: offload %d with pp %d, recompute %q, framework %s", sv.Name, v.OffloadActivations, v.PP, v.Recompute, v.framework())
			}
			if sv.Flags == "" {
				t.Errorf("%s: no flags named", sv.Name)
			}
		}
	}
	tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 72)
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 64, EP: 1, MBS: 2, GBS: 256, Seq: 8192, ZeRO: 3}
	cap := 186.0 * (1 << 30)
	if CheckTraining("training", TrainingMemory(m, l), cap).Fits {
		t.Fatal("the stated layout should not fit 186 GiB")
	}
	sv, st, ok, err := tr.FastestFitting(l, cap)
	if err != nil || !ok {
		t.Fatalf("no saver fits: %v", err)
	}
	if !CheckTraining("training", TrainingMemory(m, sv.Layout), cap).Fits {
		t.Errorf("%s does not fit", sv.Name)
	}
	for _, o := range MemorySavers(l, m.Fingerprint) {
		if o.Layout.Validate(m.Fingerprint) != nil || !CheckTraining("training", TrainingMemory(m, o.Layout), cap).Fits {
			continue
		}
		if ot, err := tr.Train(o.Layout); err == nil && ot.StepTime < st.StepTime {
			t.Errorf("%s (%.3f s) is faster than the chosen %s (%.3f s)", o.Name, ot.StepTime, sv.Name, st.StepTime)
		}
	}
}

// A plan's "why ahead of the next" says what ranked a layout first and only that: a shorter
// term, the next one's tight memory, less memory by how much, or a tie (Llama-3.1-8B on 8 H100
// at 8k tokens: CP1 MBS 1 and CP2 MBS 2 run the same work per GPU in the same memory, which the
// column once called "less memory").
func TestWhyAheadSaysWhatRankedIt(t *testing.T) {
	tr := megatronTrainer(t, "Llama-3.1-8B", "H100-SXM", "bf16")
	plan, err := tr.PlanTrain(PlanOptions{GPUs: 8, GBS: 64, Seq: 8192, MemoryBytes: 80 << 30, Domain: 8, Top: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(plan.Top); i++ {
		a, b := plan.Top[i], plan.Top[i+1]
		same := a.Step.StepTime == b.Step.StepTime
		switch w := a.Why; {
		case same && a.Memory.Total == b.Memory.Total && w != "ties the next: the same step time and memory":
			t.Errorf("#%d ties #%d (%.3f s, %.1f GiB) but says %q", i+1, i+2, a.Step.StepTime, a.Memory.Total/(1<<30), w)
		case strings.Contains(w, "less memory") && !(a.Memory.Total < b.Memory.Total):
			t.Errorf("#%d says %q with %.2f GiB against %.2f", i+1, w, a.Memory.Total/(1<<30), b.Memory.Total/(1<<30))
		}
	}
	var c Candidate
	c.Step.Layout = Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 1, EP: 1, MBS: 1, GBS: 1, Seq: 8}
	c.Memory.Total = 1 << 30
	d := c
	d.Memory.Total = 3 << 30
	if w := why(c, d); w != "same step time, 2.0 GiB less memory" {
		t.Errorf("why: %q", w)
	}
	d.Fit.Status = Tight
	if w := why(c, d); !strings.HasPrefix(w, "the next is tight") {
		t.Errorf("why, next tight: %q", w)
	}
}

// Long MoE micro-batches are searched where they fit: NVIDIA's and AMD's Qwen3-30B-A3B recipes
// run MBS 8 at 4,096 tokens on 8 GPUs (Megatron-Bridge's GB300 and B300 presets, Primus's
// MI355X config), and on 288 GiB the plan considers MBS 4 and 8 and ranks a fitting one first,
// where a fixed rule once kept MoE micro-batches to 2 at that length.
func TestPlanTrainSearchesLongMoEMicroBatches(t *testing.T) {
	tr := megatronTrainer(t, "Qwen3-30B-A3B", "MI355X", "fp8")
	plan, err := tr.PlanTrain(PlanOptions{GPUs: 8, GBS: 512, Seq: 4096, MemoryBytes: 288 * (1 << 30), Domain: 8, Top: 3,
		Knobs: Knobs{Framework: Megatron, Precision: "fp8-cs"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, c := range plan.Considered {
		if c.Fit.Fits {
			seen[c.Step.Layout.MBS] = true
		}
	}
	if !seen[4] || !seen[8] {
		t.Errorf("fitting micro-batches considered: %v, want 4 and 8 among them", seen)
	}
	if len(plan.Top) == 0 || plan.Top[0].Step.Layout.MBS < 4 {
		t.Errorf("the plan's first layout runs MBS %d, want a long micro-batch (the host's launches amortized)", plan.Top[0].Step.Layout.MBS)
	}
}

// On AMD Instinct the plan can weigh Primus-Turbo's MoE path against Megatron's eager one: with
// TurboMoE each expert-parallel layout is tried again on Turbo's one-launch grouped GEMM,
// sync-free MoE and DeepEP, and on 8 MI355X that path ranks first (the eager one is host-bound
// at 128 µs a kernel), while every eager layout is still considered.
func TestPlanTrainTriesPrimusTurbo(t *testing.T) {
	tr := megatronTrainer(t, "Qwen3-30B-A3B", "MI355X", "fp8")
	o := PlanOptions{GPUs: 8, GBS: 512, Seq: 4096, MemoryBytes: 288 * (1 << 30), Domain: 8, Top: 3,
		Knobs: Knobs{Framework: Megatron, Precision: "fp8-cs"}}
	eager, err := tr.PlanTrain(o)
	if err != nil {
		t.Fatal(err)
	}
	o.TurboMoE = true
	both, err := tr.PlanTrain(o)
	if err != nil {
		t.Fatal(err)
	}
	turbo := 0
	for _, c := range both.Considered {
		l := c.Step.Layout
		if l.GroupedGEMM == GroupedTurbo {
			turbo++
			if l.SyncFreeMoE != 2 || l.Dispatcher != DispatchDeepEP || l.EP < 2 {
				t.Errorf("%s: a Turbo layout off Primus's path", l)
			}
		}
	}
	if turbo == 0 || len(both.Considered) != len(eager.Considered)+turbo {
		t.Errorf("%d layouts with Turbo beside %d, want every eager one kept and Turbo ones added (%d in all)", turbo, len(eager.Considered), len(both.Considered))
	}
	top, was := both.Top[0].Step, eager.Top[0].Step
	if top.Layout.GroupedGEMM != GroupedTurbo || !(top.StepTime < was.StepTime) {
		t.Errorf("first layout %s at %.2f s, the eager plan's %s at %.2f s: want Turbo's path first and faster", top.Layout, top.StepTime, was.Layout, was.StepTime)
	}
}
