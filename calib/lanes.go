package calib

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/layout"
	"github.com/mrep-dev/mrep/serve"
)

// Training lanes: a framework's figures on a chip (chips.Efficiency.Lanes), fitted to the
// training rows of that framework and chip. A lane fits few, physical figures: the achieved GEMM
// fraction of each precision its rows use (Transformer Engine's or torch's GEMMs in training,
// not an inference engine's), the grouped GEMM share and the eager MoE layer's host pace where it
// trains MoE models, and for eager PyTorch (fsdp) the attention kernels' fraction and the
// elementwise ops' extra traffic. Never a figure per model or per row.

// LaneKey names a lane on a chip.
type LaneKey struct{ Framework, Chip string }

func (k LaneKey) String() string { return k.Framework + " on " + k.Chip }

// laneOf is a training row's lane: the framework its layout runs on (the row's, or its stack's).
func laneOf(p Prepared) LaneKey {
	return LaneKey{rowFramework(p), p.Chip.Name}
}

// rowFramework is the framework a training row's layout runs on.
func rowFramework(p Prepared) string {
	if p.train != nil && p.train.l.Framework != "" {
		return p.train.l.Framework
	}
	if fw := p.Row.Layout().Framework; fw != "" {
		return fw
	}
	return layout.Megatron
}

// Where a lane figure carries to a chip without rows of its own, nearest first. Kernel figures
// (GEMM and attention fractions, the grouped GEMM) follow the silicon: the same GPU in another
// system, then its generation. Host figures (the MoE layer's launch pace) follow the system: the
// same host CPU (x86 beside HGX boards, Grace in NVL72 racks), whatever the GPU.
var (
	SiliconFallback = map[string][]string{
		"GB300": {"B300", "GB200", "B200"}, "B300": {"GB300", "B200", "GB200"},
		"GB200": {"B200", "GB300", "B300"}, "B200": {"GB200", "B300", "GB300"},
		"H100-SXM": {"H100-96GB", "H200"}, "H100-96GB": {"H100-SXM", "H200"}, "H200": {"H100-SXM", "H100-96GB"},
		"H800": {"H100-SXM", "H100-96GB", "H200"},
	}
	HostFallback = map[string][]string{
		"GB300": {"GB200"}, "GB200": {"GB300"},
		"B300": {"B200", "H100-SXM", "H200"}, "B200": {"B300", "H100-SXM", "H200"},
		"H100-SXM": {"H100-96GB", "H200", "B200", "B300"}, "H100-96GB": {"H100-SXM", "H200", "B200", "B300"},
		"H200": {"H100-SXM", "H100-96GB", "B200", "B300"},
		"H800": {"H100-SXM", "H100-96GB", "H200", "B200", "B300"},
	}
)

// hostParam says whether a lane figure belongs to the host rather than the GPU.
func hostParam(name string) bool { return name == "moe_launch_us" }

// MaxMoELaunchUs bounds the fitted host time per MoE kernel (its parameter in laneFigures says why).
const MaxMoELaunchUs = 60

// laneParams are the figures a lane fits, given its rows: a precision's GEMM fraction where
// dense rows pin it (MoE rows fit the grouped GEMM and the host pace over whatever the dense rows
// set), and for fsdp the attention kernels and the eager elementwise traffic.
func laneParams(fw string, rows []Prepared) []Param {
	var dtypes []string
	seen := map[string]bool{}
	moe := false
	for _, p := range rows {
		isMoE := p.train != nil && p.train.m.Fingerprint.MoE != nil
		if d := strings.ToLower(p.Row.DType); !seen[d] && !isMoE {
			seen[d] = true
			dtypes = append(dtypes, d)
		}
		moe = moe || isMoE
	}
	return laneFigures(fw, dtypes, moe)
}

func laneFigures(fw string, dtypes []string, moe bool) []Param {
	var out []Param
	sort.Strings(dtypes)
	for _, d := range dtypes {
		out = append(out, gemmParam(d))
	}
	f := func(name string, lo, hi float64, ptr func(e *chips.Efficiency) *float64) Param {
		return Param{Name: name, Lo: lo, Hi: hi, get: func(e *chips.Efficiency) float64 { return *ptr(e) },
			set: func(e *chips.Efficiency, v float64) { *ptr(e) = v }}
	}
	if moe {
		out = append(out, f("grouped_gemm_frac", 0.2, 1, func(e *chips.Efficiency) *float64 { return &e.GroupedGEMMFrac }),
			// the host's time per MoE kernel is bounded by physics, not left to absorb what the
			// MoE rows miss: NVIDIA's cpu_overhead microbenchmark measures 11-18 us per tiny GEMM
			// launched eagerly from PyTorch (dgxc-benchmarking microbenchmarks/cpu_overhead
			// README @841f546); 60 us allows 3x that for the layer's Python bookkeeping and a
			// slower host core (the H100 fit sat at the former 100 us bound)
			f("moe_launch_us", 0, MaxMoELaunchUs, func(e *chips.Efficiency) *float64 { return &e.MoELaunchUs }))
	}
	if fw == layout.FSDP {
		out = append(out, Param{Name: "attn_frac", Lo: 0.1, Hi: 1,
			get: func(e *chips.Efficiency) float64 { return e.AttnFrac },
			// one figure for the kernel generation: the backward keeps its 0.8 ratio (FA2 paper)
			set: func(e *chips.Efficiency, v float64) { e.AttnFrac, e.AttnBwdFrac = v, 0.8*v }},
			f("eager_elementwise", 1, 20, func(e *chips.Efficiency) *float64 { return &e.EagerElementwise }))
	}
	return out
}

// LaneFit is one lane's fitted figures and its fit set.
type LaneFit struct {
	Lane    LaneKey            `json:"lane"`
	Rows    int                `json:"rows"`
	Sources []string           `json:"sources"`
	Params  map[string]float64 `json:"params"`
	// Lane holds only the fitted figures, as chips.json's efficiency.lanes keeps them.
	Figures chips.Efficiency `json:"figures"`
	Before  float64          `json:"median_abs_err_before"`
	After   float64          `json:"median_abs_err_after"`
}

// FitLanes fits every lane the training rows name. Rows that are not training, or not
// predictable, are ignored.
func FitLanes(ps []Prepared) ([]LaneFit, error) {
	return fitLanes(ps, nil)
}

// fitLanes fits each lane's rows, reusing from reuse the fits of lanes whose rows are the same
// (leaving a source out refits only the lanes it had rows in).
func fitLanes(ps []Prepared, reuse map[string]LaneFit) ([]LaneFit, error) {
	groups := map[LaneKey][]Prepared{}
	var keys []LaneKey
	for _, p := range ps {
		if p.Skip != nil || p.train == nil {
			continue
		}
		k := laneOf(p)
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], p)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var out []LaneFit
	for _, k := range keys {
		rows := groups[k]
		if f, ok := reuse[rowSet(k, rows)]; ok {
			out = append(out, f)
			continue
		}
		params := laneParams(k.Framework, rows)
		if len(rows) <= len(params) {
			// no more runs than figures: a fit would pass through every row and predict
			// nothing; the chip takes a sibling's lane (SiliconFallback) instead
			continue
		}
		base := rows[0].Chip.Efficiency
		base.Lanes = nil // fit the lane's figures over the chip's own
		// coordinate descent from a few starting points of each bounded figure: the host pace
		// enters through a max, so the loss has more than one basin
		eff, best, err := fitWith(rows, base, params, AbsLoss)
		if err != nil {
			return nil, fmt.Errorf("lane %s: %w", k, err)
		}
		for _, start := range []float64{0.3, 0.7} {
			b := clone(base)
			for _, pr := range params {
				pr.set(&b, pr.Lo+start*(pr.Hi-pr.Lo))
			}
			e, l, err := fitWith(rows, b, params, AbsLoss)
			if err != nil {
				return nil, fmt.Errorf("lane %s: %w", k, err)
			}
			if l < best-1e-9 {
				eff, best = e, l
			}
		}
		lf := LaneFit{Lane: k, Rows: len(rows), Params: map[string]float64{}, Figures: chips.Efficiency{GEMMFrac: map[string]float64{}, Sources: map[string]string{}}}
		srcs := map[string]bool{}
		for _, p := range rows {
			srcs[SourceOf(p.Row)] = true
		}
		for s := range srcs {
			lf.Sources = append(lf.Sources, s)
		}
		sort.Strings(lf.Sources)
		for _, pr := range params {
			v := pr.get(&eff)
			lf.Params[pr.Name] = v
			pr.set(&lf.Figures, v)
		}
		lf.Before = medianAbs(rows, rows[0].Chip.Efficiency)
		lf.After = medianAbs(rows, eff)
		if reuse != nil {
			reuse[rowSet(k, rows)] = lf
		}
		out = append(out, lf)
	}
	return out, nil
}

// rowSet names a lane's fit set: the lane and its rows' ids.
func rowSet(k LaneKey, rows []Prepared) string {
	ids := make([]string, len(rows))
	for i, p := range rows {
		ids[i] = p.Row.ID
	}
	return k.String() + "\x00" + strings.Join(ids, "\x00")
}

func medianAbs(rows []Prepared, eff chips.Efficiency) float64 {
	var es []float64
	for _, p := range rows {
		pred, _, err := p.Predict(eff)
		if err != nil {
			continue
		}
		es = append(es, math.Abs(pred/p.Row.Measured-1))
	}
	sort.Float64s(es)
	return median(es)
}

// WithLanes is each chip's efficiency with its lanes: the figures fitted on its own rows, and
// for each figure some lane fitted elsewhere but not here, the nearest sibling's (SiliconFallback
// or HostFallback). Sources say which.
func WithLanes(db map[string]chips.Efficiency, fits []LaneFit) map[string]chips.Efficiency {
	byKey := map[LaneKey]LaneFit{}
	for _, f := range fits {
		byKey[f.Lane] = f
	}
	out := map[string]chips.Efficiency{}
	for name, eff := range db {
		lanes := map[string]chips.Efficiency{}
		for k, v := range eff.Lanes {
			lanes[k] = v
		}
		for _, fw := range layout.Frameworks {
			// every figure some chip's lane of this framework fitted
			var names []string
			seen := map[string]bool{}
			for _, f := range fits {
				if f.Lane.Framework != fw {
					continue
				}
				for p := range f.Params {
					if !seen[p] {
						seen[p] = true
						names = append(names, p)
					}
				}
			}
			sort.Strings(names)
			own, hasOwn := byKey[LaneKey{fw, name}]
			lane := chips.Efficiency{GEMMFrac: map[string]float64{}, Sources: map[string]string{}}
			set := false
			for _, pn := range names {
				pr := paramByName(pn)
				if v, ok := own.Params[pn]; hasOwn && ok {
					pr.set(&lane, v)
					lane.Sources[sourceKey(pn)] = own.source()
					set = true
					continue
				}
				chain := SiliconFallback[name]
				why := "same silicon or generation"
				if hostParam(pn) {
					chain, why = HostFallback[name], "same host CPU"
				}
				for _, other := range chain {
					if f, ok := byKey[LaneKey{fw, other}]; ok {
						if v, ok := f.Params[pn]; ok {
							pr.set(&lane, v)
							if _, mine := lane.Sources[sourceKey(pn)]; !mine || !strings.HasPrefix(lane.Sources[sourceKey(pn)], "fitted") {
								lane.Sources[sourceKey(pn)] = fmt.Sprintf("carried from %s (%s; no %s rows for it on %s): %s", other, why, fw, name, f.source())
							}
							set = true
							break
						}
					}
				}
			}
			if !set {
				continue
			}
			if len(lane.GEMMFrac) == 0 {
				lane.GEMMFrac = nil
			}
			if lane.AttnFrac > 0 {
				lane.Sources["attn_bwd_frac"] = "0.8 x the lane's attn_frac (FlashAttention-2 paper: backward at ~0.8x the forward)"
			}
			lanes[fw] = lane
		}
		eff.Lanes = lanes
		out[name] = eff
	}
	return out
}

// paramByName is the lane figure a fit names (gemm_frac.DTYPE and the laneParams).
func paramByName(name string) Param {
	if d, ok := strings.CutPrefix(name, "gemm_frac."); ok {
		return gemmParam(d)
	}
	for _, p := range laneFigures(layout.FSDP, nil, true) {
		if p.Name == name {
			return p
		}
	}
	panic("calib: unknown lane figure " + name) // laneParams and this list are one set
}

// sourceKey is the efficiency.sources key of a fitted figure.
func sourceKey(name string) string {
	if strings.HasPrefix(name, "gemm_frac.") {
		return "gemm_frac"
	}
	return name
}

// source describes a lane fit for the figures' sources.
func (f LaneFit) source() string {
	return fmt.Sprintf("fitted by mrep calibrate --lanes (mean |log error|) to the %d %s training rows on %s (%s): median |err| %.1f%% before, %.1f%% after",
		f.Rows, f.Lane.Framework, f.Lane.Chip, strings.Join(f.Sources, "; "), 100*f.Before, 100*f.After)
}

// SourceOf is the source a row's measurement comes from, at the grain leave-one-source-out
// holds out: one published table (a release's table per system), one benchmark file.
func SourceOf(r Row) string {
	s := r.Source
	switch {
	case strings.Contains(s, "Megatron-Bridge"):
		rel, sys := "", ""
		if i := strings.Index(s, "("); i >= 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 0 {
				rel = f[0]
			}
			for _, w := range f {
				if strings.HasPrefix(w, "DGX-") {
					sys = w
				}
			}
		}
		return "Megatron-Bridge " + rel + " " + sys
	case strings.Contains(s, "torchtitan") && strings.Contains(s, "asyncTP"):
		return "torchtitan asyncTP_llama3_h100_2025-06"
	case strings.Contains(s, "torchtitan") && strings.Contains(s, "docs/performance.md"):
		return "torchtitan docs/performance.md 2024"
	case strings.Contains(s, "torchtitan"):
		return "torchtitan llama3_h100_202412"
	case strings.Contains(s, "fms-fsdp"):
		return "IBM fms-fsdp README"
	case strings.Contains(s, "dgxc-benchmarking"):
		return "dgxc-benchmarking llama3.1 70B"
	}
	if i := strings.Index(s, " @"); i > 0 {
		return s[:i]
	}
	return s
}

// SourceError is one source's rows predicted by lanes fitted without them.
type SourceError struct {
	Source       string  `json:"source"`
	Rows         int     `json:"rows"`
	MedianAbsErr float64 `json:"median_abs_err"`
	WorstAbsErr  float64 `json:"worst_abs_err"`
	// InSample is the same rows' median |error| with every source fitted.
	InSample float64 `json:"in_sample_median_abs_err"`
}

// LeaveOneSourceOut fits the lanes on every training source but one and predicts the one left
// out, for each source: the error a new table of runs should expect.
func LeaveOneSourceOut(ps []Prepared) ([]SourceError, error) {
	srcs, bySrc := trainingSources(ps)
	reuse := map[string]LaneFit{}
	all, err := fitLanes(ps, reuse)
	if err != nil {
		return nil, err
	}
	var out []SourceError
	for _, s := range srcs {
		var rest []Prepared
		held := map[int]bool{}
		for _, i := range bySrc[s] {
			held[i] = true
		}
		for i, p := range ps {
			if !held[i] {
				rest = append(rest, p)
			}
		}
		fits, err := fitLanes(rest, reuse)
		if err != nil {
			return nil, err
		}
		se := SourceError{Source: s, Rows: len(bySrc[s])}
		var es, in []float64
		for _, i := range bySrc[s] {
			p := ps[i]
			e, err := laneEff(p, fits)
			if err != nil {
				return nil, err
			}
			pred, _, err := p.Predict(e)
			if err != nil {
				return nil, fmt.Errorf("row %s: %w", p.Row.ID, err)
			}
			es = append(es, math.Abs(pred/p.Row.Measured-1))
			e, _ = laneEff(p, all)
			if pred, _, err = p.Predict(e); err == nil {
				in = append(in, math.Abs(pred/p.Row.Measured-1))
			}
		}
		sort.Float64s(es)
		sort.Float64s(in)
		se.MedianAbsErr, se.WorstAbsErr, se.InSample = median(es), es[len(es)-1], median(in)
		out = append(out, se)
	}
	return out, nil
}

// TrainingSources is how many sources the training rows of ps come from: the refits a
// leave-one-source-out check makes (each a full lane fit).
func TrainingSources(ps []Prepared) int {
	srcs, _ := trainingSources(ps)
	return len(srcs)
}

// trainingSources is the sources of the training rows, sorted, and each one's rows.
func trainingSources(ps []Prepared) ([]string, map[string][]int) {
	bySrc := map[string][]int{}
	var srcs []string
	for i, p := range ps {
		if p.Skip != nil || p.train == nil {
			continue
		}
		s := SourceOf(p.Row)
		if bySrc[s] == nil {
			srcs = append(srcs, s)
		}
		bySrc[s] = append(bySrc[s], i)
	}
	sort.Strings(srcs)
	return srcs, bySrc
}

// laneEff is the row's chip efficiency with the fitted lanes (or those carried from a sibling).
func laneEff(p Prepared, fits []LaneFit) (chips.Efficiency, error) {
	base := p.Chip.Efficiency
	base.Lanes = nil // the shipped lanes were fitted with every source: none of them may leak in
	e := WithLanes(map[string]chips.Efficiency{p.Chip.Name: base}, fits)
	return e[p.Chip.Name], nil
}

// LaneName is the lane a training row reports under: framework x dense/MoE x chip family.
func LaneName(p Prepared) string {
	fw := rowFramework(p)
	kind := "dense"
	if p.train != nil && p.train.m.Fingerprint.MoE != nil {
		kind = "MoE"
	}
	return fmt.Sprintf("%s %s %s", fw, kind, ChipFamily(p.Chip.Name))
}

// ChipFamily groups chips of one generation: Hopper, Blackwell, Blackwell Ultra (others by
// their own name: the kernel checks pool Hopper and Blackwell only).
func ChipFamily(chip string) string {
	switch {
	case strings.HasPrefix(chip, "H100"), strings.HasPrefix(chip, "H200"), strings.HasPrefix(chip, "H800"):
		return "Hopper"
	case strings.HasPrefix(chip, "GB300"), strings.HasPrefix(chip, "B300"):
		return "Blackwell Ultra"
	case strings.HasPrefix(chip, "GB200"), strings.HasPrefix(chip, "B200"):
		return "Blackwell"
	case strings.HasPrefix(chip, "MI3"):
		return "Instinct"
	}
	return chip
}

// EngineName is the summary group of an inference row: its engine (the measured rows without
// one are TensorRT-LLM's), dense or MoE, and chip family.
func EngineName(p Prepared) string {
	kind := "dense"
	if p.moe {
		kind = "MoE"
	}
	return engineOf(p.Row, p.Chip) + " " + kind + " " + ChipFamily(p.Chip.Name)
}

// engineOf is the serving engine a row ran on chip: the one it names, else the engine plan
// serve and analyze default to there (serve.Lane: vLLM on AMD, TensorRT-LLM elsewhere, where
// every shipped row without one is a trtllm-bench or gptSessionBenchmark run), so validate
// times a row as the planner would.
func engineOf(r Row, chip chips.Chip) string {
	if e := strings.ToLower(strings.TrimSpace(r.Engine)); e != "" {
		return e
	}
	return serve.Lane("", chip)
}

// engineOfNamed is engineOf for a row whose chip is known only by name (filters): the chip from
// the default database, an unknown chip as NVIDIA's.
func engineOfNamed(r Row) string {
	chip, _ := chips.Default().Lookup(r.Chip)
	return engineOf(r, chip)
}
