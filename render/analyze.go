package render

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/internal/units"
	"github.com/mrep-dev/mrep/layout"
	"github.com/mrep-dev/mrep/model"
)

// SI formats a quantity with decimal prefixes: 1.30 TB, 481.25 TFLOP.
func SI(x float64, unit string) string { return units.SI(x, unit) }

// Ms formats seconds as milliseconds.
func Ms(s float64) string {
	if math.IsInf(s, 1) {
		return "∞"
	}
	return fmt.Sprintf("%.3f", s*1e3)
}

// E4 is the seed's scientific format for intensities and ratios: 6.520e+02.

// Plain writes a number people read without an exponent: four significant digits, grouped
// thousands for large values (118.9, 0.0012, 2,156,162).
func Plain(x float64) string {
	switch ax := math.Abs(x); {
	case x == 0:
		return "0"
	case ax >= 1e4:
		return Comma(int64(math.Round(x)))
	case ax >= 1e-3:
		return strconv.FormatFloat(x, 'f', max(0, 3-int(math.Floor(math.Log10(ax)))), 64)
	}
	return fmt.Sprintf("%.3g", x)
}

// Pct writes a fraction as a percentage with three significant digits (1.64%, 0.0729%).
func Pct(f float64) string {
	if f == 0 {
		return "0%"
	}
	return strconv.FormatFloat(100*f, 'f', max(1, 2-int(math.Floor(math.Log10(math.Abs(100*f))))), 64) + "%"
}

func pct(part, whole float64) string {
	if whole == 0 {
		return "0.0%"
	}
	return fmt.Sprintf("%.1f%%", 100*part/whole)
}

// WriteAnalysis renders `mrep analyze`: fingerprint, parameters, per-target KPI matrix with
// the physics check beside each row, byte decomposition and training terms.
func WriteAnalysis(out io.Writer, a analyzer.Analysis, ops *analyzer.OperatorTable, laid []LayoutResult, fits []layout.Fit) error {
	w := &errWriter{w: out}
	m := a.Model
	fp := m.Fingerprint
	s := a.Scenario
	w.printf("# Analysis: %s\n\n", m.Name)
	attn := s.AttnDType()
	if len(laid) > 0 && laid[0].Step.Layout.FP8Attention && s.ComputeDType == "fp8" {
		attn = "fp8 in training (--fp8-dot-product-attention), " + attn + " in inference"
	}
	w.printf("Analyzer `%s`. Per GPU: B=%d, S=%d, L=%d, weights %g B, activations %g B, KV %g B, TP=%d, EP=%d; linear layers in %s, attention core in %s.\n\n",
		a.Version, s.Batch, s.Seq, s.KVLen, s.WeightBytes, s.ActBytes, s.KVBytes, s.TP, s.EP, s.ComputeDType, attn)
	if err := WriteLayouts(out, laid); err != nil {
		return err
	}
	writeFit(w, a, fits)

	w.printf("## Fingerprint\n\n")
	moe := "no"
	if fp.MoE != nil {
		moe = fmt.Sprintf("%d routed experts, top-%d, %d shared, %d MoE layers (first %d dense)",
			fp.MoE.RoutedExperts, fp.MoE.TopK, fp.MoE.SharedExperts, fp.MoE.MoELayers, fp.MoE.DenseFirst)
	}
	att := fp.Attention
	if fp.SlidingWindow > 0 {
		att += fmt.Sprintf(" + sliding window %d", fp.SlidingWindow)
	}
	table(w, []string{"Property", "Value"}, "ll", [][]string{
		{"Family", "`" + fp.Family + "`"},
		{"Attention", "`" + att + "`"},
		{"Position encoding", "`" + fp.PositionEncoding + "`"},
		{"Normalization", "`" + fp.Normalization + "`"},
		{"Activation", "`" + orNone(fp.Activation) + "`"},
		{"MoE", moe},
		{"Weight tying", yesNo(fp.TiedEmbeddings)},
		{"KV elements per token per layer (C_kv)", Comma(fp.CKV)},
	})

	for _, warn := range fp.Warnings {
		w.printf("\n⚠ %s\n", warn)
	}

	w.printf("\n## Parameters by category\n\n")
	var rows [][]string
	for _, c := range analyzer.Categories {
		n := m.Params[c]
		if n == 0 {
			continue
		}
		rows = append(rows, []string{"`" + string(c) + "`", Comma(n), pct(float64(n), float64(m.TotalParams))})
	}
	rows = append(rows, []string{"**total**", Comma(m.TotalParams), "100.0%"},
		[]string{"active per token", Comma(int64(math.Round(m.Active))), pct(m.Active, float64(m.TotalParams))})
	table(w, []string{"Category", "Parameters", "Share"}, "lrr", rows)
	if NotATransformer(fp) {
		w.printf("\n## Time model\n\n")
		if w.err != nil {
			return w.err
		}
		w.printf("%s\n", notTransformerNote)
		return w.err // the command adds the traced FLOPs, when there are any
	}

	for _, t := range a.Targets {
		w.printf("\n## %s: %s\n\n", t.Label(), t.Chip.Title)
		w.printf("P_peak %.1f TFLOP/s, BW_hbm %.0f GB/s, BW_net %.0f GB/s per direction, OI_knee %.1f FLOP/B, OI_net %.1f FLOP/B.\n\n",
			t.Peak/1e12, t.BWHBM/1e9, t.BWNet/1e9, t.Knee, t.OINet)
		writeEfficiency(w, t)
		var kpi, bd [][]string
		var notes []string
		for _, r := range a.Results {
			if r.Target != t.Label() {
				continue
			}
			c, tm := r.Step.Cost, r.Timing
			flag := ""
			if tm.BelowFloor {
				flag = " ⚠"
				notes = append(notes, fmt.Sprintf("- ⚠ `%s`/`%s`: the knobs claim %s ms (roofline with their bytes), %s.",
					r.Step.Phase, r.Step.Profile, Ms(tm.TKnob), tm.FloorNote))
			}
			kpi = append(kpi, []string{"`" + string(r.Step.Phase) + "`", "`" + r.Step.Profile + "`",
				SI(c.FTheory, "FLOP"), SI(tm.FRealizable, "FLOP"), SI(c.BytesHBM(), "B"), Plain(tm.AIHBM),
				Ms(tm.TComp), Ms(tm.THBM), Ms(tm.TNet), Ms(tm.TEst) + flag, Ms(tm.TRoofline), Pct(tm.MFU),
				Plain(tm.TokensPerS), "`" + tm.Regime + "`"})
			b := tm.Breakdown
			bd = append(bd, []string{"`" + string(r.Step.Phase) + "`", "`" + r.Step.Profile + "`", Ms(b.TGEMM), Ms(b.TAttention),
				Ms(b.TMemory), Ms(b.TComm), Ms(b.TLatency), fmt.Sprintf("%.0f", b.Launches), Ms(tm.TEst), fmt.Sprintf("%.2f", tm.EtaTC)})
		}
		table(w, []string{"Phase", "Exec", "F_theory", "F_realizable", "bytes_hbm", "AI_hbm (FLOP/B)", "T_comp (ms)", "T_hbm (ms)",
			"T_net (ms)", "T_est (ms)", "T_roofline (ms)", "MFU_est", "Tokens/s per GPU", "Regime"}, "llrrrrrrrrrrrl", kpi)
		w.printf("\n`T_est` is the achievable prediction: every kernel at what the chip's kernels achieve (the efficiency figures above), launch latency and exposed communication included. `T_roofline` is the ideal ceiling of the same work (datasheet peak, nominal bandwidth): no run is faster. `T_comp`, `T_hbm`, `T_net` are each resource's total at achieved efficiency. Where `T_est` goes:\n\n")
		table(w, []string{"Phase", "Exec", "GEMMs (ms)", "attention (ms)", "memory-bound kernels (ms)", "exposed comm (ms)", "latency (ms)", "launches", "T_est (ms)", "eta_tc"}, "llrrrrrrrr", bd)
		if len(notes) > 0 {
			w.printf("\nPhysics check:\n\n%s\n", strings.Join(notes, "\n"))
		}
	}

	w.printf("\n## Byte decomposition\n\n")
	var br [][]string
	for _, st := range a.Steps {
		c := st.Cost
		br = append(br, []string{"`" + string(st.Phase) + "`", "`" + st.Profile + "`", SI(c.BytesWeights, "B"),
			SI(c.BytesActivations, "B"), SI(c.BytesKV, "B"), SI(c.BytesTemporary, "B"), SI(c.BytesHBM(), "B"),
			SI(c.BytesNet, "B"), SI(c.FloorWeights+c.FloorKV, "B")})
	}
	table(w, []string{"Phase", "Exec", "bytes_weights", "bytes_activations", "bytes_kv", "bytes_temporary", "bytes_hbm", "bytes_net", "compulsory"}, "llrrrrrrr", br)

	w.printf("\n## Step terms\n\nTraining is forward, backward (activation and weight gradients, gradient writes), optional recomputation and the optimizer step, each visible.\n\n")
	var tr [][]string
	for _, st := range a.Steps {
		for _, term := range st.Terms {
			c := term.Cost
			tr = append(tr, []string{"`" + string(st.Phase) + "`", "`" + st.Profile + "`", term.Name, SI(c.FTheory, "FLOP"),
				SI(c.FExecuted, "FLOP"), SI(c.BytesHBM(), "B"), SI(c.BytesNet, "B")})
		}
	}
	table(w, []string{"Phase", "Exec", "Term", "F_theory", "F_executed", "bytes_hbm", "bytes_net"}, "lllrrrr", tr)
	if len(a.Steps) > 0 {
		st := a.Steps[0]
		w.printf("\nConventions: F_theory counts QK^T and PV over the full KV length, as PyTorch's FlopCounterMode does (%s of attention GEMMs in one `%s` forward pass; a causal kernel executes %s), and adds softmax (3 FLOPs per score) and elementwise FLOPs, which FlopCounterMode does not count: compare its figures with F_tensorcore. F_executed is what the kernels run: causal attention at its lower triangle, flash backward at 2.5x the forward, recomputation; prefill runs the LM head on the last token only.\n",
			SI(st.FAttnFull, "FLOP"), st.Phase, SI(st.FAttnCausal, "FLOP"))
	}
	if ops != nil {
		writeOperators(w, *ops)
	}
	return w.err
}

// writeFit puts the memory verdict first, one per target (fits[i] is a.Targets[i]'s). Without
// a training layout the verdict is the scenario's inference; training memory depends on how
// the step is spread, so the line says how to ask for it.
func writeFit(w *errWriter, a analyzer.Analysis, fits []layout.Fit) {
	for i, f := range fits {
		if i >= len(a.Targets) {
			break
		}
		w.printf("**Memory on %s:** %s. Training memory depends on the layout: give `--dp`, `--zero`, `--pp` (or run `mrep plan train`).\n\n", a.Targets[i].Label(), f.Verdict())
	}
}

// writeEfficiency states the time model's figures for a target, each with its source.
func writeEfficiency(w *errWriter, t analyzer.Target) {
	e := t.Chip.Efficiency
	var fr []string
	for _, d := range chips.DTypes {
		if v, ok := e.GEMMFrac[d]; ok {
			fr = append(fr, fmt.Sprintf("%s %.2f", d, v))
		}
	}
	w.printf("Achieved: GEMM ceiling %s of peak (tile and wave quantization on %d SMs on top), flash attention %.2f forward / %.2f backward, HBM %.2f of nominal, %.1f µs per kernel launch (at least %.0f µs per kernel launched eagerly from the host; decode runs from CUDA graphs), %.0f µs per step, scale-up links %.2f of nominal + %.0f µs per collective. Sources: `mrep chips --json`.\n\n",
		strings.Join(fr, ", "), t.Chip.SMs, e.AttnFrac, e.AttnBwdFrac, e.HBMFrac, e.KernelLatencyUs, e.HostLaunchUs, e.StepOverheadUs, e.ScaleUpFrac, e.ScaleUpLatencyUs)
	if note := servingLaneNote(t); note != "" {
		w.printf("%s\n\n", note)
	}
}

func writeOperators(w *errWriter, t analyzer.OperatorTable) {
	var qs []string
	for _, q := range t.Queries {
		qs = append(qs, fmt.Sprintf("%s cached + %s input", Comma(q.Cached), Comma(q.Input)))
	}
	w.printf("\n## Operators\n\nOne step over %d queries (%s); per block, weights once, inputs read, outputs written.\n\n", len(t.Queries), strings.Join(qs, "; "))
	var rows [][]string
	for _, r := range append(append(t.Rows, t.Blocks), t.Total) {
		blocks := fmt.Sprintf("%d / %d", r.Blocks, r.TotalBlocks)
		if strings.HasPrefix(r.Operator, "Total") {
			blocks = "N/A"
		}
		rows = append(rows, []string{r.Operator, blocks, SI(r.FLOPs, "FLOPs"), IEC(r.WeightBytes), IEC(r.InputBytes),
			IEC(r.OutputBytes), fmt.Sprintf("%.3g FLOPs/B", r.Intensity)})
	}
	table(w, []string{"Node", "Block Count", "Compute", "Bandwidth (Weight)", "Bandwidth (Input)", "Bandwidth (Output)", "Operational Intensity"}, "lrrrrrr", rows)
	w.printf("\nMinimum storage requirement: (weights, every expert resident) %s + (KV cache) %s = %s. One step reads %s of the weights.\n",
		IEC(t.StorageW), IEC(t.StorageKV), IEC(t.StorageW+t.StorageKV), IEC(t.ActiveWeight))
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// WriteChips lists the chip database with the figures mrep uses.
func WriteChips(out io.Writer, list []chips.Chip) error {
	w := &errWriter{w: out}
	var rows [][]string
	for _, c := range list {
		var peaks []string
		for _, d := range chips.DTypes {
			if v := c.PeakTFLOPs[d]; v > 0 {
				peaks = append(peaks, fmt.Sprintf("%s %g", d, v))
			}
		}
		tdp, ridge := "—", "—"
		if c.TDPW > 0 {
			tdp = fmt.Sprintf("%.0f", c.TDPW)
		}
		if p, err := c.Peak("bf16"); err == nil {
			ridge = fmt.Sprintf("%.0f", p/c.HBMBytesPerSec())
		}
		rows = append(rows, []string{"`" + c.Name + "`", c.Title, strings.Join(peaks, ", "), fmt.Sprintf("%g", c.MemoryGiB),
			fmt.Sprintf("%g", c.HBMGBps), fmt.Sprintf("%g", c.ScaleUpGBps), fmt.Sprintf("%g", c.ScaleOutGBps), tdp, ridge})
	}
	table(w, []string{"Chip", "Title", "Dense peaks (TFLOP/s)", "Memory (GiB)", "HBM (GB/s)", "Scale-up (GB/s, bidir)", "Scale-out (GB/s)", "TDP (W)", "Ridge bf16 (FLOP/B)"}, "lllrrrrrr", rows)
	w.printf("\nSources for every figure: `mrep chips --json`.\n")
	return w.err
}

// WriteTraceCheck sets FlopCounterMode's per-module count beside mrep's, when the run has one.
func WriteTraceCheck(out io.Writer, tr *model.Trace, rows []analyzer.TraceRow) error {
	if tr == nil || len(rows) == 0 {
		return nil
	}
	w := &errWriter{w: out}
	impl := func(s *string) string {
		if s == nil {
			return "unknown"
		}
		return *s
	}
	w.printf("\n## Traced FLOPs vs the model\n\nOne real forward at B=%d, S=%d on %s (attention `%s`, experts `%s`), counted by PyTorch's FlopCounterMode, beside mrep's F_tensorcore for the same prefill step (modules up to three levels deep).\n\n",
		tr.Batch, tr.Seq, tr.Device, impl(tr.AttnImplementation), impl(tr.ExpertsImplementation))
	var rs [][]string
	worst := 0.0
	for _, r := range rows {
		name := r.Module
		if name == "" {
			name = "(model)"
		}
		rs = append(rs, []string{code(name), Comma(r.Traced), Comma(int64(math.Round(r.Mrep))), fmt.Sprintf("%.4f", r.Ratio)})
		worst = math.Max(worst, math.Abs(r.Ratio-1))
	}
	table(w, []string{"Module", "FlopCounterMode", "mrep F_tensorcore", "ratio"}, "lrrr", rs)
	w.printf("\nLargest deviation: %.3f%%.\n", 100*worst)
	return w.err
}

// servingLaneNote says which serving engine's figures time a target's prefill and decode, and
// what they are ("" when the chip has no lane for it).
func servingLaneNote(t analyzer.Target) string {
	l, ok := t.Chip.Efficiency.Lanes[t.ServingLane]
	if !ok {
		return ""
	}
	var fs []string
	for _, d := range chips.DTypes {
		if v, ok := l.GEMMFrac[d]; ok {
			fs = append(fs, fmt.Sprintf("GEMM %s %.2f", d, v))
		}
	}
	for _, f := range []struct {
		name, unit string
		v          float64
	}{{"grouped GEMM", "", l.GroupedGEMMFrac}, {"HBM", "", l.HBMFrac}, {"per step", " µs", l.StepOverheadUs},
		{"per collective", " µs", l.ScaleUpLatencyUs}, {"per running sequence (plan serve's engine model)", " µs", l.SeqOverheadUs},
		{"per request before its first token (plan serve)", " µs", l.RequestOverheadUs}} {
		if f.v > 0 {
			fs = append(fs, fmt.Sprintf("%s %.3g%s", f.name, f.v, f.unit))
		}
	}
	return fmt.Sprintf("Prefill and decode are timed with the %s figures fitted on %s (`--engine`): %s.", Visible(t.ServingLane), Visible(t.Chip.Name), strings.Join(fs, ", "))
}
