package analyzer

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/internal/units"
	"github.com/mrep-dev/mrep/model"
)

// Version identifies the analytical model; results cached under another version are stale.
const Version = "mrep-analyzer/1"

// Model is a dump read once for costing: fingerprint, ops and parameter categories.
type Model struct {
	Name        string             `json:"name"`
	Fingerprint Fingerprint        `json:"fingerprint"`
	Ops         []Op               `json:"-"`
	Params      map[Category]int64 `json:"params_by_category"`
	TotalParams int64              `json:"total_params"`
	Active      float64            `json:"active_params_per_token"`
	layers      float64
	moeLayers   float64
}

// NewModel reads a dump.
func NewModel(d *model.Dump) *Model {
	fp := Fingerprinted(d)
	ops := BuildOps(d, fp)
	m := &Model{Name: d.Model.Name, Fingerprint: fp, Ops: ops, Params: ParamCategories(d, ops), TotalParams: Summarize(d).Total}
	m.Active = ActiveParams(m.Params, fp)
	m.layers = float64(fp.Layers)
	if fp.MoE != nil {
		m.moeLayers = float64(fp.MoE.MoELayers)
	}
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

// Target is the chip and precision a step is timed on.
type Target struct {
	Chip  chips.Chip `json:"chip"`
	DType string     `json:"dtype"`
	Peak  float64    `json:"P_peak"`  // FLOP/s
	BWHBM float64    `json:"BW_hbm"`  // B/s
	BWNet float64    `json:"BW_net"`  // B/s per direction
	Knee  float64    `json:"OI_knee"` // P_peak / BW_hbm
	OINet float64    `json:"OI_net"`  // P_peak / BW_net
}

// NewTarget resolves a chip's peak for dtype.
func NewTarget(c chips.Chip, dtype string) (Target, error) {
	peak, err := c.Peak(dtype)
	if err != nil {
		return Target{}, err
	}
	t := Target{Chip: c, DType: dtype, Peak: peak, BWHBM: c.HBMBytesPerSec(), BWNet: c.NetBytesPerSec()}
	t.Knee = t.Peak / t.BWHBM
	if t.BWNet > 0 {
		t.OINet = t.Peak / t.BWNet
	}
	return t, nil
}

// Label is "H200 fp8".
func (t Target) Label() string { return t.Chip.Name + " " + t.DType }

// Timing is the time model for one cost on one target.
type Timing struct {
	TComp  float64 `json:"T_comp"`
	THBM   float64 `json:"T_hbm"`
	TNet   float64 `json:"T_net"`
	TEst   float64 `json:"T_est"`
	Regime string  `json:"regime"` // compute-bound, hbm-bound, net-bound

	AIHBM      float64 `json:"AI_hbm"`
	AITotal    float64 `json:"AI_total"`
	TFEst      float64 `json:"TF_est"` // TFLOP/s
	MFU        float64 `json:"MFU_est"`
	PEffective float64 `json:"P_effective"` // FLOP/s
	TokensPerS float64 `json:"tokens_per_s"`

	// Physics check: the compulsory HBM traffic and whether the profile went below it.
	FloorBytes float64 `json:"bytes_floor"`
	BelowFloor bool    `json:"below_floor"`
	FloorNote  string  `json:"floor_note,omitempty"`
	// TEstFloor is T_est with each byte term raised to its floor: the fastest this step can be.
	TEstFloor float64 `json:"T_est_floor"`
}

// Time evaluates T_est = max(T_comp, T_hbm, T_net) and the roofline quantities.
func Time(c Cost, t Target, tokens float64, onChipWeights bool) Timing {
	var tm Timing
	tm.TComp = c.FRealizable / t.Peak
	tm.THBM = c.BytesHBM() / t.BWHBM
	if c.BytesNet > 0 && t.BWNet > 0 {
		tm.TNet = c.BytesNet / t.BWNet
	} else if c.BytesNet > 0 {
		tm.TNet = math.Inf(1)
	}
	tm.TEst, tm.Regime = tm.TComp, "compute-bound"
	if tm.THBM > tm.TEst {
		tm.TEst, tm.Regime = tm.THBM, "hbm-bound"
	}
	if tm.TNet > tm.TEst {
		tm.TEst, tm.Regime = tm.TNet, "net-bound"
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
	if c.FRealizable > 0 {
		tm.PEffective = t.Peak * c.FTheory / c.FRealizable
	}
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
		tm.FloorNote = "below the compulsory HBM traffic: " + strings.Join(short, "; ") + "; no chip reaches this T_est"
	}
	hbm := math.Max(c.BytesWeights, weightsFloor) + c.BytesActivations + math.Max(c.BytesKV, c.FloorKV) + c.BytesTemporary
	tm.TEstFloor = math.Max(tm.TComp, math.Max(hbm/t.BWHBM, tm.TNet))
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
}

// Analyze costs one phase under one profile. It is pure and cheap (a pass over the ops).
func (m *Model) Analyze(ph Phase, s Scenario, p ExecProfile) (Step, error) {
	if err := s.Validate(); err != nil {
		return Step{}, err
	}
	if err := p.Validate(); err != nil {
		return Step{}, err
	}
	if s.SeedTraining && ph == Training {
		st, err := m.Analyze(Prefill, s, p)
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
	for _, op := range m.Ops {
		oc := costOp(op, m.Fingerprint, ph, s, p)
		cost := oc.fwd
		fwd = fwd.Add(oc.fwd)
		if ph == Training {
			bwd = bwd.Add(oc.bwd)
			cost = cost.Add(oc.bwd)
			switch s.Recompute {
			case "full":
				r := oc.fwd
				r.FTheory, r.FTensorcore, r.FloorWeights, r.FloorKV = 0, 0, 0, 0 // hardware FLOPs, not model FLOPs
				rec = rec.Add(r)
				cost = cost.Add(r)
			case "selective":
				rec = rec.Add(oc.recomputeSelective)
				cost = cost.Add(oc.recomputeSelective)
			}
			nParams += oc.params
		}
		if op.Kind == OpAttnCore {
			st.FAttnFull += oc.fwd.FTensorcore
		}
		st.Modules = append(st.Modules, ModuleCost{Module: op.Module, Op: op.Name, Category: op.Category, Cost: cost})
		st.ByCat[string(op.Category)] = st.ByCat[string(op.Category)].Add(cost)
		st.ActiveWeightBytes += oc.fwd.FloorWeights
	}
	if sh.decode {
		st.FAttnCausal = st.FAttnFull
	} else if sh.kvLen > 0 {
		st.FAttnCausal = st.FAttnFull * (sh.kvLen + 1) / (2 * sh.kvLen)
	}
	net := Cost{BytesNet: netCost(m.Fingerprint, m.moeLayers, m.layers, ph, s)}
	st.Terms = append(st.Terms, Term{"forward", fwd})
	total := fwd
	if ph == Training {
		opt := optimizerCost(nParams, s)
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
	return st, nil
}

// AdamFlopsPerParam is the optimizer update's scalar work: moments, bias correction, sqrt,
// divide, weight decay and the update itself.
const AdamFlopsPerParam = 12

// optimizerCost is one Adam step over n parameters, amortized over GradAccum microbatches:
// read gradients and fp32 master, m, v; write master, m, v and the low-precision weights.
func optimizerCost(n float64, s Scenario) Cost {
	bytes := n * (2*s.OptimizerStateBytes + s.GradBytes + s.WeightBytes) / float64(s.GradAccum)
	f := n * AdamFlopsPerParam / float64(s.GradAccum)
	return Cost{FRealizable: f / s.EtaScalar, BytesWeights: bytes, FloorWeights: bytes}
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
		c.FRealizable *= SeedTrainingFlopsMult
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
	st.Modules = nil
	for _, mc := range pre.Modules {
		mc.Cost = scale(mc.Cost)
		st.Modules = append(st.Modules, mc)
	}
	return st
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
	onChip := st.ActiveWeightBytes > 0 && st.ActiveWeightBytes <= t.Chip.OnChipBytes()
	return Result{Step: st, Target: t.Label(), Timing: Time(st.Cost, t, st.Tokens, onChip)}
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
