package calib

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

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
//
// B300 is the exception: its kernel figures (the GEMM fraction; the grouped GEMM is pooled over
// the generation anyway) come from B200, the HGX board of its power class
// (1,100 W and 1,000 W), scaled by the kernels, not from GB300 (1,400 W). A carried fraction is
// scaled by the kernel tables' chip-to-chip ratio (carriedGEMMFrac), which sees the silicon; the
// fits on the 25.11 runs say what the kernels miss: carried through the kernels, B200 and GB200
// land within 2% of each other's own fit, GB300 12-14% off either (TestKernelRatioCarriesTheLaneFit).
// The kernels are timed in short bursts; a training step runs for seconds at the clock its
// power budget sustains, so that residual is the system's, and B300's is nearer B200's.
// B300 has no fit rows; its held-out runs (Megatron-Bridge 26.02-26.06 DGX-B300) ran slower than
// GB300's figure predicted on every MoE model, which is what made us look.
var (
	SiliconFallback = map[string][]string{
		"GB300": {"B300", "GB200", "B200"}, "B300": {"B200", "GB300", "GB200"},
		"GB200": {"B200", "GB300", "B300"}, "B200": {"GB200", "B300", "GB300"},
		"H100-SXM": {"H100-96GB", "H200"}, "H100-96GB": {"H100-SXM", "H200"}, "H200": {"H100-SXM", "H100-96GB"},
		"H800": {"H100-SXM", "H100-96GB", "H200"}, "H20": {"H100-SXM", "H100-96GB", "H200"},
	}
	HostFallback = map[string][]string{
		"GB300": {"GB200"}, "GB200": {"GB300"},
		"B300": {"B200", "H100-SXM", "H200"}, "B200": {"B300", "H100-SXM", "H200"},
		"H100-SXM": {"H100-96GB", "H200", "B200", "B300"}, "H100-96GB": {"H100-SXM", "H200", "B200", "B300"},
		"H200": {"H100-SXM", "H100-96GB", "B200", "B300"},
		"H800": {"H100-SXM", "H100-96GB", "H200", "B200", "B300"},
		"H20":  {"H100-SXM", "H100-96GB", "H200", "B200", "B300"},
	}
)

// moeParam says whether a lane figure is the MoE layer's (fitted jointly over chips, fitMoEPool).
func moeParam(name string) bool { return name == "grouped_gemm_frac" || name == "moe_launch_us" }

// hostParam says whether a lane figure belongs to the host rather than the GPU.
func hostParam(name string) bool { return name == "moe_launch_us" }

// MaxMoELaunchUs bounds the fitted host time per MoE kernel (its parameter in laneFigures says why).
const MaxMoELaunchUs = 60

// MaxROCmMoELaunchUs bounds it on a ROCm host. MoELaunches counts the kernels of Megatron's
// fused MoE layer as Megatron-Bridge runs it (fused permutation, router and RoPE); AMD's
// published Primus baseline runs the layer unfused (moe_permute_fusion false in
// examples/moe_package/configs/MI355X/*-baseline.yaml, apply_rope_fusion false in
// primus/configs/models/megatron/deepseek_v2_base.yaml @b3699abf), several times the kernels
// per layer, each through HIP's launch path, and AMD names the MoE layers' device-to-host
// synchronizations as what stalls its launches (the moe_package README). The counted kernel
// there stands for about three, so the bound is three times the CUDA one plus its margin.
const MaxROCmMoELaunchUs = 200

// hostRuntime is the software path a host group issues kernels through: each runtime's MoE
// rows are pooled apart (fitLanes), so no figure is shared across them (HIP's launches are not
// CUDA's).
func hostRuntime(group string) string {
	if strings.Contains(group, "ROCm") {
		return "ROCm"
	}
	return "CUDA"
}

// laneParams are the figures a chip's lane fits on its dense rows: a precision's GEMM fraction
// where dense rows pin it, and for fsdp the attention kernels and the eager elementwise traffic.
// The MoE layer's figures are fitted jointly over the chips that share them (fitMoEPool).
func laneParams(fw string, rows []Prepared) []Param {
	var dtypes []string
	seen := map[string]bool{}
	for _, p := range rows {
		if d := strings.ToLower(p.Row.DType); !seen[d] && !isMoERow(p) {
			seen[d] = true
			dtypes = append(dtypes, d)
		}
	}
	return laneFigures(fw, dtypes, false)
}

// laneFigures are a lane's figures: the GEMM fraction of each of dtypes, the MoE layer's where
// moe (the grouped GEMM's fraction and the host's pace per MoE kernel), and fsdp's own.
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
			// MoE rows miss: Megatron-core's own eager MoE layer issues a kernel every 32-60 us
			// on an x86 host (calib/moe_host_h100.json, best to median steps over 8-128 local
			// experts; TestMeasuredHostPaceBracketsTheLaneFit holds the fit inside that band),
			// against 9.5-24 us for one tiny GEMM launched from PyTorch (the same file; NVIDIA's
			// cpu_overhead microbenchmark, dgxc-benchmarking @841f546, prints 11-18 us). The
			// H100 fit sat at the former 100 us bound, absorbing what the MoE rows missed.
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

// isMoERow says whether a training row trains a mixture-of-experts model.
func isMoERow(p Prepared) bool { return p.train != nil && p.train.m.Fingerprint.MoE != nil }

// LaneFit is one lane's fitted figures and its fit set: Rows, Sources, Before and After are the
// chip's dense rows its own figures were fitted to (a chip with MoE rows only: those rows, under
// the pooled figures); Pooled names the fit set of each figure fitted with other chips.
type LaneFit struct {
	Lane    LaneKey            `json:"lane"`
	Rows    int                `json:"rows"`
	Sources []string           `json:"sources"`
	Params  map[string]float64 `json:"params"`
	// Lane holds only the fitted figures, as chips.json's efficiency.lanes keeps them.
	Figures chips.Efficiency `json:"figures"`
	Before  float64          `json:"median_abs_err_before"`
	After   float64          `json:"median_abs_err_after"`
	// Pooled says, for each figure fitted jointly with other chips (the MoE layer's), its fit set.
	Pooled map[string]string `json:"pooled,omitempty"`
}

// FitLanes fits every lane the training rows name. Rows that are not training, or not
// predictable, are ignored.
func FitLanes(ps []Prepared) ([]LaneFit, error) {
	return fitLanes(ps, nil)
}

// fitLanes fits each lane's rows, reusing from reuse the fits of lanes whose rows are the same
// (leaving a source out refits only the lanes it had rows in). Two stages: each chip's figures
// on its dense rows, then the MoE layer's figures jointly over every chip's MoE rows (fitMoEPool).
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
		var rows []Prepared
		for _, p := range groups[k] {
			if !isMoERow(p) {
				rows = append(rows, p)
			}
		}
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
		lf := LaneFit{Lane: k, Rows: len(rows), Params: map[string]float64{}, Sources: sourcesOf(rows),
			Figures: chips.Efficiency{GEMMFrac: map[string]float64{}, Sources: map[string]string{}}}
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
	for _, fw := range layout.Frameworks {
		// one pool per host runtime: no MoE figure is shared across CUDA and ROCm chips (the
		// grouped GEMM goes by tensor-core generation, the host pace by runtime), so the pools
		// are independent, and leaving one vendor's source out reuses the other's fit
		moe := map[string][]Prepared{}
		for _, k := range keys {
			if k.Framework != fw {
				continue
			}
			for _, p := range groups[k] {
				if isMoERow(p) {
					rt := chipRuntime(p.Chip.Name)
					moe[rt] = append(moe[rt], p)
				}
			}
		}
		for _, rt := range sortedKeys(moe) {
			var err error
			if out, err = fitMoEPool(fw, moe[rt], out, reuse); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// chipRuntime is the software stack a chip's kernels are issued through (hostRuntime).
func chipRuntime(chip string) string { return hostRuntime(hostCPU(chip)) }

// fitsKey names the figures the lanes of fw on chips of runtime rt were fitted to (a pooled fit
// starts from them).
func fitsKey(fits []LaneFit, fw, rt string) string {
	var b strings.Builder
	for _, f := range fits {
		if f.Lane.Framework != fw || chipRuntime(f.Lane.Chip) != rt {
			continue
		}
		fmt.Fprintf(&b, "%s:", f.Lane)
		for _, k := range slices.Sorted(maps.Keys(f.Params)) {
			fmt.Fprintf(&b, "%s=%g,", k, f.Params[k])
		}
	}
	return b.String()
}

// sortedKeys is a map's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// medianErr is the median |error| of the rows idx names, each predicted under eff(i).
func medianErr(rows []Prepared, idx []int, eff func(int) chips.Efficiency) float64 {
	var es []float64
	for _, i := range idx {
		if pred, _, err := rows[i].Predict(eff(i)); err == nil {
			es = append(es, math.Abs(pred/rows[i].Row.Measured-1))
		}
	}
	sort.Float64s(es)
	return median(es)
}

// sourcesOf is the sorted sources of rows.
func sourcesOf(rows []Prepared) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range rows {
		if s := SourceOf(p.Row); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// The MoE layer's figures are shared by the chips that run it alike, and fitted jointly over
// their rows: the grouped GEMM's fraction by tensor-core generation (B200, GB200, B300 and GB300
// run BF16 and FP8 on the same fifth-generation tensor cores; Blackwell Ultra adds FP4 and
// softmax throughput, not grouped-GEMM rate), the host's pace per kernel by host CPU (x86 beside
// HGX boards, Grace in NVL72 racks). Fitted per chip instead, three or four rows each met two
// figures: B200's grouped GEMM came out at 0.21 and GB300's at 0.73 on the same silicon, each
// passing through its own rows and predicting the other chip's runs 1.5-2.4x off.
func tensorCores(chip string) string {
	if f := ChipFamily(chip); f != "Blackwell Ultra" {
		return f
	}
	return "Blackwell"
}

// hostCPU is the CPU that issues a chip's kernels in its systems, and the runtime it issues
// them through: an Instinct GPU's host is x86 too, but its kernels go through HIP and ROCm's
// PyTorch, whose launch path is not CUDA's.
func hostCPU(chip string) string {
	switch {
	case strings.HasPrefix(chip, "GB"):
		return "Grace"
	case ChipFamily(chip) == "Instinct":
		return "x86 (ROCm)"
	}
	return "x86"
}

// poolFigure is one jointly fitted MoE figure: the figure and the chips' group that shares it.
type poolFigure struct {
	Param
	group string
}

// fitMoEPool fits the MoE layer's figures over a framework's MoE rows of every chip, each row
// timed with its chip's lane as fitted on dense rows (fits, or carried from a sibling), and adds
// them to each chip's lane fit; with no more rows than figures nothing is fitted (the chips
// keep their default figures).
func fitMoEPool(fw string, rows []Prepared, fits []LaneFit, reuse map[string]LaneFit) ([]LaneFit, error) {
	if len(rows) == 0 {
		return fits, nil
	}
	moeFigs := laneFigures(fw, nil, true) // the MoE figures (and, for fsdp, the chip's own)
	var figs []poolFigure
	index := map[string]int{}
	at := make([][]int, len(rows)) // each row's figures, by index into figs
	for i, p := range rows {
		for _, pr := range moeFigs {
			if !moeParam(pr.Name) {
				continue
			}
			g := tensorCores(p.Chip.Name)
			if hostParam(pr.Name) {
				g = hostCPU(p.Chip.Name)
			}
			key := pr.Name + "@" + g
			j, ok := index[key]
			if !ok {
				j = len(figs)
				index[key] = j
				if hostParam(pr.Name) && hostRuntime(g) == "ROCm" {
					pr.Hi = MaxROCmMoELaunchUs
				}
				figs = append(figs, poolFigure{pr, g})
			}
			at[i] = append(at[i], j)
		}
	}
	if len(rows) <= len(figs) {
		return fits, nil
	}
	// each row's efficiency: its chip's lane from the dense fits, flattened
	bases := make([]chips.Efficiency, len(rows))
	for i, p := range rows {
		e, err := laneEff(p, fits)
		if err != nil {
			return nil, err
		}
		b := e.Lane(fw)
		b.Lanes = nil
		bases[i] = b
	}
	effAt := func(i int, x []float64) chips.Efficiency {
		e := clone(bases[i])
		for _, j := range at[i] {
			figs[j].set(&e, x[j])
		}
		return e
	}
	base := func(i int) chips.Efficiency { return bases[i] }
	key := "moe pool " + fw + "\x00" + rowSet(LaneKey{fw, ""}, rows) + "\x00" + fitsKey(fits, fw, chipRuntime(rows[0].Chip.Name))
	var x []float64
	tiedTo := map[int]int{}          // a figure too few rows time, and the figure it takes instead
	crossVal := map[int][2]float64{} // a figure shared because its rows left out say so: their errors own, shared
	if f, ok := reuse[key]; ok {
		for _, pf := range figs {
			x = append(x, f.Params[pf.Name+"@"+pf.group])
		}
		for j, pf := range figs {
			if t, ok := f.Params["tied "+pf.Name+"@"+pf.group]; ok {
				tiedTo[j] = int(t)
			}
			if own, ok := f.Params["cv own "+pf.Name+"@"+pf.group]; ok {
				crossVal[j] = [2]float64{own, f.Params["cv shared "+pf.Name+"@"+pf.group]}
			}
		}
	} else {
		// the rows are predicted side by side, one per core: each loss is a few dozen training
		// steps timed, and a fit evaluates it some ten thousand times
		// a row's |log error| under figures x: what every fit and check here scores
		rowErr := func(i int, x []float64) float64 {
			pred, _, err := rows[i].Predict(effAt(i, x))
			if err != nil || !(pred > 0) || math.IsInf(pred, 0) {
				return math.Inf(1)
			}
			return math.Abs(math.Log(pred / rows[i].Row.Measured))
		}
		loss := func(x []float64) float64 {
			errs := make([]float64, len(rows))
			var wg sync.WaitGroup
			next := atomic.Int64{}
			for range max(1, min(runtime.GOMAXPROCS(0), len(rows))) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := int(next.Add(1) - 1); i < len(rows); i = int(next.Add(1) - 1) {
						errs[i] = rowErr(i, x)
					}
				}()
			}
			wg.Wait()
			var sum float64
			for _, e := range errs {
				sum += e
			}
			return sum / float64(len(rows))
		}
		// the free figures (tied ones follow the figure they are tied to)
		fit := func() []float64 {
			var free []int
			for j := range figs {
				if _, ok := tiedTo[j]; !ok {
					free = append(free, j)
				}
			}
			expand := func(y []float64) []float64 {
				out := make([]float64, len(figs))
				for n, j := range free {
					out[j] = y[n]
				}
				for j, t := range tiedTo {
					out[j] = out[t]
				}
				return out
			}
			lo, hi := make([]float64, len(free)), make([]float64, len(free))
			for n, j := range free {
				lo[n], hi[n] = figs[j].Lo, figs[j].Hi
			}
			y, _ := descendVector(func(y []float64) float64 { return loss(expand(y)) }, lo, hi, boxPoints(lo, hi, 0, 0.3, 0.7))
			return expand(y)
		}
		x = fit()
		// A figure is fitted only where at least two rows time it: one that moves fewer rows'
		// predictions (Hopper's grouped GEMM: of its three rows one is host-bound and one
		// all-to-all-bound) passes through that row, a constant per row. It takes the figure of
		// the same name fitted on the group that most rows time, and the rest are refitted.
		timed := make([]int, len(figs))
		for j := range figs {
			up := slices.Clone(x)
			up[j] = math.Min(figs[j].Hi, x[j]*1.25)
			if up[j] == x[j] {
				up[j] = math.Max(figs[j].Lo, x[j]*0.8)
			}
			for i := range rows {
				if !slices.Contains(at[i], j) {
					continue
				}
				a, _, err1 := rows[i].Predict(effAt(i, x))
				b, _, err2 := rows[i].Predict(effAt(i, up))
				if err1 == nil && err2 == nil && a > 0 && b > 0 && math.Abs(math.Log(b/a)) > 0.02 {
					timed[j]++
				}
			}
		}
		for j, pf := range figs {
			if timed[j] >= 2 {
				continue
			}
			donor := -1
			for k, pk := range figs {
				if k != j && pk.Name == pf.Name && timed[k] >= 2 && (donor < 0 || timed[k] > timed[donor]) {
					donor = k
				}
			}
			if donor >= 0 {
				tiedTo[j] = donor
			}
		}
		if len(tiedTo) > 0 {
			x = fit()
		}
		// A figure fitted on its own group is kept only where it predicts that group's rows
		// left out better than the same-name figure of a larger group: each row is left out in
		// turn, the figure refitted on the group's other rows (the rest as fitted), and the row
		// predicted; where the larger group's figure predicts them as well or better, the group
		// shares it and the rest are refitted. Three rows pulling three ways (Hopper's grouped
		// GEMM: a host-bound row, an all-to-all-bound one, and one of GPT-OSS-120B, which every
		// chip runs 1.2-1.6x slower than predicted) otherwise set a figure by whichever sits in
		// the middle.
		order := make([]int, len(figs))
		groupRows := make([][]int, len(figs)) // each figure's rows
		for j := range figs {
			order[j] = j
			for i := range rows {
				if slices.Contains(at[i], j) {
					groupRows[j] = append(groupRows[j], i)
				}
			}
		}
		sort.SliceStable(order, func(a, b int) bool { return len(groupRows[order[a]]) < len(groupRows[order[b]]) })
		cvTied := false
		for _, j := range order {
			if _, ok := tiedTo[j]; ok {
				continue
			}
			mine := groupRows[j]
			donor := -1
			for k, pk := range figs {
				if _, tied := tiedTo[k]; k == j || tied || pk.Name != figs[j].Name || len(groupRows[k]) <= len(mine) {
					continue
				}
				if donor < 0 || len(groupRows[k]) > len(groupRows[donor]) {
					donor = k
				}
			}
			if donor < 0 || len(mine) < 2 {
				continue
			}
			var own, shared []float64
			for _, out := range mine {
				y := slices.Clone(x)
				y[j] = goldenLog(figs[j].Lo, figs[j].Hi, func(v float64) float64 {
					z := slices.Clone(x)
					z[j] = v
					var sum float64
					for _, i := range mine {
						if i != out {
							sum += rowErr(i, z)
						}
					}
					return sum
				})
				own = append(own, rowErr(out, y))
				z := slices.Clone(x)
				z[j] = x[donor]
				shared = append(shared, rowErr(out, z))
			}
			sort.Float64s(own)
			sort.Float64s(shared)
			if mo, ms := median(own), median(shared); ms <= mo {
				tiedTo[j], crossVal[j], cvTied = donor, [2]float64{mo, ms}, true
			}
		}
		if cvTied {
			x = fit()
		}
		if reuse != nil {
			f := LaneFit{Params: map[string]float64{}}
			for j, pf := range figs {
				f.Params[pf.Name+"@"+pf.group] = x[j]
			}
			for j, t := range tiedTo {
				f.Params["tied "+figs[j].Name+"@"+figs[j].group] = float64(t)
			}
			for j, cv := range crossVal {
				f.Params["cv own "+figs[j].Name+"@"+figs[j].group] = cv[0]
				f.Params["cv shared "+figs[j].Name+"@"+figs[j].group] = cv[1]
			}
			reuse[key] = f
		}
	}
	fitted := func(i int) chips.Efficiency { return effAt(i, x) }
	// each figure's fit set, for its source
	for j, pf := range figs {
		var set []Prepared
		var idx []int
		chipSet := map[string]bool{}
		for i, p := range rows {
			if slices.Contains(at[i], j) {
				set, idx = append(set, p), append(idx, i)
				chipSet[p.Chip.Name] = true
			}
		}
		before, after := medianErr(rows, idx, base), medianErr(rows, idx, fitted)
		src := fmt.Sprintf("fitted by mrep calibrate --lanes (mean |log error|) jointly to the %d %s MoE training rows on %s chips (%s: %s), with the other MoE figures of their chips: median |err| %.1f%% before, %.1f%% after",
			len(set), fw, pf.group, strings.Join(sortedKeys(chipSet), ", "), strings.Join(sourcesOf(set), "; "), 100*before, 100*after)
		if t, ok := tiedTo[j]; ok {
			why := "fewer than two of the %d %s MoE training rows on %s chips (%s: %s) are timed by it, so it is not fitted on them"
			args := []any{len(set), fw, pf.group, strings.Join(sortedKeys(chipSet), ", "), strings.Join(sourcesOf(set), "; ")}
			if cv, ok := crossVal[j]; ok {
				why = "fitted on the %d %s MoE training rows on %s chips (%s: %s) it predicts each of them left out worse (median |log error| %.0f%%) than the %s figure does (%.0f%%)"
				args = append(args, 100*cv[0], figs[t].group, 100*cv[1])
			}
			src = fmt.Sprintf("shared with %s chips: "+why+"; the %s figure fitted jointly with their other MoE figures: median |err| on them %.1f%% before, %.1f%% after",
				append(append([]any{figs[t].group}, args...), figs[t].group, 100*before, 100*after)...)
		}
		for chip := range chipSet {
			k := LaneKey{fw, chip}
			n := slices.IndexFunc(fits, func(f LaneFit) bool { return f.Lane == k })
			if n < 0 {
				// a chip with MoE rows only: its lane is the pooled figures, summarised on its rows
				lf := LaneFit{Lane: k, Params: map[string]float64{}, Figures: chips.Efficiency{Sources: map[string]string{}}}
				var mine []int
				for i, p := range rows {
					if p.Chip.Name == chip {
						mine = append(mine, i)
					}
				}
				lf.Rows = len(mine)
				lf.Before, lf.After = medianErr(rows, mine, base), medianErr(rows, mine, fitted)
				lf.Sources = sourcesOf(slices.DeleteFunc(slices.Clone(rows), func(p Prepared) bool { return p.Chip.Name != chip }))
				fits = append(fits, lf)
				n = len(fits) - 1
			}
			f := &fits[n]
			f.Params = maps.Clone(f.Params)
			f.Params[pf.Name] = x[j]
			pf.set(&f.Figures, x[j])
			if f.Pooled == nil {
				f.Pooled = map[string]string{}
			} else {
				f.Pooled = maps.Clone(f.Pooled)
			}
			f.Pooled[pf.Name] = src
		}
	}
	sort.Slice(fits, func(i, j int) bool { return fits[i].Lane.String() < fits[j].Lane.String() })
	return fits, nil
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
					if src, ok := own.Pooled[pn]; ok {
						lane.Sources[sourceKey(pn)] = src
					}
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
							scaledBy := ""
							if d, isGEMM := strings.CutPrefix(pn, "gemm_frac."); isGEMM {
								v, scaledBy = carriedGEMMFrac(name, other, d, v)
							}
							pr.set(&lane, v)
							if _, mine := lane.Sources[sourceKey(pn)]; !mine || !strings.HasPrefix(lane.Sources[sourceKey(pn)], "fitted") {
								lane.Sources[sourceKey(pn)] = fmt.Sprintf("carried from %s (%s; no %s rows for it on %s)%s: %s", other, why, fw, name, scaledBy, f.source())
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
	return fmt.Sprintf("fitted by mrep calibrate --lanes (mean |log error|) to the %d %s dense training rows on %s (%s): median |err| %.1f%% before, %.1f%% after",
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
	case strings.HasPrefix(chip, "H100"), strings.HasPrefix(chip, "H200"), strings.HasPrefix(chip, "H800"), chip == "H20":
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
