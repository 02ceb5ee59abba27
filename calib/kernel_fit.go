package calib

import (
	"fmt"
	"math"
	"sort"

	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/timing"
)

// KernelLaneFit is one chip's serving-engine lane fitted to that engine's measured kernels: a
// figure per kernel family, each fitted to half the family's shapes and checked on the other
// half (KernelGroup.heldOut).
type KernelLaneFit struct {
	Chip    string           `json:"chip"`
	Engine  string           `json:"engine"`
	Params  []KernelParamFit `json:"params"`
	Lane    chips.Efficiency `json:"lane"` // the fitted figures alone, with their sources
	Release string           `json:"release"`
}

// KernelParamFit is one figure: the shipped value and the fitted one, and the median |error|
// of the held-out shapes under each.
type KernelParamFit struct {
	Name          string  `json:"name"`
	Family        string  `json:"family"`
	Before        float64 `json:"before"`
	After         float64 `json:"after"`
	FitRows       int     `json:"fit_rows"`
	HeldRows      int     `json:"held_rows"`
	HeldErrBefore float64 `json:"held_out_abs_err_before"`
	HeldErrAfter  float64 `json:"held_out_abs_err_after"`
	// Adopted: the fitted figure predicts the held-out shapes better than the shipped one, so
	// the lane takes it; otherwise one figure cannot describe the family (its error depends on
	// shape in a way the model does not capture) and the lane keeps the shipped value.
	Adopted bool `json:"adopted"`
}

// kernelParam is a figure, the groups that pin it and its physical range; with, when set, is
// a fixed cost per call fitted jointly with it (microseconds, from 0 to its hi), so the share
// describes the large shapes and the cost the small ones.
type kernelParam struct {
	name   string
	lo, hi float64
	match  func(g KernelGroup) bool
	get    func(e chips.Efficiency) float64
	set    func(e *chips.Efficiency, v float64)
	with   *kernelParam
}

func gemmKernelParam(dtype string) kernelParam {
	return kernelParam{name: "gemm_frac." + dtype, lo: 0.05, hi: 1,
		match: func(g KernelGroup) bool { return g.Family == "gemm" && g.DType == dtype },
		get:   func(e chips.Efficiency) float64 { return e.GEMMFrac[dtype] },
		set: func(e *chips.Efficiency, v float64) {
			m := map[string]float64{}
			for k, x := range e.GEMMFrac {
				m[k] = x
			}
			m[dtype] = v
			e.GEMMFrac = m
		}}
}

// moeGEMMParam is the MoE op's compute-bound share for a precision, fitted to the groups of
// the table's precision from.
func moeGEMMParam(dtype, from string) kernelParam {
	return kernelParam{name: "moe_gemm_frac." + dtype, lo: 0.05, hi: 1,
		match: func(g KernelGroup) bool { return g.Family == "moe" && g.DType == from },
		get: func(e chips.Efficiency) float64 {
			if f, ok := e.MoEGEMMFrac[dtype]; ok {
				return f
			}
			return firstSet(e.GroupedGEMMFrac, 1)
		},
		set: func(e *chips.Efficiency, v float64) {
			m := map[string]float64{}
			for k, x := range e.MoEGEMMFrac {
				m[k] = x
			}
			m[dtype] = v
			e.MoEGEMMFrac = m
		}}
}

// kernelParams are what the kernel tables pin: the dense GEMM ceiling per precision (FP8 with
// per-tensor scales: block-scaled FP8 GEMMs are other kernels, reported by validate --kernels
// and not fitted here), prefill attention's share of the 16-bit peak, and the share of HBM
// bandwidth decode attention streams a 16-bit KV cache at, and an 8-bit one (after the 16-bit
// figure, which it falls back to).
var kernelParams = []kernelParam{
	gemmKernelParam("bf16"), gemmKernelParam("fp8"), gemmKernelParam("fp4"),
	{name: "attn_frac", lo: 0.05, hi: 1,
		match: func(g KernelGroup) bool {
			return g.Family == "context_attention" && g.DType == "bf16" && g.KVDType == "bf16"
		},
		get: func(e chips.Efficiency) float64 { return e.AttnFrac },
		set: func(e *chips.Efficiency, v float64) { e.AttnFrac = v },
		with: &kernelParam{name: "attn_overhead_us", lo: 0, hi: 100,
			get: func(e chips.Efficiency) float64 { return e.AttnOverheadUs },
			set: func(e *chips.Efficiency, v float64) { e.AttnOverheadUs = v }}},
	{name: "attn_decode_hbm_frac", lo: 0.05, hi: 1,
		match: func(g KernelGroup) bool { return g.Family == "generation_attention" && g.KVDType == "bf16" },
		get:   func(e chips.Efficiency) float64 { return firstSet(e.AttnDecodeHBMFrac, e.HBMFrac) },
		set:   func(e *chips.Efficiency, v float64) { e.AttnDecodeHBMFrac = v },
		with: &kernelParam{name: "attn_decode_overhead_us", lo: 0, hi: 100,
			get: func(e chips.Efficiency) float64 { return e.AttnDecodeOverheadUs },
			set: func(e *chips.Efficiency, v float64) { e.AttnDecodeOverheadUs = v }}},
	// MoE layers: the weight-streaming share and the op's fixed cost on 16-bit layers, then the
	// compute-bound share per precision on top (FP8 from block-scaled layers: DeepSeek-V3/R1's
	// and Qwen3's FP8 checkpoints use 128x128 block scales).
	{name: "moe_hbm_frac", lo: 0.05, hi: 1,
		match: func(g KernelGroup) bool { return g.Family == "moe" && g.DType == "bf16" },
		get:   func(e chips.Efficiency) float64 { return firstSet(e.MoEHBMFrac, e.HBMFrac) },
		set:   func(e *chips.Efficiency, v float64) { e.MoEHBMFrac = v },
		with: &kernelParam{name: "moe_overhead_us", lo: 0, hi: 100,
			get: func(e chips.Efficiency) float64 { return e.MoEOverheadUs },
			set: func(e *chips.Efficiency, v float64) { e.MoEOverheadUs = v }}},
	moeGEMMParam("bf16", "bf16"), moeGEMMParam("fp8", "fp8_block"), moeGEMMParam("fp4", "fp4"),
	// DeepSeek's latent attention, on 16-bit caches, after the engine's other attention (its op
	// costs are the attention op's: the same cache write and plan)
	{name: "mla_frac", lo: 0.02, hi: 1,
		match: func(g KernelGroup) bool { return g.Family == "context_mla" && g.KVDType == "bf16" },
		get:   func(e chips.Efficiency) float64 { return firstSet(e.MLAFrac, e.AttnFrac) },
		set:   func(e *chips.Efficiency, v float64) { e.MLAFrac = v }},
	{name: "mla_decode_frac", lo: 0.02, hi: 1,
		match: func(g KernelGroup) bool { return g.Family == "generation_mla" && g.KVDType == "bf16" },
		get:   func(e chips.Efficiency) float64 { return firstSet(e.MLADecodeFrac, e.AttnFrac) },
		set:   func(e *chips.Efficiency, v float64) { e.MLADecodeFrac = v }},
	{name: "mla_decode_frac_8bit", lo: 0.02, hi: 1,
		match: func(g KernelGroup) bool { return g.Family == "generation_mla" && g.KVDType == "fp8" },
		get:   func(e chips.Efficiency) float64 { return firstSet(e.MLADecodeFrac8, e.MLADecodeFrac, e.AttnFrac) },
		set:   func(e *chips.Efficiency, v float64) { e.MLADecodeFrac8 = v }},
	{name: "attn_decode_hbm_frac_8bit", lo: 0.05, hi: 1,
		match: func(g KernelGroup) bool { return g.Family == "generation_attention" && g.KVDType == "fp8" },
		get: func(e chips.Efficiency) float64 {
			return firstSet(e.AttnDecodeHBMFrac8, e.AttnDecodeHBMFrac, e.HBMFrac)
		},
		set: func(e *chips.Efficiency, v float64) { e.AttnDecodeHBMFrac8 = v }},
}

// FitKernelLanes fits each chip's lane for each engine to the engine's measured kernels. Only
// groups whose every row is physically possible are used.
func FitKernelLanes(ks KernelSet, db *chips.DB) ([]KernelLaneFit, error) {
	type key struct{ chip, engine string }
	var order []key
	byKey := map[key][]KernelGroup{}
	for _, g := range ks.Groups {
		if g.Engine == TorchEngine {
			continue // an independent check of the chip's own figures, not a serving engine's lane
		}
		k := key{g.Chip, g.Engine}
		if byKey[k] == nil {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], g)
	}
	var out []KernelLaneFit
	for _, k := range order {
		chip, err := db.Lookup(k.chip)
		if err != nil {
			return nil, fmt.Errorf("kernel lane %s %s: %w", k.chip, k.engine, err)
		}
		eff := chip.Efficiency.Lane(k.engine)
		f := KernelLaneFit{Chip: k.chip, Engine: k.engine, Lane: chips.Efficiency{Sources: map[string]string{}}}
		for _, p := range kernelParams {
			var gs []KernelGroup
			for _, g := range byKey[k] {
				if p.match(g) {
					gs = append(gs, g)
					f.Release = g.Release
				}
			}
			if len(gs) == 0 {
				continue
			}
			laneChip := chip
			laneChip.Efficiency = eff
			fit, held := splitRows(laneChip, gs)
			if len(fit) == 0 || len(held) == 0 {
				continue
			}
			before := p.get(eff)
			var w0 float64
			if p.with != nil {
				w0 = p.with.get(eff)
			}
			at := func(v, w float64) chips.Efficiency {
				e := eff
				p.set(&e, v)
				if p.with != nil {
					p.with.set(&e, w)
				}
				return e
			}
			fitLoss := func(v, w float64) float64 {
				l, err := kernelLoss(chip, at(v, w), fit)
				if err != nil {
					return math.Inf(1)
				}
				return l
			}
			best, bestW := before, w0
			// coordinate descent: the share on a log scale, the fixed cost on a linear one; a
			// figure alone needs one pass
			rounds := 1
			if p.with != nil {
				rounds = 4
			}
			for round := 0; round < rounds; round++ {
				w := bestW
				best = goldenLog(p.lo, p.hi, func(v float64) float64 { return fitLoss(v, w) })
				if p.with != nil {
					v := best
					bestW = golden(func(w float64) float64 { return fitLoss(v, w) }, p.with.lo, p.with.hi, 40)
				}
			}
			best, bestW = math.Round(best*1000)/1000, math.Round(bestW*10)/10
			hb, err := kernelLoss(chip, at(before, w0), held)
			if err != nil {
				return nil, err
			}
			ha, err := kernelLoss(chip, at(best, bestW), held)
			if err != nil {
				return nil, err
			}
			adopt := ha < hb
			f.Params = append(f.Params, KernelParamFit{Name: p.name, Family: gs[0].Family, Before: before, After: best,
				FitRows: len(fit), HeldRows: len(held), HeldErrBefore: hb, HeldErrAfter: ha, Adopted: adopt})
			if p.with != nil {
				f.Params = append(f.Params, KernelParamFit{Name: p.with.name, Family: gs[0].Family, Before: w0, After: bestW,
					FitRows: len(fit), HeldRows: len(held), HeldErrBefore: hb, HeldErrAfter: ha, Adopted: adopt})
			}
			if !adopt {
				continue
			}
			src := fmt.Sprintf("fitted by mrep calibrate --kernels to %s %s's measured %s kernels (%s), half the shapes; held-out median |log error| %.0f%% -> %.0f%%",
				k.engine, gs[0].Release, gs[0].Family, gs[0].Source, 100*hb, 100*ha)
			p.set(&f.Lane, best)
			p.set(&eff, best) // the figures after it are fitted with it (an FP8 cache's decode pays the op's cost too)
			f.Lane.Sources[p.name] = src
			if p.with != nil {
				p.with.set(&f.Lane, bestW)
				p.with.set(&eff, bestW)
				f.Lane.Sources[p.with.name] = src + " (fitted with " + p.name + ")"
			}
		}
		if len(f.Params) > 0 {
			out = append(out, f)
		}
	}
	return out, nil
}

// firstSet is the first of a lane figure's fallbacks that is set (> 0), as timing resolves it.
func firstSet(xs ...float64) float64 {
	for _, x := range xs {
		if x > 0 {
			return x
		}
	}
	return 0
}

// kernelRow is one measured kernel of a group.
type kernelRow struct {
	g KernelGroup
	r []float64
}

func splitRows(chip chips.Chip, gs []KernelGroup) (fit, held []kernelRow) {
	for _, g := range gs {
		h := g.heldOut()
		bad := g.impossibleShapes(chip)
		for i, r := range g.Rows {
			switch {
			case bad[g.shapeClass(r)]:
			case h[i]:
				held = append(held, kernelRow{g, r})
			default:
				fit = append(fit, kernelRow{g, r})
			}
		}
	}
	return fit, held
}

// impossibleShapes are the shapes of g with a row measured faster than the chip's roofline:
// nothing is fitted to them (a row that beats physics makes its neighbours suspect too: on an
// H100, the tables time DeepSeek-V3's MoE layer streaming its experts at 5.6 TB/s).
func (g KernelGroup) impossibleShapes(chip chips.Chip) map[[3]float64]bool {
	bad := map[[3]float64]bool{}
	for _, r := range g.Rows {
		if g.belowRoofline(r, chip) {
			bad[g.shapeClass(r)] = true
		}
	}
	return bad
}

// kernelLoss is the typical relative error of rows on chip with figures e: exp of the median
// |log(predicted / measured)|, minus one (a factor's error, symmetric in over and under).
func kernelLoss(chip chips.Chip, e chips.Efficiency, rows []kernelRow) (float64, error) {
	chip.Efficiency = e
	models := map[string]*timing.Model{}
	var ls []float64
	for _, kr := range rows {
		dtype := kr.g.timingDType()
		tm, ok := models[dtype]
		if !ok {
			var err error
			if tm, err = timing.New(chip, dtype); err != nil {
				return 0, err
			}
			models[dtype] = tm
		}
		pred := kr.g.predict(tm, kr.r, dtype)
		ls = append(ls, math.Abs(math.Log(pred/(kr.r[len(kr.r)-1]*1e-6))))
	}
	sort.Float64s(ls)
	return math.Exp(median(ls)) - 1, nil
}

// goldenLog minimises f over [lo, hi] by golden-section search on a log scale (the figures are
// shares: a factor matters, not a difference).
func goldenLog(lo, hi float64, f func(float64) float64) float64 {
	return math.Exp(golden(func(x float64) float64 { return f(math.Exp(x)) }, math.Log(lo), math.Log(hi), 40))
}
