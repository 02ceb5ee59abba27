package render

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/report"
)

// ReportOptions control the markdown.
type ReportOptions struct {
	Generated   time.Time
	Diagrams    bool
	Appendix    bool
	ChartExt    string // "png" (or "svg") for image links
	Charts      map[string]bool
	HasWeights  bool // a weight-distribution grid was written
	CSVName     string
	ChartPrefix string
	Chart       ChartOptions   // the roofline limits and label mode, for the configuration table
	Layouts     []LayoutResult // a training layout's step and memory per target, shown first
}

func largestWithStats(ts []analyzer.TensorRow, n int) []analyzer.TensorRow {
	var with []analyzer.TensorRow
	for _, t := range ts {
		if t.Stats != nil && t.TiedTo == "" {
			with = append(with, t)
		}
	}
	sort.SliceStable(with, func(i, j int) bool { return with[i].Params > with[j].Params })
	if n > 0 && len(with) > n {
		with = with[:n]
	}
	return with
}

type reportWriter struct {
	*errWriter
	r     report.Data
	o     ReportOptions
	sec   int
	sub   int
	fresh bool // a heading was just written: the next heading needs no blank line before it
}

func (w *reportWriter) printf(format string, args ...any) {
	w.fresh = false
	w.errWriter.printf(format, args...)
}

func (w *reportWriter) table(header []string, align string, rows [][]string) {
	w.fresh = false
	table(w.errWriter, header, align, rows)
}

func (w *reportWriter) h2(title string) {
	w.sec++
	w.sub = 0
	w.printf("\n## %d. %s\n\n", w.sec, title)
	w.fresh = true
}

func (w *reportWriter) h3(title string) {
	w.sub++
	if !w.fresh {
		w.errWriter.printf("\n")
	}
	w.errWriter.printf("### %d.%d. %s\n\n", w.sec, w.sub, title)
	w.fresh = true
}

func (w *reportWriter) image(name string) {
	if w.o.Charts[name] {
		w.printf("![%s](%s%s.%s)\n\n", name, w.o.ChartPrefix, name, w.o.ChartExt)
	}
}

// code renders s as an inline code span whatever it holds: control characters escaped, and a
// fence of more backticks than the longest run inside it (padded when s starts or ends with one).
func code(s string) string {
	s = Visible(s)
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	if longest == 0 {
		return "`" + s + "`"
	}
	fence := strings.Repeat("`", longest+1)
	return fence + " " + s + " " + fence
}

// WriteReport writes the full model report as markdown. Every number comes from r.
func WriteReport(out io.Writer, r report.Data, o ReportOptions) error {
	w := &reportWriter{errWriter: &errWriter{w: out}, r: r, o: o}
	m := r.Model
	w.printf("# Model Report: %s\n\nGenerated: %s", m.Name, o.Generated.UTC().Format("2006-01-02 15:04:05 UTC"))
	w.printf(" · run %d", r.Run.ID)
	if r.Run.Label != "" {
		w.printf(" (`%s`)", r.Run.Label)
	}
	if r.Run.Step != nil {
		w.printf(" · step %d", *r.Run.Step)
	}
	w.printf(" · `%s` · analyzer `%s`\n", r.Run.Hash, r.Analysis.Version)
	if len(o.Layouts) > 0 {
		w.printf("\n")
		if err := WriteLayouts(out, o.Layouts); err != nil {
			return err
		}
	}
	if NotATransformer(m.Fingerprint) {
		w.architecture()
		w.h2("Time Model")
		if w.err == nil {
			w.err = WriteNotATransformer(out, r.Trace)
		}
		return w.err
	}
	w.howToRead()
	w.keyTerms()
	w.summary()
	w.architecture()
	w.analytical()
	w.roofline()
	w.sensitivity()
	w.limits()
	if o.Appendix {
		w.appendix()
	}
	return w.err
}

func (w *reportWriter) howToRead() {
	w.h2("How to Read This Report")
	w.h3("Goal")
	w.printf("Given this model and a chip target, predict what limits throughput or latency in training, prefill and decode, and which knobs move that limit. The report goes from architecture to FLOPs and bytes, to the roofline and the regimes, to sensitivity, so each table has a definition and a reason to exist.\n")
	w.h3("Workflow (3 Steps)")
	w.printf("First, classify the limiting regime by comparing arithmetic intensity with the chip ridge (`OI_knee = P_peak / BW_hbm`) and by reading the modeled times `T_comp`, `T_hbm` and `T_net`. Second, locate the dominant byte term in the byte decomposition (weights, activations, KV, temporary). Third, map the regime to an optimization family: compute-bound suggests utilization and fusion; HBM(weight)-bound suggests residency, batching and weight compression; HBM(KV)-bound suggests KV format, dtype and layout; network-bound suggests topology, compression and overlap.\n")
	w.h3("Common Gotchas")
	w.printf("`F_theory` is an algorithmic count, not a performance claim; `F_realizable` is a peak-equivalent cost under a tensor-core utilization model, because small-batch decode and thin GEMMs leave tensor cores idle. Decode has its own length variable (`L`, the KV length): long-context decode trends toward a KV-driven `~1/L` intensity. MoE dispatch becomes a network concern only when expert parallelism (`EP`) is above 1. Exec profiles change bytes, never `F_theory`; a profile whose bytes fall below the compulsory HBM traffic (every active weight once per pass, the KV cache once) is marked ⚠ wherever it appears, with the time it could at best reach.\n")
}

func (w *reportWriter) keyTerms() {
	w.h2("Key Terms and Units")
	w.printf("FLOPs and bandwidths are SI (1 GB/s = 1e9 B/s, 1 TFLOP/s = 1e12 FLOP/s); memory capacities are IEC (GiB = 2^30 B) and labelled so.\n\n")
	rows := [][]string{
		{"`F_theory`", "Symbolic FLOPs from operator shapes (GEMM `2*M*K*N`), before hardware mapping.", "FLOPs"},
		{"`F_tensorcore`", "The GEMM (tensor-core-eligible) part of `F_theory`.", "FLOPs"},
		{"`F_realizable`", "Peak-equivalent compute cost: `F_tensorcore/eta_tc + (F_theory-F_tensorcore)/eta_scalar` (+ recompute and optimizer work in training).", "FLOPs"},
		{"`eta_tc(M_eff)`", "Tensor-core utilization `min(1, M_eff/B_sat)`; `M_eff≈B` in decode, `B*S` in dense prefill/training, tokens per active expert for MoE.", "ratio"},
		{"`P_peak`", "Chip dense peak for the compute dtype.", "TFLOP/s"},
		{"`P_effective`", "`P_peak * F_theory / F_realizable`.", "TFLOP/s"},
		{"`WRF_attn/dense/moe`", "Weight Residency Factor: streamed weights `W_eff = W / WRF`.", "ratio"},
		{"`bytes_weights`", "Streamed weight traffic (and, in training, gradient writes and optimizer state).", "bytes"},
		{"`bytes_activations`", "GEMM input/output activation traffic.", "bytes"},
		{"`bytes_kv`", "KV-cache reads and writes.", "bytes"},
		{"`bytes_temporary`", "Elementwise traffic and naive attention's score/prob matrices.", "bytes"},
		{"`bytes_hbm`", "`bytes_weights + bytes_activations + bytes_kv + bytes_temporary`.", "bytes"},
		{"`bytes_net`", "Interconnect bytes one GPU sends (TP all-reduce, EP dispatch/combine).", "bytes"},
		{"`AI_hbm`, `AI_total`", "`F_theory / bytes_hbm`, `F_theory / (bytes_hbm + bytes_net)`.", "FLOP/byte"},
		{"`OI_knee`, `OI_net`", "Ridges `P_peak / BW_hbm` and `P_peak / BW_net`.", "FLOP/byte"},
		{"`T_comp`, `T_hbm`, `T_net`", "Totals at achieved efficiency: every kernel's FLOPs at its achieved share of peak (`F_realizable/P_peak`), every byte at achievable bandwidth, every collective with its latency.", "seconds"},
		{"`T_est`", "The achievable prediction: per kernel `max(compute, memory)` + launch latency, summed, plus exposed communication and the per-step overhead. The regime is where most of it goes (compute-bound kernels, memory-bound kernels, communication, latency).", "seconds"},
		{"`T_roofline`", "The ideal ceiling: `max(F_executed/P_peak, bytes/BW_hbm, bytes_net/BW_net)` at datasheet figures; `T_est ≥ T_roofline`.", "seconds"},
		{"`TF_est`, `MFU_est`", "`F_theory/T_est`, `F_theory/(P_peak*T_est)`.", "TFLOP/s, ratio"},
		{"`B_crit`", "Decode batch at which `AI_hbm` reaches `OI_knee`.", "sequences"},
	}
	w.table([]string{"Term", "Definition", "Units"}, "lll", rows)
}

func (w *reportWriter) res(ph analyzer.Phase, profile string) (analyzer.Result, bool) {
	return w.r.Analysis.Find(w.r.Primary.Label(), ph, profile)
}

func (w *reportWriter) lastProfile() string {
	ps := w.r.Analysis.Profiles
	return ps[len(ps)-1].Name
}

func (w *reportWriter) summary() {
	r := w.r
	w.h2("Executive Summary")
	w.h3("3 Conclusions")
	p := w.lastProfile()
	tr, _ := w.res(analyzer.Training, p)
	pre, _ := w.res(analyzer.Prefill, p)
	dec, _ := w.res(analyzer.Decode, p)
	line := fmt.Sprintf("1. In `%s` mode on `%s`, training is `%s` and prefill is `%s` (`AI_hbm`: %.2f, %.2f; `OI_knee` %.1f).",
		p, r.Primary.Label(), tr.Timing.Regime, pre.Timing.Regime, tr.Timing.AIHBM, pre.Timing.AIHBM, r.Primary.Knee)
	if tr.Timing.BelowFloor || pre.Timing.BelowFloor {
		line += fmt.Sprintf(" ⚠ That mode's knobs model fewer bytes than must cross HBM (alone they would claim %s ms for training and %s ms for prefill); the prediction uses the compulsory floor.",
			Ms(tr.Timing.TKnob), Ms(pre.Timing.TKnob))
	}
	if opt := r.Findings.OptimizerBytes; opt > 0.5*tr.Step.Cost.BytesHBM() {
		line += fmt.Sprintf(" The optimizer step moves %s of training's bytes (Adam state), more than forward and backward together.", pct(opt, tr.Step.Cost.BytesHBM()))
	}
	w.printf("%s\n", line)
	var rs []string
	for _, k := range r.Findings.DecodeRegimes {
		rs = append(rs, "`"+k+"`")
	}
	bs := fmt.Sprintf("B = %d…%d", r.DecodeSweep[0].X, r.DecodeSweep[len(r.DecodeSweep)-1].X)
	if b, ok := r.BCrit[p]; ok {
		w.printf("2. Decode is %s across sampled batches (%s); `AI_hbm` reaches `OI_knee=%.1f` at `B_crit≈%.1f` (`%s`).\n", strings.Join(rs, " and "), bs, r.Primary.Knee, b, p)
	} else {
		w.printf("2. Decode remains %s across sampled batches (%s); no `B_crit` crossing for `OI_knee=%.1f` (decode `AI_hbm` %.2f at the anchor B=%d).\n",
			strings.Join(rs, " and "), bs, r.Primary.Knee, dec.Timing.AIHBM, r.Analysis.Scenario.Batch)
	}
	big, bigShare := r.Findings.Largest, r.Findings.LargestShare
	dc := dec.Step.ByCat[string(big)]
	if bigShare > 0.99 {
		w.printf("3. Every parameter sits in `%s` (no attention, experts or KV cache were found): its limits are its GEMM shapes and weight streaming, %s of decode bytes.\n",
			big, pct(dec.Step.Cost.BytesWeights, dec.Step.Cost.BytesHBM()))
	} else {
		w.printf("3. `%s` holds %.1f%% of parameters but takes %s of decode HBM bytes and %s of decode `F_theory`: parameter share is not runtime share.\n",
			big, 100*bigShare, pct(dc.BytesHBM(), dec.Step.Cost.BytesHBM()), pct(dc.FTheory, dec.Step.Cost.FTheory))
	}

	w.h3("3 Next Optimizations")
	for i, s := range r.Advice {
		w.printf("%d. %s\n", i+1, s)
	}
}

func (w *reportWriter) architecture() {
	r := w.r
	m := r.Model
	fp := m.Fingerprint
	w.h2("Architecture Overview")
	w.printf("Architecture decides where FLOPs and bytes come from before any kernel or system tuning: how parameters concentrate (weight-residency priorities), how many KV elements each token keeps (decode bandwidth), and how dense and MoE layers mix.\n\n> **Callout:** parameter distribution ≠ runtime cost distribution.\n")
	w.h3("Model Fingerprint")
	moe := "`Not detected`"
	if fp.MoE != nil {
		moe = fmt.Sprintf("`Detected`: %d routed experts, top-%d, %d shared, %d MoE layers, first %d dense", fp.MoE.RoutedExperts, fp.MoE.TopK, fp.MoE.SharedExperts, fp.MoE.MoELayers, fp.MoE.DenseFirst)
	}
	w.table([]string{"Property", "Value"}, "ll", [][]string{
		{"Family", code(fp.Family)}, {"Attention", code(attnLabel(fp))}, {"Position Encoding", code(fp.PositionEncoding)},
		{"Normalization", code(fp.Normalization)}, {"Activation", code(orNone(fp.Activation))}, {"MoE", moe},
		{"Weight Tying", code(yesNo(fp.TiedEmbeddings))}, {"KV elements per token per layer (`C_kv`)", Comma(fp.CKV)},
	})
	for _, warn := range fp.Warnings {
		w.printf("\n⚠ %s\n", warn)
	}
	if len(r.Config) > 0 {
		w.printf("\n**Config**\n\n")
		var rows [][]string
		for _, kv := range r.Config {
			rows = append(rows, []string{code(kv[0]), code(kv[1])})
		}
		w.table([]string{"Property", "Value"}, "ll", rows)
	}
	if w.o.Diagrams {
		w.h3("Architecture Diagrams")
		for _, d := range Diagrams(m) {
			w.printf("%s\n\n", md(d))
		}
		w.printf("The diagrams are generated from this model's config and module tree: the decoder stack, one block with its KV cache, and the routed MoE dataflow when there is one.\n")
	}
	w.h3("Parameter & Memory Summary")
	s := r.Summary
	sc := r.Analysis.Scenario
	w.table([]string{"Metric", "Value"}, "lr", [][]string{
		{"Total parameters", Comma(s.Total)}, {"Trainable parameters", Comma(s.Trainable)}, {"Non-trainable parameters", Comma(s.Frozen)},
		{"Parameter memory (tensor dtypes)", IEC(float64(s.Bytes))},
		{fmt.Sprintf("Parameter memory (assumed, %g-byte weights)", sc.WeightBytes), IEC(float64(s.Total) * sc.WeightBytes)},
		{"Active parameters per token", Comma(int64(math.Round(m.Active)))},
	})
	if s.MetaDevice {
		w.printf("\nParameters are meta-initialized, so memory comes from shapes and dtypes.\n")
	}
	w.printf("\n**Parameter Category Breakdown**\n\n")
	var rows [][]string
	for _, c := range analyzer.Categories {
		if n := m.Params[c]; n > 0 {
			rows = append(rows, []string{code(string(c)), Comma(n), pct(float64(n), float64(m.TotalParams))})
		}
	}
	w.table([]string{"Category", "Parameters", "Share"}, "lrr", rows)
	w.printf("\n")
	w.image("module_pie")
	w.h3("Module Size Breakdown")
	w.printf("Repeated layer and expert indices are grouped (`layers.*.mlp.experts`) to avoid repetitive rows.\n\n")
	pats := r.Patterns
	more := r.PatternsTotal - len(pats)
	if len(pats) > 20 {
		more, pats = r.PatternsTotal-20, pats[:20]
	}
	rows = nil
	for _, p := range pats {
		per := Comma(p.ParamsPerInstance)
		if !p.Uniform {
			per = "varies"
		}
		name := code(p.Pattern)
		if p.Experts > 0 {
			name += fmt.Sprintf(" (%d experts fused)", p.Experts)
		}
		rows = append(rows, []string{name, Comma(int64(p.Instances)), per, Comma(p.TotalParams), fmt.Sprintf("%.2f%%", p.Percent), IEC(float64(p.Bytes)), code(p.Example)})
	}
	w.table([]string{"Module Pattern", "Instances", "Params / Instance", "Total Params", "% Total", "Memory", "Example Module"}, "lrrrrrl", rows)
	if more > 0 {
		w.printf("... %d more patterns\n", more)
	}
	w.h3("Weight Statistics (Top 20 Layers)")
	top := largestWithStats(r.Tensors, 20)
	if len(top) == 0 {
		w.printf("- Weight value statistics are unavailable: the parameters have no values (meta-initialized or lazy).\n")
		return
	}
	rows = nil
	for _, t := range top {
		std := "—"
		if t.Stats.Std != nil {
			std = Sci(*t.Stats.Std)
		}
		rows = append(rows, []string{code(t.Name), Shape(t.Shape), Sci(t.Stats.Mean), std, Sci(t.Stats.Min), Sci(t.Stats.Max), Comma(t.Stats.Nonfinite)})
	}
	w.table([]string{"Layer", "Shape", "Mean", "Std", "Min", "Max", "Non-finite"}, "llrrrrr", rows)
	if w.o.HasWeights {
		w.printf("\nWeight distributions of %s (the largest tensors with statistics; panels of one kind share their value axis):\n\n![weight distributions](%sweight_distributions.png)\n", checkpointName(w.r.Run), w.o.ChartPrefix)
	}
}

func (w *reportWriter) analytical() {
	r := w.r
	sc := r.Analysis.Scenario
	w.h2("Analytical Model (FLOPs, Bytes, Time)")
	w.printf("The model is static: it turns the module tree into symbolic FLOPs, explicit bytes and a time estimate, and separates algorithmic work (`F_theory`) from a utilization-aware cost (`F_realizable`) so that the TFLOP/s that follow are not read as measurements.\n")
	w.h3("Modeling intent and scope")
	w.printf("No profiler timelines, queues or overlap traces enter; the role is to rank bottlenecks. `AI_hbm` against `OI_knee` says which side of the ridge a point is on; the `Regime` labels come from the achievable time model (`T_est`, kernel by kernel), and the roofline drawn in the charts is the ideal ceiling above it.\n\n**Sanity checks.** As `B` grows, GEMM FLOPs grow with `B` while weight bytes are amortized, so intensity rises; in decode, KV reads grow with `L`, and once they dominate intensity falls like `~1/L`.\n")
	w.h3("Notation")
	w.table([]string{"Symbol", "Meaning"}, "ll", [][]string{
		{"`B`", "microbatch (sequences) per GPU"}, {"`S`", "prefill / training sequence length"}, {"`L`", "decode KV length"},
		{"`H`, `h`, `d`", "hidden size, attention heads, head dim"}, {"`In`, `Out`", "GEMM input/output features"},
		{"`W`, `W_eff = W / WRF`", "weight bytes, streamed weight bytes"}, {"`A`, `A_kv`", "activation and KV bytes per element"},
		{"`C_kv`", "KV elements per token per layer"}, {"`E`, `k`", "routed experts, experts per token"},
	})
	w.h3("Execution / Kernel Assumptions")
	var rows [][]string
	for _, p := range r.Analysis.Profiles {
		rows = append(rows, []string{code(p.Name), code(p.AttentionBytes), fmt.Sprintf("%.2f/%.2f/%.2f", p.WRFAttn, p.WRFDense, p.WRFMoE), fmt.Sprintf("%.2f", p.ActFusion), fmt.Sprintf("%.2f", p.Elementwise)})
	}
	w.table([]string{"exec_model", "attention bytes", "WRF attn/dense/moe", "act fusion", "elementwise"}, "lllrr", rows)
	w.printf("\n#### Knob Semantics and Rationale\n\n`WRF` models streamed weights as `W_eff = W / WRF`, separately for attention, dense and routed-expert weights. `act fusion` scales GEMM input/output activation bytes; `elementwise` scales elementwise traffic and score/prob temporaries; `attention bytes` is `naive` (score and probability matrices cross HBM four times: written, read, written, read) or `flash` (they stay on chip; K/V and Q/O traffic remain). These are sensitivity knobs, not measurements.\n\n**Physics check.** A weight that does not fit in on-chip memory (%g MiB on `%s`) crosses HBM at least once per pass, so any `WRF > 1` models fewer weight bytes than a step must move. mrep computes the compulsory traffic, keeps the profile's numbers, and marks every result below it with ⚠ and the `T_est` it could at best reach.\n", r.Primary.Chip.OnChipMiB, r.Primary.Label())
	w.h3("Per-Module Formulas")
	w.table([]string{"Module", "Shape", "FLOPs", "Bytes (HBM)", "Note"}, "lllll", [][]string{
		{"Linear (prefill/training)", "`X:[B,S,In] @ W:[In,Out]`", "`2*B*S*In*Out`", "`W/WRF + act_fusion*A*B*S*(In+Out)`", "one pass reads each weight once"},
		{"Linear (decode)", "`X:[B,In] @ W:[In,Out]`", "`2*B*In*Out`", "`W/WRF + act_fusion*A*B*(In+Out)`", "weights dominate at small B"},
		{"Routed experts", "`T*k` assignments over `E` experts", "`2*T*k*In*Out` per matrix", "`E*(1-(1-k/E)^T)/E * W/WRF_moe + ...`", "distinct experts touched, not `k` linearly"},
		{"Embedding", "`ids:[B,S] -> [B,S,D]`", "0 (a gather)", "touched rows `V*(1-(1-1/V)^T)*D` + output", "not the whole table"},
		{"Attention core (prefill)", "`Q,K,V:[B,h,S,d]`, scores `[B,h,S,S]`", "`4*B*h*S^2*d` + softmax `3*B*h*S^2`", "Q,K,V,O + naive: `4*A*B*h*S^2` temporaries", "full `S^2` (FlopCounterMode); causal executes half"},
		{"Attention core (decode)", "`q:[B,h,1,d]`, cache `[B,L,C_kv]`", "`4*B*h*L*d` + `3*B*h*L`", "`A_kv*B*(L+1)*C_kv` + Q/O", "MLA decode attends in the latent (`r_kv + d_rope`)"},
		{"Elementwise", "norms, activations, residuals", "a few FLOPs per element", "`elementwise*A*(reads+writes)`", "on `eta_scalar`"},
		{"Training backward", "per op", "`2x` forward GEMM FLOPs", "weights again, gradient writes `G*W/..`, activation grads", "plus the optimizer step"},
	})
	w.printf("\nTraining is forward + backward + optional recompute + the optimizer step (Adam: read gradients and fp32 master/m/v, write master/m/v and weights: %g B per parameter at %g-byte weights and gradients), each visible in the KPI terms; the seed's `prefill x 3` FLOPs and `x 2` bytes model is available as `--seed-training`.\n",
		2*sc.OptimizerStateBytes+sc.GradBytes+sc.WeightBytes, sc.WeightBytes)
	w.h3("Tensor Core Mapping")
	e := r.Primary.Chip.Efficiency
	w.printf("Each op is a kernel timed on `%s` as `max(FLOPs / (P_peak(dtype) * eta), bytes / (BW_hbm * %.2f)) + %.1f µs` launch latency, plus %.0f µs per step. A GEMM's `eta` is the chip's ceiling for its dtype (%s) times tile quantization (a partial [M, N] tile computes a full one) and wave quantization over %d SMs (the last wave leaves SMs idle; small grids split K). So a decode GEMM with `M = B` rows is limited by reading its weights, and a thin expert GEMM (tokens per touched expert) likewise. Flash attention runs the causal half at %.2f of the 16-bit peak forward and %.2f backward, with the same wave model over (sequence, head, 128-query) tiles; decode attention streams the KV cache, never below the vector rate. Norms, activations, RoPE and the optimizer run at achievable bandwidth. Collectives cost `latency + algorithm bytes / (link * efficiency)` and are serialized with the layer. `F_realizable = T_comp * P_peak`, `eta_tc = F_executed / F_realizable`. Every figure and its source: `mrep chips --json`.\n",
		r.Primary.Label(), e.HBMFrac, e.KernelLatencyUs, e.StepOverheadUs, fracs(e.GEMMFrac), r.Primary.Chip.SMs, e.AttnFrac, e.AttnBwdFrac)
	for _, t := range r.Analysis.Targets {
		if note := servingLaneNote(t); note != "" {
			w.printf("\n%s\n", note)
		}
	}
	w.h3("Byte Accounting")
	w.printf("`bytes_hbm = bytes_weights + bytes_activations + bytes_kv + bytes_temporary`. Routed-expert weight bytes follow the expected number of distinct experts the step's tokens touch under uniform routing (`E*(1-(1-k/E)^T)`), not `top_k` linearly.\n\n")
	w.table([]string{"Byte Term", "Meaning"}, "ll", [][]string{
		{"`bytes_weights`", "streamed weights after WRF; in training also gradient writes and optimizer state"},
		{"`bytes_activations`", "GEMM inputs and outputs, Q/K/V/O reads of the attention core"},
		{"`bytes_kv`", "KV cache: `L` read + 1 written per sequence in decode, `S` written in prefill"},
		{"`bytes_temporary`", "elementwise traffic and naive attention score/prob matrices"},
	})
	w.h3("Byte Dominance Test")
	w.printf("`share(x) = bytes_x / bytes_hbm`. Decision rules: `share(weights) > 70%%` → weight residency, batching, compression; `share(kv) > 30%%` and growing with `L` → KV dtype, layout, cache; `share(temporary)` large only under naive attention → flash/fused attention.\n\n")
	rows = nil
	first, last := r.Analysis.Profiles[0].Name, w.lastProfile()
	for _, ph := range analyzer.Phases {
		n, _ := w.res(ph, first)
		e, _ := w.res(ph, last)
		ns, es := analyzer.ByteShares(n.Step.Cost), analyzer.ByteShares(e.Step.Cost)
		rows = append(rows, []string{code(string(ph)), p1(ns.Weights), p1(ns.KV), p1(ns.Temporary), p1(es.Weights), p1(es.KV), p1(es.Temporary), code(es.Dominant())})
	}
	w.table([]string{"Mode", "weights " + first, "kv " + first, "temp " + first, "weights " + last, "kv " + last, "temp " + last, "dominant (" + last + ")"}, "lrrrrrrl", rows)
	pn, _ := w.res(analyzer.Prefill, first)
	pe, _ := w.res(analyzer.Prefill, last)
	dc, _ := w.res(analyzer.Decode, last)
	ds := analyzer.ByteShares(dc.Step.Cost)
	w.printf("\nIn this run, prefill temporary-byte share moves from %s (`%s`) to %s (`%s`). Decode in `%s` mode has weights %s, KV %s and temporary %s of its bytes; its dominant term is `%s`.\n",
		p1(analyzer.ByteShares(pn.Step.Cost).Temporary), first, p1(analyzer.ByteShares(pe.Step.Cost).Temporary), last, last, p1(ds.Weights), p1(ds.KV), p1(ds.Temporary), ds.Dominant())
	w.h3("Mode Byte Decomposition")
	rows = nil
	for _, ph := range analyzer.Phases {
		for _, p := range r.Analysis.Profiles {
			res, _ := w.res(ph, p.Name)
			c := res.Step.Cost
			rows = append(rows, []string{code(string(ph)), code(p.Name), SI(c.BytesWeights, "B"), SI(c.BytesActivations, "B"), SI(c.BytesKV, "B"),
				SI(c.BytesTemporary, "B"), SI(c.BytesHBM(), "B"), SI(c.FloorWeights+c.FloorKV, "B") + floorMark(res)})
		}
	}
	w.table([]string{"Mode", "Exec", "bytes_weights", "bytes_activations", "bytes_kv", "bytes_temporary", "bytes_hbm", "compulsory"}, "llrrrrrr", rows)
}

func fracs(m map[string]float64) string {
	var out []string
	for _, d := range []string{"fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"} {
		if v, ok := m[d]; ok {
			out = append(out, fmt.Sprintf("%s %.2f", d, v))
		}
	}
	return strings.Join(out, ", ")
}

func p1(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func floorMark(r analyzer.Result) string {
	if r.Timing.BelowFloor {
		return " ⚠"
	}
	return ""
}

// checkpointName names the run a report describes: model, run id, label and step.
func checkpointName(r analyzer.RunInfo) string {
	s := "`" + Visible(r.Name) + "`"
	if r.ID > 0 {
		s += fmt.Sprintf(" run %d", r.ID)
	}
	if r.Label != "" {
		s += " " + Visible(r.Label)
	}
	if r.Step != nil {
		s += fmt.Sprintf(" at step %d", *r.Step)
	}
	return s
}
