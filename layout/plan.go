package layout

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/mrep-dev/mrep/analyzer"
)

// PlanOptions describe a training job to lay out.
type PlanOptions struct {
	GPUs, GBS, Seq int64
	MemoryBytes    float64 // per GPU
	Domain         int64   // GPUs per scale-up domain: TP stays inside it
	Top            int
	// ZeRO are the sharding stages to try (nil: 1, 2 and 3); a framework without some (NeMo's
	// Megatron has the distributed optimizer, stage 1, only) names its own.
	ZeRO []int
	// Knobs are what every candidate runs with: framework, optimizer, precision recipe,
	// offload, compile.
	Knobs Knobs
	// Frameworks are the lanes searched (nil: the knobs' framework alone): each layout is tried
	// with each framework's mechanisms and time model (megatron, fsdp).
	Frameworks []string
	// MoEOverlaps are the expert all-to-all schedules tried for MoE models (nil: the knobs'
	// alone; none, 1f1b, dualpipe), and Dispatchers the token dispatchers (alltoall, deepep).
	MoEOverlaps, Dispatchers []string
	// TurboMoE also tries each MoE layout on Primus-Turbo's path (AMD Instinct under Primus):
	// its one-launch grouped GEMM, sync-free MoE stage 2 and its DeepEP.
	TurboMoE bool
	// AllowTight ranks layouts over the capacity but within the memory model's uncertainty as
	// tight ones under it; by default they rank after every layout under the capacity.
	AllowTight bool
	// FineTune names the fine-tune the plan trains ("LoRA r=16", "QLoRA r=64 (nf4 base)"; ""
	// for full training), for the plan's pages.
	FineTune string
}

// Knobs are a training job's settings that change memory (and some the time) but not the
// layout's shape.
type Knobs struct {
	Framework, Optimizer, Precision string
	OffloadOptimizer, OffloadParams bool
	OffloadActivations              int64
	Compile                         bool
	// MoE and pipeline mechanisms (moe.go, pipeline.go).
	Dispatcher, A2AOverlap    string
	MTP                       int64
	PipelineAccount           bool
	FP8ParamGather, BF16Grads bool
	FP8OutputProj             bool
	FP8Attention              bool
	FusedGroupedMLP           bool
	ActFP8InputStore          bool
	Replicas                  int64
	TPOverlap, NoReshard      bool
	CUDAGraph                 bool
	// Primus-Turbo's MoE mechanisms (Layout.GroupedGEMM, Layout.SyncFreeMoE).
	GroupedGEMM, Routing string
	SyncFreeMoE          int64
	FP8Dispatch          bool
	NoSwiGLUFusion       bool
	// Fine-tuning stacks' mechanisms (stacks.go).
	ParamDType, Loss, Stack               string
	OffloadCheckpoints, UpcastUnquantized bool
}

// Apply sets the knobs on a layout.
func (k Knobs) Apply(l Layout) Layout {
	l.Framework, l.Optimizer, l.Precision = k.Framework, k.Optimizer, k.Precision
	l.OffloadOptimizer, l.OffloadParams, l.OffloadActivations, l.Compile = k.OffloadOptimizer, k.OffloadParams, k.OffloadActivations, k.Compile
	l.Dispatcher, l.A2AOverlap, l.MTP = k.Dispatcher, k.A2AOverlap, k.MTP
	l.EmbeddingInPipe, l.LossInPipe = k.PipelineAccount, k.PipelineAccount
	l.FP8ParamGather, l.BF16Grads, l.Replicas, l.TPOverlap = k.FP8ParamGather, k.BF16Grads, k.Replicas, k.TPOverlap
	l.NoReshard, l.CUDAGraph, l.FP8OutputProj, l.FusedGroupedMLP = k.NoReshard, k.CUDAGraph, k.FP8OutputProj, k.FusedGroupedMLP
	l.ActFP8InputStore, l.FP8Attention = k.ActFP8InputStore, k.FP8Attention
	l.GroupedGEMM, l.SyncFreeMoE, l.Routing, l.FP8Dispatch, l.NoSwiGLUFusion = k.GroupedGEMM, k.SyncFreeMoE, k.Routing, k.FP8Dispatch, k.NoSwiGLUFusion
	l.ParamDType, l.Loss, l.Stack, l.OffloadCheckpoints, l.UpcastUnquantized = k.ParamDType, k.Loss, k.Stack, k.OffloadCheckpoints, k.UpcastUnquantized
	return l
}

// NearEqual is how much slower a comfortable layout may be and still rank before a tight one:
// within it the planner prefers the layout that surely fits.
const NearEqual = 0.05

// Candidate is one feasible layout, timed.
type Candidate struct {
	Step   Step   `json:"step"`
	Memory Memory `json:"memory"`
	Fit    Fit    `json:"fit"`           // fits or tight, with the headroom
	Why    string `json:"why,omitempty"` // what makes it faster than the next one
	// Analyze is the `mrep analyze` command that times this layout alone (set by the command
	// that planned it, which knows the model's name and its own flags).
	Analyze string `json:"analyze,omitempty"`
}

// Plan is a layout search's outcome.
type Plan struct {
	Options   PlanOptions `json:"options"`
	Evaluated int         `json:"evaluated"`
	Feasible  int         `json:"feasible"`
	Top       []Candidate `json:"top"`
	NoFit     string      `json:"no_fit,omitempty"` // when nothing fits: what is short
	// Traded says what ranking a comfortable layout before a faster tight one gave up.
	Traded string `json:"traded,omitempty"`
	// OverOnly says that every feasible layout is over the capacity (within the uncertainty),
	// and names the nearest change that brings one under it.
	OverOnly   string      `json:"over_capacity_only,omitempty"`
	Considered []Candidate `json:"-"`
	// Pareto is the front of Considered: no layout is both faster and smaller.
	Pareto []Candidate `json:"-"`
}

type zeroRC struct {
	zero int
	rc   string
}

// zeroRecompute are the memory-saving knobs a planner tries: the ZeRO stages with each
// recompute mode.
func zeroRecompute(stages []int, framework, stack string) []zeroRC {
	modes := []string{"none", "selective", "full"}
	if len(stages) == 0 {
		stages = []int{1, 2, 3}
	}
	if framework == FSDP { // FSDP shards everything; torchtitan's checkpointing modes
		if len(stages) == 3 {
			stages = []int{3}
		}
		modes = []string{"none", "op", "full"}
	}
	if st, ok := Stacks[stack]; ok && st.Framework != Megatron {
		modes = []string{"none", "full"} // a fine-tuning stack checkpoints whole layers or nothing
	}
	var out []zeroRC
	for _, z := range stages {
		for _, rc := range modes {
			out = append(out, zeroRC{z, rc})
		}
	}
	return out
}

// etps are the expert-TP choices: as the attention (0) and, for MoE with TP, unsplit experts.
func etps(tp int64, moe bool) []int64 {
	if moe && tp > 1 {
		return []int64{0, 1}
	}
	return []int64{0}
}

func divisors(n int64, limit int64) []int64 {
	var out []int64
	for d := int64(1); d <= n && d <= limit; d++ {
		if n%d == 0 {
			out = append(out, d)
		}
	}
	return out
}

// PlanTrain enumerates the layouts of GPUs over TP (within the scale-up domain, dividing the
// heads), PP (dividing the layers) with VP virtual stages, CP, MBS and recompute, with DP
// taking the rest and the distributed optimizer on; drops those that do not fit; and ranks
// the rest by step time (ties: less memory).
func (tr *Trainer) PlanTrain(o PlanOptions) (Plan, error) {
	fp := tr.m.Fingerprint
	plan := Plan{Options: o}
	if o.GPUs < 1 || o.GBS < 1 || o.Seq < 1 {
		return plan, fmt.Errorf("plan: gpus, gbs and seq must be >= 1 (got %d, %d, %d)", o.GPUs, o.GBS, o.Seq)
	}
	if o.GPUs > analyzer.MaxDegree || o.GBS > analyzer.MaxTokens || o.Seq > analyzer.MaxTokens || o.GBS*o.Seq > analyzer.MaxTokens {
		return plan, fmt.Errorf("plan: at most %d GPUs and %d tokens per step (got %d GPUs, %d x %d tokens)", analyzer.MaxDegree, analyzer.MaxTokens, o.GPUs, o.GBS, o.Seq)
	}
	if fp.Layers < 1 || fp.Heads < 1 {
		return plan, fmt.Errorf("plan: the model has no transformer layers to lay out")
	}
	for _, z := range o.ZeRO {
		if z < 0 || z > 3 {
			return plan, fmt.Errorf("plan: zero stage %d: want 0, 1, 2 or 3", z)
		}
	}
	if err := o.Knobs.Apply(Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 1, EP: 1, MBS: 1, GBS: 1, Seq: 1, ZeRO: 3}).validateMemoryOptions(); err != nil {
		return plan, fmt.Errorf("plan: %w", err)
	}
	if err := validMoEOptions(append([]string{o.Knobs.Dispatcher}, o.Dispatchers...), append([]string{o.Knobs.A2AOverlap}, o.MoEOverlaps...)); err != nil {
		return plan, fmt.Errorf("plan: %w", err)
	}
	for _, fw := range o.Frameworks {
		if !slices.Contains(Frameworks, fw) {
			return plan, fmt.Errorf("plan: framework %q: want megatron, fsdp or deepspeed", fw)
		}
	}
	frameworks := o.Frameworks
	if len(frameworks) == 0 {
		frameworks = []string{o.Knobs.Framework}
	}
	overlaps, dispatchers := o.MoEOverlaps, o.Dispatchers
	if fp.MoE == nil || len(overlaps) == 0 {
		overlaps = []string{o.Knobs.A2AOverlap}
	}
	if len(overlaps) > 1 && slices.Contains(overlaps, Overlap1F1B) {
		// 1f1b overlap holds the same memory as none and never exposes more: none is dominated
		overlaps = slices.DeleteFunc(slices.Clone(overlaps), func(s string) bool { return s == OverlapNone || s == "" })
	}
	if fp.MoE == nil || len(dispatchers) == 0 {
		dispatchers = []string{o.Knobs.Dispatcher}
	}
	var all []Candidate
	var smallest *Candidate
	var considerOne func(Layout) error
	knobs := o.Knobs
	consider := func(base Layout) error {
		for _, ov := range overlaps {
			for _, d := range dispatchers {
				l := knobs.Apply(base)
				l.A2AOverlap, l.Dispatcher = ov, d
				if d == DispatchDeepEP && l.EP*l.etp() <= o.Domain && len(dispatchers) > 1 {
					continue // inside one NVLink domain DeepEP's node deduplication changes nothing
				}
				if err := considerOne(l); err != nil {
					return err
				}
				if o.TurboMoE && fp.MoE != nil && l.EP > 1 && d == dispatchers[0] && l.framework() == Megatron {
					t := l
					t.GroupedGEMM, t.SyncFreeMoE, t.Dispatcher = GroupedTurbo, 2, DispatchDeepEP
					if err := considerOne(t); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	considerOne = func(l Layout) error {
		if l.Validate(fp) != nil {
			return nil
		}
		if l.framework() == Megatron {
			// only splits Megatron's validate_args accepts, made explicit where uneven
			var ok bool
			if l, ok = l.MegatronSplit(fp.Layers); !ok {
				return nil
			}
		}
		if st, ok := Stacks[l.Stack]; ok && st.DataParallelOnly && l.TP*l.PP*l.CP > 1 {
			return nil // the stack has no such layout
		}
		plan.Evaluated++
		mem := TrainingMemory(tr.m, l)
		c := Candidate{Memory: mem, Step: Step{Layout: l}, Fit: CheckTraining("training", mem, o.MemoryBytes)}
		if smallest == nil || mem.Total < smallest.Memory.Total {
			cc := c
			smallest = &cc
		}
		if !c.Fit.Fits {
			// Megatron offloads some layers' activations to host memory where a layout does not
			// fit otherwise (NVIDIA's Llama-3.1-70B recipes on GB200 and GB300 run TP1 so, 20-40
			// layers); offered where Megatron allows it (no pipelining, no recompute) and the
			// user did not fix it, the fewest eighths of the layers that fit
			steps := offloadSteps(l, fp.Layers)
			if knobs.OffloadActivations != 0 || len(steps) == 0 {
				return nil
			}
			most := steps[len(steps)-1]
			if most.Validate(fp) != nil || !CheckTraining("training", TrainingMemory(tr.m, most), o.MemoryBytes).Fits {
				return nil // not even offloading all but one layer fits
			}
			for _, v := range steps {
				if v.Validate(fp) != nil {
					continue
				}
				vm := TrainingMemory(tr.m, v)
				if f := CheckTraining("training", vm, o.MemoryBytes); f.Fits {
					l, c = v, Candidate{Memory: vm, Step: Step{Layout: v}, Fit: f}
					break
				}
			}
			if !c.Fit.Fits {
				return nil
			}
		}
		st, err := tr.Train(l)
		if err != nil {
			return err
		}
		c.Step = st
		all = append(all, c)
		return nil
	}
	pps := divisors(fp.Layers, 64)
	for _, p := range []int64{2, 4, 8, 16, 32, 64} { // uneven stages too (Megatron's: MegatronSplit)
		if p <= fp.Layers && fp.Layers%p != 0 {
			pps = append(pps, p)
		}
	}
	graph := knobs.CUDAGraph
	for _, fw := range frameworks {
		knobs.Framework = fw
		// the full-iteration CUDA graph is Megatron's: the other lanes run their steps eagerly
		knobs.CUDAGraph = graph && fw == Megatron
		zrc := zeroRecompute(o.ZeRO, fw, knobs.Stack)
		if fp.MoE != nil && fw != FSDP && len(o.ZeRO) == 0 {
			// MoE in Megatron runs the distributed optimizer (ZeRO-1); sharding the experts'
			// weights per micro-batch is not its schedule
			zrc = zeroRecompute([]int{1}, fw, knobs.Stack)
		}
		for _, tp := range divisors(fp.Heads, min(o.Domain, 8)) {
			for _, pp := range pps {
				for _, cp := range []int64{1, 2, 4, 8, 16} {
					if o.GPUs%(tp*pp*cp) != 0 || o.Seq%(2*cp) != 0 && cp > 1 {
						continue
					}
					if fp.MoE != nil && cp > 1 && o.Seq/cp < 4096 {
						continue // MoE: context parallel only for long sequences (>= 4k tokens per rank)
					}
					dp := o.GPUs / (tp * pp * cp)
					eps := []int64{1}
					if fp.MoE != nil { // experts spread over the data- and context-parallel ranks
						eps = nil
						for _, e := range divisors(fp.MoE.RoutedExperts, dp*cp) {
							eps = append(eps, e)
						}
					}
					vps := []int64{1}
					if pp > 1 {
						vps = nil
						for _, v := range []int64{1, 2, 3, 4, 5, 6, 8} {
							if pp*v <= fp.Layers {
								vps = append(vps, v)
							}
						}
					}
					for _, vp := range vps {
						for _, mbs := range []int64{1, 2, 4, 8} {
							if o.GBS%(mbs*dp) != 0 {
								continue
							}
							for _, zl := range zrc {
								if dp*cp == 1 && zl.zero > 1 && len(zrc) > 3 {
									continue // nothing to shard over: every stage is the same layout
								}
								for _, ep := range eps {
									for _, etp := range etps(tp, fp.MoE != nil) {
										if err := consider(Layout{TP: tp, PP: pp, VP: vp, CP: cp, DP: dp, EP: ep, ETP: etp, MBS: mbs, GBS: o.GBS, Seq: o.Seq, DistOptimizer: zl.zero >= 1, ZeRO: zl.zero, Recompute: zl.rc}); err != nil {
											return plan, err
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	plan.Feasible = len(all)
	if len(all) == 0 {
		if smallest == nil {
			return plan, fmt.Errorf("plan: no layout of %d GPUs divides this model (heads %d, layers %d) with gbs %d", o.GPUs, fp.Heads, fp.Layers, o.GBS)
		}
		m, sl := smallest.Memory, smallest.Step.Layout
		var terms string
		for i, t := range m.Terms() {
			if i > 0 {
				terms += ", "
			}
			terms += fmt.Sprintf("%s %.1f", t.Name, t.Bytes/(1<<30))
		}
		plan.NoFit = fmt.Sprintf("nothing fits in %.1f GiB: the smallest layout (TP%d PP%d CP%d DP%d ZeRO-%d, MBS %d, recompute %s) needs %.1f GiB per GPU (%s GiB), %.1f GiB too much",
			o.MemoryBytes/(1<<30), sl.TP, sl.PP, sl.CP, sl.DP, sl.Stage(), sl.MBS, sl.Recompute, m.Total/(1<<30), terms, (m.Total-o.MemoryBytes)/(1<<30))
		// every ZeRO stage, recompute and micro-batch was tried: the nearest change is more GPUs
		if alt := tr.nearestUnder(o); alt != "" {
			plan.NoFit += "; the nearest change that fits: " + alt
		}
		return plan, nil
	}
	// Rank by step time, a tight layout as if NearEqual slower: a comfortable layout of
	// near-equal speed goes first (ties: less memory).
	key := func(c Candidate) float64 {
		switch {
		case c.Fit.Over && !o.AllowTight:
			return c.Step.StepTime + 1e12 // after every layout under the capacity
		case c.Fit.Status == Tight:
			return c.Step.StepTime * (1 + NearEqual)
		}
		return c.Step.StepTime
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if ka, kb := key(a), key(b); ka != kb {
			return ka < kb
		}
		return a.Memory.Total < b.Memory.Total
	})
	for _, c := range all {
		if c.Step.StepTime < all[0].Step.StepTime && c.Fit.Status == Tight {
			over := ""
			if c.Fit.Over {
				over = ", over the capacity: --allow-tight ranks such layouts by speed"
			}
			plan.Traded = fmt.Sprintf("ranked first over a %.1f%% faster tight layout (%s at %.1f of %.1f GiB, within the memory model's ±%.0f%%%s)",
				100*(all[0].Step.StepTime/c.Step.StepTime-1), describe(c.Step.Layout), c.Memory.Total/(1<<30), o.MemoryBytes/(1<<30), 100*MemoryUncertainty, over)
			break
		}
	}
	if all[0].Fit.Over && !o.AllowTight {
		plan.OverOnly = fmt.Sprintf("every layout that may fit is over the %.1f GiB capacity, within the memory model's ±%.0f%%: the first needs %.1f GiB",
			o.MemoryBytes/(1<<30), 100*MemoryUncertainty, all[0].Memory.Total/(1<<30))
		if alt := tr.nearestUnder(o); alt != "" {
			plan.OverOnly += "; the nearest change under the capacity: " + alt
		}
	}
	top := max(o.Top, 1)
	if len(all) < top {
		top = len(all)
	}
	plan.Top = append([]Candidate(nil), all[:top]...)
	for i := 0; i+1 < len(plan.Top); i++ {
		plan.Top[i].Why = why(plan.Top[i], plan.Top[i+1])
	}
	plan.Considered = all
	plan.Pareto = Pareto(all)
	return plan, nil
}

// why names the time term that differs most between a layout and the next one down, or, where
// no term is shorter, what ranked it first: the next is tight, or takes more memory, or ties it
// (layouts that run the same work per GPU, as context parallel with a micro-batch as many times
// larger does, often do).
func why(ca, cb Candidate) string {
	a, b := ca.Step, cb.Step
	terms := []struct {
		name string
		d    float64
	}{
		{"micro-batches", (float64(b.Layout.GA())*b.Microbatch - float64(a.Layout.GA())*a.Microbatch)},
		{"pipeline bubble", b.Bubble - a.Bubble},
		{"exposed data-parallel traffic", b.DPExposed - a.DPExposed},
		{"optimizer step", b.Optimizer - a.Optimizer},
	}
	best := terms[0]
	for _, t := range terms[1:] {
		if t.d > best.d {
			best = t
		}
	}
	if best.d <= 0 {
		switch {
		case cb.Fit.Status == Tight && ca.Fit.Status != Tight:
			return fmt.Sprintf("the next is tight (within the memory model's ±%.0f%%)", 100*MemoryUncertainty)
		case ca.Memory.Total < cb.Memory.Total:
			return fmt.Sprintf("same step time, %.1f GiB less memory", (cb.Memory.Total-ca.Memory.Total)/(1<<30))
		}
		return "ties the next: the same step time and memory"
	}
	return fmt.Sprintf("%.0f ms less %s than the next", best.d*1e3, best.name)
}

func describe(l Layout) string {
	return fmt.Sprintf("%s MBS %d recompute %s", l, l.MBS, l.Recompute)
}

// Pareto is the layouts no other beats on both step time and memory per GPU, by memory.
func Pareto(cs []Candidate) []Candidate {
	sorted := append([]Candidate(nil), cs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Memory.Total != sorted[j].Memory.Total {
			return sorted[i].Memory.Total < sorted[j].Memory.Total
		}
		return sorted[i].Step.StepTime < sorted[j].Step.StepTime
	})
	var front []Candidate
	best := math.Inf(1)
	for _, c := range sorted {
		if c.Step.StepTime < best {
			front = append(front, c)
			best = c.Step.StepTime
		}
	}
	return front
}

// nearestUnder is the nearest change that brings a layout under the capacity: twice, four
// times ... as many GPUs, as "N GPUs (kx), e.g. LAYOUT at M GiB and T s per step".
func (tr *Trainer) nearestUnder(o PlanOptions) string {
	for k := int64(2); k <= 16 && o.GPUs*k <= analyzer.MaxDegree; k *= 2 {
		more := o
		more.GPUs, more.Top = o.GPUs*k, 1
		if next, err := tr.PlanTrain(more); err == nil && next.Feasible > 0 && !next.Top[0].Fit.Over {
			b := next.Top[0]
			return fmt.Sprintf("%d GPUs (%dx), e.g. %s at %.1f GiB and %.2f s per step", more.GPUs, k, describe(b.Step.Layout), b.Memory.Total/(1<<30), b.Step.StepTime)
		}
	}
	return ""
}
