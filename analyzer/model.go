package analyzer

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/internal/units"
	"github.com/mrep-dev/mrep/kernels"
	"github.com/mrep-dev/mrep/model"
)

// Version identifies the analytical model; results cached under another version are stale.
const Version = "mrep-analyzer/2"

// Model is a dump read once for costing: fingerprint, ops and parameter categories.
type Model struct {
	Name        string             `json:"name"`
	Fingerprint Fingerprint        `json:"fingerprint"`
	Ops         []Op               `json:"-"`
	Params      map[Category]int64 `json:"params_by_category"`
	TotalParams int64              `json:"total_params"`
	Active      float64            `json:"active_params_per_token"`
	// FineTune is the fine-tune WithFineTune applied (nil: the dump as it is).
	FineTune  *FineTune `json:"fine_tune,omitempty"`
	layers    float64
	moeLayers float64
	// class numbers ops that cost alike (the same op in every decoder layer): each class is
	// costed once and becomes one kernel with a launch count, so timing sees tens of kernels.
	class   []int
	classes []opClass
}

// opKey is what makes two ops cost the same: everything costOp reads but their module, layer
// and display name (200,000 differently named Linear modules of one shape are one class).
type opKey struct {
	Kind, Category                                string
	Numel, In, Out, Experts, Rows, Width          int64
	ElemsPerToken, FlopsPerToken, WeightElems, Wd int64
	Tied, PerAssignment, Residual, Frozen         bool
	QuantBytes                                    float64
	QuantNative                                   bool
}

// opClass is a set of ops that cost alike: one representative and how many there are.
type opClass struct {
	rep   int
	count float64
}

func classify(ops []Op) ([]int, []opClass) {
	ids := map[opKey]int{}
	class := make([]int, len(ops))
	var classes []opClass
	for i, op := range ops {
		k := opKey{string(op.Kind), string(op.Category), op.Numel, op.In, op.Out, op.Experts, op.Rows, op.Width,
			op.ElemsPerToken, op.FlopsPerToken, op.WeightElems, op.Window, op.Tied, op.PerAssignment, op.Name == "residual_add", op.Frozen, op.QuantBytes, op.QuantNative}
		id, ok := ids[k]
		if !ok {
			id = len(classes)
			ids[k] = id
			classes = append(classes, opClass{rep: i})
		}
		classes[id].count++
		class[i] = id
	}
	return class, classes
}

// appendScaled appends k standing for n alike kernels (launch count and totals times n); a
// kernel that is not there (no name) is skipped.
func appendScaled(ks []kernels.Kernel, k kernels.Kernel, n float64) []kernels.Kernel {
	if k.Name == "" {
		return ks
	}
	k.Count *= n
	k.FLOPs *= n
	k.VectorFLOPs *= n
	k.Bytes *= n
	return append(ks, k)
}

// NewModel reads a dump.
func NewModel(d *model.Dump) *Model {
	fp := Fingerprinted(d)
	ops := BuildOps(d, fp)
	allFrozen := len(ops) > 0
	for _, op := range ops {
		allFrozen = allFrozen && op.Frozen
	}
	if allFrozen { // every parameter frozen: a dump made for inference; training trains all of it
		for i := range ops {
			ops[i].Frozen = false
		}
	}
	m := &Model{Name: d.Model.Name, Fingerprint: fp, Ops: ops, Params: ParamCategories(d, ops), TotalParams: Summarize(d).Total}
	m.Active = ActiveParams(m.Params, fp)
	m.layers = float64(fp.Layers)
	if fp.MoE != nil {
		m.moeLayers = float64(fp.MoE.MoELayers)
	}
	m.class, m.classes = classify(ops)
	return m
}

// Term is one visible part of a step: forward, backward, recompute, optimizer.
type Term struct {
	Name string `json:"name"`
	Cost Cost   `json:"cost"`
}

// ModuleCost is one op's cost in a step, attributed to its module.
type ModuleCost struct {
	Module   string   `json:"module"`
	Op       string   `json:"op"`
	Category Category `json:"category"`
	Cost     Cost     `json:"cost"`
}

// Target is the chip and precision a step is timed on, with the time model that knows what
// the chip's kernels achieve. A nil Predictor times steps on the ideal roofline alone.
type Target struct {
	Chip      chips.Chip        `json:"chip"`
	DType     string            `json:"dtype"`
	Peak      float64           `json:"P_peak"`  // FLOP/s
	BWHBM     float64           `json:"BW_hbm"`  // B/s
	BWNet     float64           `json:"BW_net"`  // B/s per direction
	Knee      float64           `json:"OI_knee"` // P_peak / BW_hbm
	OINet     float64           `json:"OI_net"`  // P_peak / BW_net
	Predictor kernels.Predictor `json:"-"`
	// Serving, when set, times prefill and decode instead of Predictor: the serving engine's
	// figures on the chip (its lane), where training keeps the chip's or its framework's.
	Serving kernels.Predictor `json:"-"`
	// ServingLane names the lane Serving was built from ("trtllm", "vllm"; "": none).
	ServingLane string `json:"serving_lane,omitempty"`
}

// NewTarget resolves a chip's peak for dtype; p is the time model (timing.New), nil for the
// ideal roofline only.
func NewTarget(c chips.Chip, dtype string, p kernels.Predictor) (Target, error) {
	peak, err := c.Peak(dtype)
	if err != nil {
		return Target{}, err
	}
	t := Target{Chip: c, DType: dtype, Peak: peak, BWHBM: c.HBMBytesPerSec(), BWNet: c.NetBytesPerSec(), Predictor: p}
	t.Knee = t.Peak / t.BWHBM
	if t.BWNet > 0 {
		t.OINet = t.Peak / t.BWNet
	}
	return t, nil
}

// Label is "H200 fp8".
func (t Target) Label() string { return t.Chip.Name + " " + t.DType }

// Timing is one step on one target: the achievable prediction (T_est and its breakdown), the
// ideal roofline beside it as the ceiling, and the physics check.
type Timing struct {
	// The achievable model: T_comp = F_realizable / P_peak (every kernel's FLOPs at its achieved
	// share of peak), T_hbm (every byte at achievable bandwidth), T_net (every collective).
	TComp  float64 `json:"T_comp"`
	THBM   float64 `json:"T_hbm"`
	TNet   float64 `json:"T_net"`
	TEst   float64 `json:"T_est"`
	Regime string  `json:"regime"` // compute-bound, hbm-bound, net-bound, latency-bound: where most of T_est goes
	// Breakdown of T_est by kernel family, with launch latency and the per-step overhead.
	Breakdown   kernels.Time `json:"breakdown"`
	FRealizable float64      `json:"F_realizable"`
	EtaTC       float64      `json:"eta_tc"` // F_executed / F_realizable: the share of peak the step's compute achieves

	// The ideal roofline of the same work: the ceiling no run beats (T_est >= T_roofline).
	TRoofline      float64 `json:"T_roofline"`
	RooflineRegime string  `json:"roofline_regime"`

	AIHBM      float64 `json:"AI_hbm"`
	AITotal    float64 `json:"AI_total"`
	TFEst      float64 `json:"TF_est"` // TFLOP/s
	MFU        float64 `json:"MFU_est"`
	PEffective float64 `json:"P_effective"` // FLOP/s
	TokensPerS float64 `json:"tokens_per_s"`

	// Physics check: the compulsory HBM traffic and whether the profile's knobs went below it.
	// The prediction always uses at least the floor; TKnob is what the knobs alone would claim
	// (the roofline with the profile's bytes), shown beside it, never as the result.
	FloorBytes float64 `json:"bytes_floor"`
	BelowFloor bool    `json:"below_floor"`
	FloorNote  string  `json:"floor_note,omitempty"`
	TKnob      float64 `json:"T_knob"`
}

// Time evaluates a step: the time model over its kernels, the ideal roofline and the physics
// check of the profile's bytes.
func Time(c Cost, ks []kernels.Kernel, t Target, tokens float64, onChipWeights bool) Timing {
	var tm Timing
	weightsFloor := c.FloorWeights
	if onChipWeights {
		weightsFloor = 0
	}
	tm.FloorBytes = weightsFloor + c.FloorKV
	// Each term must carry its compulsory traffic: extra activation bytes do not make up for
	// weights a profile never reads. 0.1% slack: the two sides sum the same terms differently.
	var short []string
	if c.BytesWeights < weightsFloor*(1-1e-3) {
		short = append(short, fmt.Sprintf("bytes_weights %s < %s (every active weight once per pass; they do not fit in the %g MiB on chip)",
			units.SI(c.BytesWeights, "B"), units.SI(weightsFloor, "B"), t.Chip.OnChipMiB))
	}
	if c.BytesKV < c.FloorKV*(1-1e-3) {
		short = append(short, fmt.Sprintf("bytes_kv %s < %s (the KV cache once)", units.SI(c.BytesKV, "B"), units.SI(c.FloorKV, "B")))
	}
	if len(short) > 0 {
		tm.BelowFloor = true
		tm.FloorNote = "below the compulsory HBM traffic: " + strings.Join(short, "; ") + "; the prediction uses the floor"
	}
	tNetIdeal := 0.0
	if c.BytesNet > 0 {
		tNetIdeal = math.Inf(1)
		if t.BWNet > 0 {
			tNetIdeal = c.BytesNet / t.BWNet
		}
	}
	tm.TKnob = math.Max(c.FExecuted/t.Peak, math.Max(c.BytesHBM()/t.BWHBM, tNetIdeal))
	if t.Predictor != nil {
		p := t.Predictor.Predict(ks)
		tm.Breakdown = p
		tm.TComp, tm.THBM, tm.TNet, tm.TEst, tm.Regime = p.TComp, p.THBM, p.TNet, p.TEst, p.Regime
		tm.FRealizable = p.FRealizable
		tm.TRoofline, tm.RooflineRegime = p.TRoofline, p.RooflineRegime
	} else {
		// The ideal roofline alone: executed FLOPs at peak, floored bytes at nominal bandwidth.
		hbm := math.Max(c.BytesWeights, weightsFloor) + c.BytesActivations + math.Max(c.BytesKV, c.FloorKV) + c.BytesTemporary
		tm.TComp, tm.THBM, tm.TNet = c.FExecuted/t.Peak, hbm/t.BWHBM, tNetIdeal
		tm.TEst, tm.Regime = tm.TComp, "compute-bound"
		if tm.THBM > tm.TEst {
			tm.TEst, tm.Regime = tm.THBM, "hbm-bound"
		}
		if tm.TNet > tm.TEst {
			tm.TEst, tm.Regime = tm.TNet, "net-bound"
		}
		tm.FRealizable = c.FExecuted
		tm.TRoofline, tm.RooflineRegime = tm.TEst, tm.Regime
	}
	if b := c.BytesHBM(); b > 0 {
		tm.AIHBM = c.FTheory / b
	}
	if b := c.BytesHBM() + c.BytesNet; b > 0 {
		tm.AITotal = c.FTheory / b
	}
	if tm.TEst > 0 {
		tm.TFEst = c.FTheory / tm.TEst / 1e12
		tm.MFU = c.FTheory / (t.Peak * tm.TEst)
		tm.TokensPerS = tokens / tm.TEst
	}
	if tm.FRealizable > 0 {
		tm.PEffective = t.Peak * c.FTheory / tm.FRealizable
		tm.EtaTC = c.FExecuted / tm.FRealizable
	}
	return tm
}

// Step is one phase under one profile on one GPU.
type Step struct {
	Phase    Phase           `json:"phase"`
	Profile  string          `json:"profile"`
	Scenario Scenario        `json:"scenario"`
	Tokens   float64         `json:"tokens"`
	Cost     Cost            `json:"cost"`
	Terms    []Term          `json:"terms"`
	Modules  []ModuleCost    `json:"-"`
	ByCat    map[string]Cost `json:"by_category"`
	// FAttnCausal is the attention-core GEMM FLOPs a causal kernel executes (the lower
	// triangle), beside F_theory's full-S^2 convention.
	FAttnCausal float64 `json:"F_attn_causal"`
	FAttnFull   float64 `json:"F_attn_full"`
	// ActiveWeightBytes is the weights this step must read (per GPU): the on-chip test input.
	ActiveWeightBytes float64 `json:"active_weight_bytes"`
	// Kernels are the step's launches with their exact work and floored traffic: what the
	// time model reads.
	Kernels []kernels.Kernel `json:"-"`
}

// Analyze costs one phase under one profile. It is pure and cheap (a pass over the ops).
func (m *Model) Analyze(ph Phase, s Scenario, p ExecProfile) (Step, error) {
	return m.analyze(ph, s, p, true)
}

// AnalyzeTotals is Analyze without the per-module costs: what sweeps, grids and layout
// searches need (a model of 200,000 modules costs 70 MB of module rows per step otherwise).
func (m *Model) AnalyzeTotals(ph Phase, s Scenario, p ExecProfile) (Step, error) {
	return m.analyze(ph, s, p, false)
}

func (m *Model) analyze(ph Phase, s Scenario, p ExecProfile, modules bool) (Step, error) {
	if err := s.Validate(); err != nil {
		return Step{}, err
	}
	if err := p.Validate(); err != nil {
		return Step{}, err
	}
	if s.SeedTraining && ph == Training {
		st, err := m.analyze(Prefill, s, p, modules)
		if err != nil {
			return Step{}, err
		}
		return seedTraining(st), nil
	}
	st := Step{Phase: ph, Profile: p.Name, Scenario: s, ByCat: map[string]Cost{}}
	sh := shapeOf(ph, s)
	st.Tokens = sh.tokens
	var fwd, bwd, rec Cost
	var nParams float64
	// Cost each class of alike ops once and scale by its size: a model's layers repeat, so a
	// step costs tens of ops, not thousands (200,000 modules of one shape cost one).
	var classCost []Cost
	if modules {
		classCost = make([]Cost, len(m.classes))
	}
	var oc opCost
	rc, _ := ParseRecompute(s.Recompute) // validated above
	for c, cl := range m.classes {
		op := m.Ops[cl.rep]
		n := cl.count
		costOp(op, m.Fingerprint, ph, sh, s, p, &oc)
		cost := oc.fwd
		fwd = fwd.Add(oc.fwd.Scale(n))
		st.Kernels = appendScaled(st.Kernels, oc.fwdK, n)
		st.Kernels = appendScaled(st.Kernels, oc.eagerK[0], n)
		if ph == Training {
			bwd = bwd.Add(oc.bwd.Scale(n))
			cost = cost.Add(oc.bwd)
			for j := 0; j < oc.nBwd; j++ {
				st.Kernels = appendScaled(st.Kernels, oc.bwdK[j], n)
			}
			st.Kernels = appendScaled(st.Kernels, oc.eagerK[1], n)
			st.Kernels = appendScaled(st.Kernels, oc.castK, n)
			if share := rc.rerun(op); share > 0 {
				r := oc.fwd.Scale(share)
				r.FTheory, r.FTensorcore, r.FloorWeights, r.FloorKV = 0, 0, 0, 0 // hardware FLOPs, not model FLOPs
				rec = rec.Add(r.Scale(n))
				cost = cost.Add(r)
				st.Kernels = appendScaled(st.Kernels, oc.fwdK, n*share)
				st.Kernels = appendScaled(st.Kernels, oc.eagerK[0], n*share)
			}
			if rc.Mode == "selective" && rc.Modules["core_attn"] {
				rec = rec.Add(oc.recomputeSelective.Scale(n))
				cost = cost.Add(oc.recomputeSelective)
				st.Kernels = appendScaled(st.Kernels, oc.recK, n)
			}
			nParams += oc.params * n
		}
		if op.Kind == OpAttnCore {
			st.FAttnFull += oc.fwd.FTensorcore * n
		}
		if modules {
			classCost[c] = cost
		}
		st.ByCat[string(op.Category)] = st.ByCat[string(op.Category)].Add(cost.Scale(n))
		st.ActiveWeightBytes += oc.fwd.FloorWeights * n
	}
	if modules {
		st.Modules = make([]ModuleCost, len(m.Ops))
		for i, op := range m.Ops {
			st.Modules[i] = ModuleCost{Module: op.Module, Op: op.Name, Category: op.Category, Cost: classCost[m.class[i]]}
		}
	}
	if sh.decode {
		st.FAttnCausal = st.FAttnFull
	} else if sh.prefix > 0 {
		st.FAttnCausal = st.FAttnFull * (sh.prefix + (sh.queries+1)/2) / sh.kvLen
	} else if sh.kvLen > 0 {
		st.FAttnCausal = st.FAttnFull * (sh.kvLen + 1) / (2 * sh.kvLen)
	}
	var net Cost
	for _, k := range netKernels(m.Fingerprint, m.moeLayers, m.layers, ph, s) {
		net.BytesNet += SentBytes(k)
		st.Kernels = append(st.Kernels, k)
	}
	st.Terms = append(st.Terms, Term{"forward", fwd})
	total := fwd
	if ph == Training {
		opt := optimizerCost(nParams, s)
		st.Kernels = append(st.Kernels, kernels.Kernel{Name: "optimizer", Category: "optimizer", Kind: kernels.Memory, Count: 1,
			VectorFLOPs: opt.FExecuted, Bytes: opt.BytesWeights})
		st.Terms = append(st.Terms, Term{"backward", bwd})
		if s.Recompute != "none" {
			st.Terms = append(st.Terms, Term{"recompute (" + s.Recompute + ")", rec})
		}
		st.Terms = append(st.Terms, Term{"optimizer", opt})
		total = total.Add(bwd).Add(rec).Add(opt)
		st.ByCat["optimizer"] = opt
	}
	if net.BytesNet > 0 {
		st.Terms = append(st.Terms, Term{"network", net})
		total = total.Add(net)
		st.ByCat["network"] = net
	}
	st.Cost = total
	if ph == Decode {
		// serving engines (vLLM, TensorRT-LLM, SGLang) capture decode steps in CUDA graphs
		for i := range st.Kernels {
			st.Kernels[i].Graphed = true
		}
	}
	return st, nil
}

// AdamFlopsPerParam is the optimizer update's scalar work: moments, bias correction, sqrt,
// divide, weight decay and the update itself.
const AdamFlopsPerParam = 12

// optimizerCost is one Adam step over n parameters, amortized over GradAccum microbatches:
// read gradients and fp32 master, m, v; write master, m, v and the low-precision weights.
func optimizerCost(n float64, s Scenario) Cost {
	bytes := n * (2*s.OptimizerStateBytes + s.GradBytes + s.WeightBytes) / float64(s.GradAccum)
	per := s.OptimizerFLOPs
	if per == 0 {
		per = AdamFlopsPerParam
	}
	f := n * per / float64(s.GradAccum)
	return Cost{FExecuted: f, BytesWeights: bytes, FloorWeights: bytes}
}

// Seed compatibility multipliers (../shared/seeds/001 section 6.2).
const (
	SeedTrainingFlopsMult = 3.0
	SeedTrainingBytesMult = 2.0
)

func seedTraining(pre Step) Step {
	st := pre
	st.Phase = Training
	scale := func(c Cost) Cost {
		c.FTheory *= SeedTrainingFlopsMult
		c.FTensorcore *= SeedTrainingFlopsMult
		c.FExecuted *= SeedTrainingFlopsMult
		c.BytesWeights *= SeedTrainingBytesMult
		c.BytesActivations *= SeedTrainingBytesMult
		c.BytesKV *= SeedTrainingBytesMult
		c.BytesTemporary *= SeedTrainingBytesMult
		c.BytesNet *= SeedTrainingBytesMult
		c.FloorWeights *= SeedTrainingBytesMult
		c.FloorKV *= SeedTrainingBytesMult
		return c
	}
	st.Cost = scale(pre.Cost)
	st.Terms = []Term{{"prefill x seed multipliers", st.Cost}}
	st.ByCat = map[string]Cost{}
	for k, v := range pre.ByCat {
		st.ByCat[k] = scale(v)
	}
	st.Kernels = nil
	for _, k := range pre.Kernels {
		if k.Kind != kernels.Collective {
			k.FLOPs, k.VectorFLOPs, k.Bytes = k.FLOPs*SeedTrainingFlopsMult, k.VectorFLOPs*SeedTrainingFlopsMult, k.Bytes*SeedTrainingBytesMult
		} else {
			k.Count *= SeedTrainingBytesMult
		}
		st.Kernels = append(st.Kernels, k)
	}
	st.Modules = nil
	for _, mc := range pre.Modules {
		mc.Cost = scale(mc.Cost)
		st.Modules = append(st.Modules, mc)
	}
	return st
}

// KernelsOf returns the step's kernels of one category.
func (st Step) KernelsOf(category string) []kernels.Kernel {
	var out []kernels.Kernel
	for _, k := range st.Kernels {
		if k.Category == category {
			out = append(out, k)
		}
	}
	return out
}

// Result is a step timed on a target.
type Result struct {
	Step   Step   `json:"step"`
	Target string `json:"target"`
	Timing Timing `json:"timing"`
}

// Evaluate times a step on a target. Weights count as on chip when the step's active weights
// fit in the chip's on-chip memory.
func Evaluate(st Step, t Target) Result {
	if t.Serving != nil && st.Phase != Training {
		t.Predictor = t.Serving
	}
	onChip := st.ActiveWeightBytes > 0 && st.ActiveWeightBytes <= t.Chip.OnChipBytes()
	return Result{Step: st, Target: t.Label(), Timing: Time(st.Cost, st.Kernels, t, st.Tokens, onChip)}
}

// ModuleTree sums op costs up the module tree: each module's inclusive cost (its ops and all
// its descendants'), so children sum to their parents by construction.
func ModuleTree(mods []ModuleCost) map[string]Cost {
	out := map[string]Cost{}
	for _, mc := range mods {
		name := mc.Module
		for {
			out[name] = out[name].Add(mc.Cost)
			if name == "" {
				break
			}
			if i := strings.LastIndex(name, "."); i >= 0 {
				name = name[:i]
			} else {
				name = ""
			}
		}
	}
	return out
}

// SortedCategories returns category names of a step present in ByCat, in report order.
func SortedCategories(byCat map[string]Cost) []string {
	order := map[string]int{}
	for i, c := range Categories {
		order[string(c)] = i
	}
	order["optimizer"], order["network"] = len(Categories), len(Categories)+1
	var keys []string
	for k := range byCat {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return order[keys[i]] < order[keys[j]] })
	return keys
}

// ParamsPerGPU is the parameters one GPU holds under TP, PP, EP and expert-TP: every category
// split TP ways except routed experts, split EP x ETP ways, and norms and the router, whole on
// every TP rank; the whole spread over PP stages.
func (m *Model) ParamsPerGPU(tp, pp, ep, etp int64) float64 {
	if etp < 1 {
		etp = tp
	}
	var n float64
	for c, v := range m.Params {
		x := float64(v) / float64(tp)
		switch c {
		case CatRoutedExperts:
			x = float64(v) / float64(ep*etp)
		case CatNorm, CatRouter: // whole on every TP rank (Megatron's, vLLM's and SGLang's layers)
			x = float64(v)
		}
		n += x
	}
	return n / float64(pp)
}
