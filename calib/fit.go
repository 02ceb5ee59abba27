package calib

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/mrep-dev/mrep/chips"
)

// Param is one efficiency figure a fit may move, with its physical range.
type Param struct {
	Name   string
	Lo, Hi float64
	get    func(e *chips.Efficiency) float64
	set    func(e *chips.Efficiency, v float64)
}

// DefaultFit are the figures `mrep calibrate` fits unless told otherwise: the GEMM ceiling of
// each precision the rows use, the launch latency and the per-step overhead. HBM and link
// fractions keep their measured sources unless named.
var DefaultFit = []string{"gemm_frac", "host_launch_us", "step_overhead_us"}

// FitParams resolves names (gemm_frac expands to gemm_frac.<dtype> for each dtype the rows
// use) to parameters.
func FitParams(names []string, ps []Prepared) ([]Param, error) {
	var out []Param
	frac := func(name string, lo, hi float64, f func(e *chips.Efficiency) *float64) Param {
		return Param{Name: name, Lo: lo, Hi: hi, get: func(e *chips.Efficiency) float64 { return *f(e) },
			set: func(e *chips.Efficiency, v float64) { *f(e) = v }}
	}
	for _, n := range names {
		switch n {
		case "gemm_frac":
			seen := map[string]bool{}
			for _, p := range ps {
				if d := strings.ToLower(p.Row.DType); p.Skip == nil && !seen[d] {
					seen[d] = true
					out = append(out, gemmParam(d))
				}
			}
		case "hbm_frac":
			out = append(out, frac(n, 0.3, 1, func(e *chips.Efficiency) *float64 { return &e.HBMFrac }))
		case "attn_frac":
			out = append(out, frac(n, 0.02, 1, func(e *chips.Efficiency) *float64 { return &e.AttnFrac }))
		case "grouped_gemm_frac":
			out = append(out, frac(n, 0.2, 1, func(e *chips.Efficiency) *float64 { return &e.GroupedGEMMFrac }))
		case "moe_hbm_frac":
			out = append(out, frac(n, 0.1, 1, func(e *chips.Efficiency) *float64 { return &e.MoEHBMFrac }))
		case "kernel_latency_us":
			out = append(out, frac(n, 0, 50, func(e *chips.Efficiency) *float64 { return &e.KernelLatencyUs }))
		case "host_launch_us":
			out = append(out, frac(n, 0, 100, func(e *chips.Efficiency) *float64 { return &e.HostLaunchUs }))
		case "step_overhead_us":
			out = append(out, frac(n, 0, 20000, func(e *chips.Efficiency) *float64 { return &e.StepOverheadUs }))
		case "pp_step_us":
			out = append(out, frac(n, 0, 50000, func(e *chips.Efficiency) *float64 { return &e.PPStepUs }))
		case "scale_up_frac":
			out = append(out, frac(n, 0.1, 1, func(e *chips.Efficiency) *float64 { return &e.ScaleUpFrac }))
		case "seq_overhead_us":
			out = append(out, frac(n, 0, 100, func(e *chips.Efficiency) *float64 { return &e.SeqOverheadUs }))
		case "request_overhead_us":
			out = append(out, frac(n, 0, 500000, func(e *chips.Efficiency) *float64 { return &e.RequestOverheadUs }))
		case "scale_up_latency_us":
			out = append(out, frac(n, 0, 200, func(e *chips.Efficiency) *float64 { return &e.ScaleUpLatencyUs }))
		default:
			if d, ok := strings.CutPrefix(n, "gemm_frac."); ok {
				out = append(out, gemmParam(d))
				continue
			}
			return nil, fmt.Errorf("--fit %q: want gemm_frac[.DTYPE], grouped_gemm_frac, hbm_frac, moe_hbm_frac, attn_frac, kernel_latency_us, host_launch_us, step_overhead_us, pp_step_us, scale_up_frac, scale_up_latency_us, seq_overhead_us or request_overhead_us", n)
		}
	}
	return out, nil
}

func gemmParam(dtype string) Param {
	return Param{Name: "gemm_frac." + dtype, Lo: 0.05, Hi: 1,
		get: func(e *chips.Efficiency) float64 {
			if v, ok := e.GEMMFrac[dtype]; ok {
				return v
			}
			return e.GEMMFrac["bf16"]
		},
		set: func(e *chips.Efficiency, v float64) {
			m := make(map[string]float64, len(e.GEMMFrac)+1)
			for k, x := range e.GEMMFrac {
				m[k] = x
			}
			m[dtype] = v
			e.GEMMFrac = m
		}}
}

// Loss is the mean squared log error of the predictable rows under eff: symmetric in over-
// and under-prediction, and independent of the rows' units.
func Loss(ps []Prepared, eff chips.Efficiency) (float64, error) {
	return meanLogError(ps, eff, func(l float64) float64 { return l * l })
}

// meanLogError is the mean of f(log(predicted / measured)) over the predictable rows (+Inf
// when a prediction is not a positive number).
func meanLogError(ps []Prepared, eff chips.Efficiency, f func(float64) float64) (float64, error) {
	var sum float64
	var n int
	for _, p := range ps {
		if p.Skip != nil {
			continue
		}
		pred, _, err := p.Predict(eff)
		if err != nil {
			return 0, err
		}
		if !(pred > 0) || math.IsInf(pred, 0) {
			return math.Inf(1), nil
		}
		sum += f(math.Log(pred / p.Row.Measured))
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("no predictable rows to fit")
	}
	return sum / float64(n), nil
}

// Fit moves params to minimize Loss from base: coordinate descent, a golden-section search
// per parameter within its range, repeated until no parameter moves (at most 6 sweeps).
func Fit(ps []Prepared, base chips.Efficiency, params []Param) (chips.Efficiency, float64, error) {
	return fitWith(ps, base, params, Loss)
}

// AbsLoss is the mean absolute log error: a fit to it follows the bulk of the rows, not the
// worst one (the training lanes fit to it; one row a mechanism misses does not drag a lane).
func AbsLoss(ps []Prepared, eff chips.Efficiency) (float64, error) {
	return meanLogError(ps, eff, math.Abs)
}

func fitWith(ps []Prepared, base chips.Efficiency, params []Param, loss func([]Prepared, chips.Efficiency) (float64, error)) (chips.Efficiency, float64, error) {
	// Coordinate descent lands in the valley its first coordinate leads to when figures trade
	// off (a fixed step cost against a per-sequence one): descendVector descends from every
	// rotation of the order, forwards and backwards, and keeps the lowest loss, so the result
	// does not depend on how --fit was spelled.
	best, err := loss(ps, clone(base))
	if err != nil {
		return clone(base), 0, err
	}
	x0 := make([]float64, len(params))
	lo, hi := make([]float64, len(params)), make([]float64, len(params))
	for i, pr := range params {
		x0[i], lo[i], hi[i] = pr.get(&base), pr.Lo, pr.Hi
	}
	// a figure the descent has not moved keeps the base's own setting (a precision without a
	// GEMM fraction of its own reads the bf16 one; setting that would change what it reads)
	at := func(x []float64) chips.Efficiency {
		e := clone(base)
		for i, pr := range params {
			if x[i] != x0[i] {
				pr.set(&e, x[i])
			}
		}
		return e
	}
	if len(params) == 0 {
		return at(x0), best, nil
	}
	x, best := descendVector(func(x []float64) float64 {
		l, err := loss(ps, at(x))
		if err != nil {
			return math.Inf(1)
		}
		return l
	}, lo, hi, [][]float64{x0})
	return at(x), best, nil
}

// descendVector minimizes loss over a box by coordinate descent (a golden-section search per
// coordinate within the box, at most 6 sweeps, a coordinate kept only where the loss falls)
// from each of inits, over every rotation of the coordinates forwards and backwards, and
// returns the best point and its loss.
func descendVector(loss func([]float64) float64, lo, hi []float64, inits [][]float64) ([]float64, float64) {
	n := len(lo)
	var best []float64
	bestL := math.Inf(1)
	for _, init := range inits {
		for rot := 0; rot < n; rot++ {
			for _, dir := range []int{1, -1} {
				if n < 2 && dir < 0 {
					continue
				}
				x := slices.Clone(init)
				l := loss(x)
				for sweep := 0; sweep < 6; sweep++ {
					moved := false
					for i := 0; i < n; i++ {
						j := ((rot+dir*i)%n + n) % n
						f := func(v float64) float64 {
							y := slices.Clone(x)
							y[j] = v
							return loss(y)
						}
						v := golden(f, lo[j], hi[j], goldenIters)
						if lv := f(v); lv < l-1e-12 {
							if math.Abs(v-x[j]) > 1e-6*(hi[j]-lo[j]) {
								moved = true
							}
							x[j], l = v, lv
						}
					}
					if !moved {
						break
					}
				}
				if best == nil || l < bestL-1e-12 {
					best, bestL = x, l
				}
			}
		}
	}
	return best, bestL
}

// boxPoints are the points of the box lo..hi at each fraction of its extent.
func boxPoints(lo, hi []float64, fracs ...float64) [][]float64 {
	var out [][]float64
	for _, f := range fracs {
		x := make([]float64, len(lo))
		for j := range x {
			x[j] = lo[j] + f*(hi[j]-lo[j])
		}
		out = append(out, x)
	}
	return out
}

func golden(f func(float64) float64, lo, hi float64, iters int) float64 {
	const r = 0.6180339887498949
	a, b := lo, hi
	c, d := b-r*(b-a), a+r*(b-a)
	fc, fd := f(c), f(d)
	for i := 0; i < iters; i++ {
		if fc < fd {
			b, d, fd = d, c, fc
			c = b - r*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + r*(b-a)
			fd = f(d)
		}
	}
	return (a + b) / 2
}

func clone(e chips.Efficiency) chips.Efficiency {
	out := e
	out.GEMMFrac = map[string]float64{}
	for k, v := range e.GEMMFrac {
		out.GEMMFrac[k] = v
	}
	out.GEMMK0 = maps.Clone(e.GEMMK0)
	out.Sources = map[string]string{}
	for k, v := range e.Sources {
		out.Sources[k] = v
	}
	return out
}

// ChipFit is one chip's calibration: the fitted figures, and errors before, after and
// leave-one-out (each row predicted by a fit on the others: does the fit generalise?).
type ChipFit struct {
	Chip   string             `json:"chip"`
	Rows   int                `json:"rows"`
	Params map[string]float64 `json:"params"`
	// Shipped are the parameters' figures before the fit (the chip's, or its lane's).
	Shipped     map[string]float64 `json:"shipped"`
	Before      Report             `json:"before"`
	After       Report             `json:"after"`
	LeaveOneOut []Result           `json:"leave_one_out"`
	// LeaveOut is the grouping LeaveOneOut held out together ("model", "source"; "": rows).
	LeaveOut   string           `json:"leave_out,omitempty"`
	Efficiency chips.Efficiency `json:"efficiency"`
	// Lane, when the fit was made on top of a lane (CalibrateOptions.Lane), names it, and
	// LaneFigures are the fitted figures alone with their sources: what goes into that lane.
	Lane        string            `json:"lane,omitempty"`
	LaneFigures *chips.Efficiency `json:"lane_figures,omitempty"`
}

// Calibrate fits each chip the rows name, separately. source describes the rows for the
// fitted figures' sources.
func Calibrate(ps []Prepared, names []string, source string) ([]ChipFit, error) {
	return CalibrateWith(ps, names, source, CalibrateOptions{})
}

// CalibrateOptions: AbsLoss fits the mean absolute log error (the bulk of the rows) instead of
// the mean squared (the worst rows); MaxLeaveOneOut bounds the rows refitted one by one (0: 100;
// beyond it the leave-one-out is skipped: `mrep validate` holds sources out instead).
type CalibrateOptions struct {
	AbsLoss        bool
	MaxLeaveOneOut int
	// LeaveOut, when set, names each row's group ("model", "source"): the check refits without
	// a group's rows and predicts them, one group at a time, instead of one row at a time (a
	// row's neighbours in the same table share its run and would flatter the check).
	LeaveOut func(Prepared) string
	// LeaveOutName is what the groups are, for the report ("model").
	LeaveOutName string
	// Lane fits on top of the chip's figures in that lane (a serving engine's kernel figures,
	// say) instead of the chip's own, and returns the fitted figures for that lane: how an
	// engine's host overheads are fitted with its measured kernels in place.
	Lane string
}

// GroupBy is the row grouping a leave-out check by name holds out together: model, source
// (the published table), chip; "" and "row" are one row at a time (nil).
func GroupBy(name string) (func(Prepared) string, error) {
	switch name {
	case "", "row":
		return nil, nil
	case "model":
		return func(p Prepared) string { return p.Row.Model }, nil
	case "source":
		return func(p Prepared) string { return SourceOf(p.Row) }, nil
	case "chip":
		return func(p Prepared) string { return p.Chip.Name }, nil
	case "run":
		// the figures of one benchmark run (its TTFT, TPOT and throughput at each statistic)
		// leave together: one run's rows are one measurement, not several
		return func(p Prepared) string { return RunOf(p.Row) }, nil
	}
	return nil, fmt.Errorf("leave-out %q: want row, run, model, source or chip", name)
}

// CalibrateWith is Calibrate with options.
func CalibrateWith(ps []Prepared, names []string, source string, o CalibrateOptions) ([]ChipFit, error) {
	loss := Loss
	if o.AbsLoss {
		loss = AbsLoss
	}
	if o.MaxLeaveOneOut <= 0 {
		o.MaxLeaveOneOut = 100
	}
	byChip := map[string][]Prepared{}
	var order []string
	for _, p := range ps {
		if p.Skip != nil {
			continue
		}
		if _, ok := byChip[p.Chip.Name]; !ok {
			order = append(order, p.Chip.Name)
		}
		byChip[p.Chip.Name] = append(byChip[p.Chip.Name], p)
	}
	sort.Strings(order)
	if len(order) == 0 {
		return nil, fmt.Errorf("no predictable rows to fit")
	}
	var out []ChipFit
	for _, chip := range order {
		rows := byChip[chip]
		params, err := FitParams(names, rows)
		if err != nil {
			return nil, err
		}
		before, err := Validate(rows, nil)
		if err != nil {
			return nil, err
		}
		if err := before.CheckPossible(); err != nil {
			return nil, err // a fit would bend the figures toward a run that cannot be
		}
		base := rows[0].Chip.Efficiency
		if o.Lane != "" {
			base = base.Lane(o.Lane) // the lane's figures in place; the fitted ones go into it
		}
		base.Lanes = nil // the chip's own figures are fitted; a lane would hide them
		eff, _, err := fitWith(rows, base, params, loss)
		if err != nil {
			return nil, fmt.Errorf("fit %s: %w", chip, err)
		}
		cf := ChipFit{Chip: chip, Rows: len(rows), Params: map[string]float64{}, Shipped: map[string]float64{}}
		for _, pr := range params {
			v := pr.get(&eff)
			cf.Params[pr.Name] = v
			cf.Shipped[pr.Name] = pr.get(&base)
			key := pr.Name
			if strings.HasPrefix(key, "gemm_frac.") {
				key = "gemm_frac"
			}
			eff.Sources[key] = fmt.Sprintf("fitted by mrep calibrate to %d rows of %s", len(rows), source)
			if o.AbsLoss {
				eff.Sources[key] += " (mean |log error|)"
			}
		}
		cf.Efficiency = eff
		if o.Lane != "" {
			lane := chips.Efficiency{Sources: map[string]string{}}
			for _, pr := range params {
				pr.set(&lane, pr.get(&eff))
				key := pr.Name
				if strings.HasPrefix(key, "gemm_frac.") {
					key = "gemm_frac"
				}
				lane.Sources[key] = eff.Sources[key] + fmt.Sprintf(" (on top of the chip's %s lane)", o.Lane)
			}
			cf.Lane, cf.LaneFigures = o.Lane, &lane
		}
		cf.Before = before
		if cf.After, err = Validate(rows, map[string]chips.Efficiency{chip: eff}); err != nil {
			return nil, err
		}
		if o.LeaveOut != nil {
			cf.LeaveOut = o.LeaveOutName
			if cf.LeaveOneOut, err = leaveGroupsOut(rows, base, params, loss, chip, o.LeaveOut); err != nil {
				return nil, err
			}
		} else if len(rows) > len(params) && len(rows) <= o.MaxLeaveOneOut {
			for i := range rows {
				rest := append(append([]Prepared{}, rows[:i]...), rows[i+1:]...)
				e, _, err := fitWith(rest, base, params, loss)
				if err != nil {
					return nil, err
				}
				rep, err := Validate(rows[i:i+1], map[string]chips.Efficiency{chip: e})
				if err != nil {
					return nil, err
				}
				cf.LeaveOneOut = append(cf.LeaveOneOut, rep.Rows[0])
			}
		}
		out = append(out, cf)
	}
	return out, nil
}

// goldenIters is each parameter's golden-section search length: 0.618^28 of its range.
var goldenIters = 28

// leaveGroupsOut predicts each group's rows with the figures refitted to the other groups'
// rows (a group alone on its chip is not predicted: nothing would be left to fit).
func leaveGroupsOut(rows []Prepared, base chips.Efficiency, params []Param, loss func([]Prepared, chips.Efficiency) (float64, error), chip string, group func(Prepared) string) ([]Result, error) {
	var order []string
	seen := map[string]bool{}
	for _, p := range rows {
		if g := group(p); !seen[g] {
			seen[g] = true
			order = append(order, g)
		}
	}
	if len(order) < 2 {
		return nil, nil
	}
	// each group's refit is independent: they run side by side, one per core, and are
	// gathered in the groups' order
	per := make([][]Result, len(order))
	errs := make([]error, len(order))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, g := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var rest, held []Prepared
			for _, p := range rows {
				if group(p) == g {
					held = append(held, p)
				} else {
					rest = append(rest, p)
				}
			}
			e, _, err := fitWith(rest, base, params, loss)
			if err != nil {
				errs[i] = fmt.Errorf("fit %s without %s: %w", chip, g, err)
				return
			}
			rep, err := Validate(held, map[string]chips.Efficiency{chip: e})
			if err != nil {
				errs[i] = err
				return
			}
			per[i] = rep.Rows
		}()
	}
	wg.Wait()
	var out []Result
	for i := range order {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out = append(out, per[i]...)
	}
	return out, nil
}

// RunOf names the measured run a row is a figure of: the row without its figure (metric,
// statistic, value), so a run's TTFT, TPOT and throughput rows share it.
func RunOf(r Row) string {
	r.ID, r.Metric, r.Stat, r.Measured, r.Unit, r.Note = "", "", "", 0, "", ""
	b, _ := json.Marshal(r)
	return string(b)
}
