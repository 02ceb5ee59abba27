package render

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/calib"
)

func value(v float64, unit string) string {
	if unit == "s" {
		return fmt.Sprintf("%.4g ms", v*1e3)
	}
	return fmt.Sprintf("%s %s", Comma(int64(v+0.5)), unit)
}

// WriteValidation renders `mrep validate`: per row measured, predicted, ratio and error; per
// phase the median and worst |error|; rows not expressible yet with the reason.
func WriteValidation(out io.Writer, rep calib.Report) error {
	w := &errWriter{w: out}
	var rows, skipped, impossible, refits, known, unused [][]string
	var refitErrs []float64
	for _, r := range rep.Rows {
		if r.Skipped != "" {
			skipped = append(skipped, []string{code(r.ID), r.Phase, value(r.Measured, r.Unit), r.Skipped})
			continue
		}
		if r.Impossible != "" {
			impossible = append(impossible, []string{code(r.ID), code(r.Model), code(r.Chip), value(r.Measured, r.Unit), value(r.Roofline, r.Unit)})
			continue
		}
		if r.KnownIssue != "" {
			known = append(known, []string{code(r.ID), code(r.Model), code(r.Chip), value(r.Measured, r.Unit), value(r.Predicted, r.Unit),
				fmt.Sprintf("%+.1f%%", 100*r.Err()), mdName(r.KnownIssue)})
			continue
		}
		flag := ""
		if r.FasterThanPhysics {
			flag = " ⚠ faster than the roofline"
		}
		switch f := r.FitsWith; {
		case f != nil:
			refits = append(refits, []string{code(r.ID), code(r.Model), code(r.Chip), value(r.Measured, r.Unit), value(r.AsStated, r.Unit),
				fmt.Sprintf("%+.1f%%", 100*(r.AsStated/r.Measured-1)), mdName(f.Setting), value(f.Predicted, r.Unit), fmt.Sprintf("%+.1f%%", 100*(f.Ratio-1))})
			refitErrs = append(refitErrs, math.Abs(f.Ratio-1))
			flag += " (stated layout does not fit: under the setting below)"
		case !r.Fits && r.Phase == "training":
			why := "none of the pipeline split, activation offload or recompute fits"
			if r.Lacks != "" {
				why = "as stated: mrep lacks " + mdName(r.Lacks)
			}
			refits = append(refits, []string{code(r.ID), code(r.Model), code(r.Chip), value(r.Measured, r.Unit), value(r.Predicted, r.Unit),
				fmt.Sprintf("%+.1f%%", 100*r.Err()), why, "—", "—"})
		}
		if !r.Fits {
			flag += " ⚠ does not fit in memory"
		}
		if r.UnusedPreset != "" {
			unused = append(unused, []string{code(r.ID), code(r.Model), code(r.Chip), mdName(r.UnusedPreset), fmt.Sprintf("%+.1f%%", 100*r.Err())})
		}
		rows = append(rows, []string{code(r.ID), r.Phase, code(r.Model), code(r.Chip), value(r.Measured, r.Unit), value(r.Predicted, r.Unit),
			fmt.Sprintf("%.3f", r.Ratio), fmt.Sprintf("%+.1f%%", 100*r.Err()) + flag, value(r.Roofline, r.Unit)})
	}
	w.printf("# Predictions against measured runs\n\n")
	if len(rows) > 0 {
		table(w, []string{"Row", "Phase", "Model", "Chip", "Measured", "Predicted", "Ratio", "Error", "Roofline bound"}, "lllllrrrr", rows)
	}
	w.printf("\n")
	if len(impossible) > 0 {
		w.printf("**Measured faster than physics allows** (%d rows, left out of every error below): each measurement beats the ideal roofline of its own configuration, every FLOP at peak and every byte at full bandwidth, so the row's tokens, GPUs, chip or figure is wrong.\n\n", len(impossible))
		table(w, []string{"Row", "Model", "Chip", "Measured", "Roofline bound"}, "lllrr", impossible)
		w.printf("\n")
	}
	if len(known) > 0 {
		w.printf("**Runs their source says hit a defect of the stack** (%d rows, predicted but left out of every error below): the publisher names a regression in the release the run used and says a later one fixes it, so no model of the stack working as designed should reproduce the time.\n\n", len(known))
		table(w, []string{"Row", "Model", "Chip", "Measured", "Predicted", "Error", "The source's statement"}, "lllrrrl", known)
		w.printf("\n")
	}
	if len(refits) > 0 {
		// a time that holds only under a configuration the memory model says cannot run is no
		// prediction: name the setting mrep needs, and predict under it
		w.printf("**Training rows that do not fit in memory as stated** (%d): each is predicted, fitted and counted above under the fastest setting its framework offers that fits (the source does not state one: pipeline split, activation offload, recompute), or as stated where none fits or the run used a mechanism mrep lacks", len(refits))
		if len(refitErrs) > 0 {
			sort.Float64s(refitErrs)
			n := len(refitErrs)
			med := (refitErrs[(n-1)/2] + refitErrs[n/2]) / 2
			w.printf("; %d fit so, median abs error under it %.1f%%, worst %.1f%%", n, 100*med, 100*refitErrs[n-1])
		}
		w.printf(".\n\n")
		table(w, []string{"Row", "Model", "Chip", "Measured", "Predicted as stated", "Error as stated", "Setting that fits", "Predicted under it", "Error under it"}, "lllrrrlrr", refits)
		w.printf("\n")
	}
	if len(unused) > 0 {
		// the source states two layouts for one run; the one that fits is predicted, and the
		// other is shown, so a reader weighing the row's error knows it
		w.printf("**Rows whose release preset states another layout** (%d): each fits as its table states and is predicted so; the preset it cites (as flags; its file and commit) may be what ran.\n\n", len(unused))
		table(w, []string{"Row", "Model", "Chip", "Release preset", "Error as stated"}, "llllr", unused)
		w.printf("\n")
	}
	var sum [][]string
	for _, ph := range rep.Phases() {
		s := rep.Summary[ph]
		if s.Rows == 0 {
			sum = append(sum, []string{ph, "0", "—", "—", fmt.Sprint(s.NotExpressible)})
			continue
		}
		sum = append(sum, []string{ph, fmt.Sprint(s.Rows), fmt.Sprintf("%.1f%%", 100*s.MedianAbsErr), fmt.Sprintf("%.1f%%", 100*s.WorstAbsErr), fmt.Sprint(s.NotExpressible)})
	}
	table(w, []string{"Phase", "Rows predicted", "Median abs error", "Worst abs error", "Not expressible yet"}, "lrrrr", sum)
	if len(rep.Groups) > 1 {
		var gs [][]string
		for _, g := range rep.Groups {
			gs = append(gs, []string{g.Group, g.Phase, fmt.Sprint(g.Rows), fmt.Sprintf("%.3f", g.MedianRatio),
				fmt.Sprintf("%.1f%%", 100*g.MedianAbsErr), fmt.Sprintf("%.1f%%", 100*g.WorstAbsErr)})
		}
		w.printf("\nBy model, chip and layout (median ratio = predicted / measured: below 1, mrep predicts less than was measured):\n\n")
		table(w, []string{"Model, chip, layout", "Phase", "Rows", "Median ratio", "Median abs error", "Worst abs error"}, "llrrrr", gs)
	}
	groupTable(w, rep.Lanes, "Lane", "Training by lane (framework, dense or MoE, chip family; a lane's GEMM figures are fitted per chip on dense rows, its MoE figures jointly over the chips that share them (the grouped GEMM by tensor-core generation, the host's pace by host CPU and runtime: x86 or Grace under CUDA, x86 under ROCm), chips.json efficiency.lanes)")
	groupTable(w, rep.Sources, "Source", "Training by source (a publisher's table or release: what leave-one-source-out holds out)")
	groupTable(w, rep.Engines, "Engine, model kind, chip family", "Inference by engine, dense or MoE, and chip family (every kind of row: TTFT, static batches, serving, waves, latencies)")
	phaseTable(w, rep.EngineChips, "Engine on chip", "Inference by engine and chip, per figure (the lane a plan with that engine on that chip is timed with)")
	phaseTable(w, rep.Releases, "Engine release (and the lane's)", "Inference by engine release as the rows state it, beside the release the chip's lane was fitted on (the drift between releases)")
	if len(rep.LeaveOneSourceOut) > 0 {
		var ls [][]string
		for _, s := range rep.LeaveOneSourceOut {
			ls = append(ls, []string{s.Source, fmt.Sprint(s.Rows), fmt.Sprintf("%.1f%%", 100*s.InSample),
				fmt.Sprintf("%.1f%%", 100*s.MedianAbsErr), fmt.Sprintf("%.1f%%", 100*s.WorstAbsErr)})
		}
		w.printf("\nLeave one source out (the lanes refitted without the source's rows, then its rows predicted; a chip left without rows takes its sibling's lane):\n\n")
		table(w, []string{"Source held out", "Rows", "In-sample median", "Held-out median", "Held-out worst"}, "lrrrr", ls)
	} else if rep.LeaveOneSourceOutPending > 0 {
		w.printf("\nLeave one source out: not run (`mrep validate --loo` refits the lanes once per source, %d refits: about 10 s each on 2 cores).\n", rep.LeaveOneSourceOutPending)
	}
	if len(skipped) > 0 {
		w.printf("\nNot expressible yet (%d rows; they count once those features land):\n\n", len(skipped))
		reasons := map[string]int{}
		var order []string
		for _, s := range skipped {
			if reasons[s[3]] == 0 {
				order = append(order, s[3])
			}
			reasons[s[3]]++
		}
		for _, r := range order {
			w.printf("- %d rows: %s\n", reasons[r], strings.TrimPrefix(r, "not expressible yet: "))
		}
	}
	return w.err
}

// WriteCalibration renders `mrep calibrate`: fitted figures, error before and after, and the
// leave-one-out error that says whether the fit generalises.
func WriteCalibration(out io.Writer, fits []calib.ChipFit) error {
	w := &errWriter{w: out}
	for _, f := range fits {
		w.printf("# Calibration of %s (%d rows)\n\n", f.Chip, f.Rows)
		var ps [][]string
		for _, k := range sortedKeys(f.Params) {
			was, moved := "—", "—"
			if v, ok := f.Shipped[k]; ok {
				was = fmt.Sprintf("%.4g", v)
				if v != 0 {
					moved = fmt.Sprintf("%+.0f%%", 100*(f.Params[k]/v-1))
				} else {
					moved = fmt.Sprintf("%+.4g", f.Params[k]) // from nothing: the figure itself
				}
			}
			ps = append(ps, []string{code(k), was, fmt.Sprintf("%.4g", f.Params[k]), moved})
		}
		table(w, []string{"Parameter", "Before (shipped)", "Fitted", "Moved"}, "lrrr", ps)
		w.printf("\n")
		loo := map[string]calib.Result{}
		for _, r := range f.LeaveOneOut {
			loo[r.ID] = r
		}
		var rows [][]string
		for i, a := range f.After.Rows {
			b := f.Before.Rows[i]
			l := "—"
			if r, ok := loo[a.ID]; ok {
				l = fmt.Sprintf("%+.1f%%", 100*r.Err())
			}
			rows = append(rows, []string{code(a.ID), value(a.Measured, a.Unit), fmt.Sprintf("%+.1f%%", 100*b.Err()), fmt.Sprintf("%+.1f%%", 100*a.Err()), l})
		}
		table(w, []string{"Row", "Measured", "Error before", "Error after", "Leave-one-out error"}, "lrrrr", rows)
		var worst, sum float64
		for _, r := range f.LeaveOneOut {
			e := r.Err()
			if e < 0 {
				e = -e
			}
			sum += e
			if e > worst {
				worst = e
			}
		}
		if n := len(f.LeaveOneOut); n > 0 {
			by := "each predicted by a fit to the others"
			if f.LeaveOut != "" {
				by = fmt.Sprintf("each %s's rows predicted by a fit to the other %ss' rows", f.LeaveOut, f.LeaveOut)
			}
			w.printf("\nLeave-one-out: mean |error| %.1f%%, worst %.1f%% over %d rows (%s).\n\n", 100*sum/float64(n), 100*worst, n, by)
		} else {
			w.printf("\nToo few rows or groups for leave-one-out (need more rows than fitted parameters, or two groups).\n\n")
		}
	}
	return w.err
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// WriteLaneFits renders `mrep calibrate --lanes`: each lane's fitted figures with its fit set
// and errors, then the leave-one-source-out errors.
func WriteLaneFits(out io.Writer, fits []calib.LaneFit, loo []calib.SourceError) error {
	w := &errWriter{w: out}
	w.printf("# Training lanes fitted\n\n")
	var rows [][]string
	for _, f := range fits {
		var ps []string
		for _, k := range sortedKeys(f.Params) {
			ps = append(ps, fmt.Sprintf("%s %.4g", k, f.Params[k]))
		}
		rows = append(rows, []string{f.Lane.String(), fmt.Sprint(f.Rows), strings.Join(ps, ", "), fmt.Sprintf("%.1f%%", 100*f.Before),
			fmt.Sprintf("%.1f%%", 100*f.After), strings.Join(f.Sources, "; ")})
	}
	table(w, []string{"Lane", "Rows", "Fitted", "Median abs error before", "After", "Fit set"}, "lrlrrl", rows)
	// the MoE layer's figures are fitted once over the chips that share them: each such fit once
	var pooled [][]string
	seen := map[string]bool{}
	for _, f := range fits {
		for _, k := range sortedKeys(f.Pooled) {
			if src := f.Pooled[k]; !seen[k+src] {
				seen[k+src] = true
				pooled = append(pooled, []string{code(k), fmt.Sprintf("%.4g", f.Params[k]), Visible(src)})
			}
		}
	}
	if len(pooled) > 0 {
		w.printf("\nFitted jointly over the chips that share them (Rows and errors above are each chip's own dense fit):\n\n")
		table(w, []string{"Figure", "Value", "Fit set"}, "lrl", pooled)
	}
	var ls [][]string
	for _, s := range loo {
		ls = append(ls, []string{s.Source, fmt.Sprint(s.Rows), fmt.Sprintf("%.1f%%", 100*s.InSample),
			fmt.Sprintf("%.1f%%", 100*s.MedianAbsErr), fmt.Sprintf("%.1f%%", 100*s.WorstAbsErr)})
	}
	w.printf("\nLeave one source out:\n\n")
	table(w, []string{"Source held out", "Rows", "In-sample median", "Held-out median", "Held-out worst"}, "lrrrr", ls)
	return w.err
}

// groupTable lists summary groups (lanes, engines) under a heading, nothing when there are none.
func groupTable(w *errWriter, gs []calib.GroupSummary, name, heading string) {
	if len(gs) == 0 {
		return
	}
	var rows [][]string
	for _, g := range gs {
		rows = append(rows, []string{g.Group, fmt.Sprint(g.Rows), fmt.Sprintf("%.3f", g.MedianRatio),
			fmt.Sprintf("%.1f%%", 100*g.MedianAbsErr), fmt.Sprintf("%.1f%%", 100*g.WorstAbsErr)})
	}
	w.printf("\n%s:\n\n", heading)
	table(w, []string{name, "Rows", "Median ratio", "Median abs error", "Worst abs error"}, "lrrrr", rows)
}

// phaseTable is groupTable with each group's phase.
func phaseTable(w *errWriter, gs []calib.GroupSummary, name, heading string) {
	if len(gs) == 0 {
		return
	}
	var rows [][]string
	for _, g := range gs {
		rows = append(rows, []string{g.Group, g.Phase, fmt.Sprint(g.Rows), fmt.Sprintf("%.3f", g.MedianRatio),
			fmt.Sprintf("%.1f%%", 100*g.MedianAbsErr), fmt.Sprintf("%.1f%%", 100*g.WorstAbsErr)})
	}
	w.printf("\n%s:\n\n", heading)
	table(w, []string{name, "Figure", "Rows", "Median ratio", "Median abs error", "Worst abs error"}, "llrrrr", rows)
}

// WriteKernelCheck renders `mrep validate --kernels`: mrep's time model against measured
// kernels, pooled by family, engine and chip family, then every group with its provenance.
func WriteKernelCheck(out io.Writer, rep calib.KernelReport) error {
	w := &errWriter{w: out}
	w.printf("# mrep's kernel timing against measured kernels\n\n%s\n\n", rep.About)
	w.printf("Ratio = predicted / measured time: below 1, mrep predicts the kernel faster than it ran. Each kernel is timed as the analyzer counts it in a step (a dense linear layer's GEMM; a fused attention launch, causal in prefill), with the chip's figures in the engine's lane, on the GPU alone (no host launch).\n")
	groupTable(w, rep.Pooled, "Family, engine, chip family", "Pooled")
	var rows [][]string
	for _, g := range rep.Groups {
		dt := g.DType
		if g.KVDType != "" {
			dt += ", " + g.KVDType + " KV"
		}
		rows = append(rows, []string{g.Chip, g.Engine + " " + g.Release, g.Family, dt, code(g.Kernel), fmt.Sprint(g.Rows),
			fmt.Sprintf("%.3f", g.MedianRatio), fmt.Sprintf("%.1f%%", 100*g.MedianAbsErr), fmt.Sprintf("%.1f%%", 100*g.P90AbsErr),
			fmt.Sprintf("%.3f", g.Scale), fmt.Sprintf("%.1f%% (%d)", 100*g.HeldOutAbsErr, g.HeldOutRows), fmt.Sprint(g.BelowRoofline)})
	}
	w.printf("\nEvery group. Scale: the one factor on mrep's time that fits half the group's shapes (every other weight shape or head layout); held out: the median |error| on the other half with it.\n\n")
	table(w, []string{"Chip", "Engine", "Family", "Precision", "Kernel", "Rows", "Median ratio", "Median abs error", "p90 abs error", "Scale", "Held out", "Below roofline"}, "lllllrrrrrrr", rows)
	return w.err
}

// WriteKernelLaneFits renders `mrep calibrate --kernels`: each lane's figures before and after
// the fit to the engine's kernels, with the held-out shapes' error under each.
func WriteKernelLaneFits(out io.Writer, fits []calib.KernelLaneFit) error {
	w := &errWriter{w: out}
	w.printf("# Serving lanes fitted to measured kernels\n\nEach figure is fitted to half of its family's shapes (every other weight shape or head layout) and checked on the other half: median |log error| of the held-out kernels under the shipped figure and the fitted one. A figure is taken only where it predicts the held-out shapes better; elsewhere one figure cannot describe the family and the lane keeps its value.\n\n")
	var rows [][]string
	for _, f := range fits {
		for _, p := range f.Params {
			taken := "kept"
			if p.Adopted {
				taken = "**taken**"
			}
			rows = append(rows, []string{f.Chip, f.Engine + " " + f.Release, code(p.Name), fmt.Sprintf("%.3f", p.Before), fmt.Sprintf("%.3f", p.After),
				fmt.Sprintf("%d / %d", p.FitRows, p.HeldRows), fmt.Sprintf("%.1f%%", 100*p.HeldErrBefore), fmt.Sprintf("%.1f%%", 100*p.HeldErrAfter), taken})
		}
	}
	table(w, []string{"Chip", "Engine", "Figure", "Shipped", "Fitted", "Fit / held-out kernels", "Held-out error, shipped", "Held-out error, fitted", "Lane"}, "lllrrrrrl", rows)
	return w.err
}
