package render

import (
	"fmt"
	"math"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/layout"
	"github.com/mrep-dev/mrep/report"
)

func int64s(xs []int64) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func (w *reportWriter) roofline() {
	r := w.r
	sc := r.Analysis.Scenario
	pt := r.Primary
	last := w.lastProfile()
	w.h2("Roofline Analysis")
	w.printf("Points sit at (`AI_hbm`, `TF_est`) with `TF_est = F_theory / T_est`; the roofline bound is `min(P_peak, BW_hbm * AI_hbm)`. Sweeps vary one axis at a time.\n")
	w.h3("Reading a Roofline Point")
	dec, _ := w.res(analyzer.Decode, last)
	pre, _ := w.res(analyzer.Prefill, last)
	side := func(ai float64) string {
		if ai >= pt.Knee {
			return "compute-bound"
		}
		return "memory-bound"
	}
	w.printf("Left of the ridge (`AI_hbm < OI_knee`) a point is bounded by HBM, right of it by compute. This is a roofline diagnostic; the `Regime` labels in KPI tables come from the time model.\n\nFor this run (`%s` mode, primary target `%s`), decode has `AI_hbm=%.2f` against `OI_knee=%.2f`, so it is `%s` under the HBM roofline; prefill has `AI_hbm=%.2f`, so it is `%s`.\n",
		last, pt.Label(), dec.Timing.AIHBM, pt.Knee, side(dec.Timing.AIHBM), pre.Timing.AIHBM, side(pre.Timing.AIHBM))
	w.h3("Configuration & Assumptions")
	limits := func(lo, hi float64) string {
		if lo == 0 && hi == 0 {
			return "None"
		}
		return fmt.Sprintf("(%g, %g)", lo, hi)
	}
	co := w.o.Chart
	rx0, rx1, ry0, ry1 := co.spec("", ceilings(r)).withPoints(overviewPoints(r)).Limits()
	rows := [][]string{
		{"Batch size (`B`)", code(fmt.Sprint(sc.Batch))}, {"Prefill sequence length (`S`)", code(fmt.Sprint(sc.Seq))},
		{"Decode KV length (`L`)", code(fmt.Sprint(sc.KVLen))},
		{"Weight bytes (`W` dtype)", code(fmt.Sprint(sc.WeightBytes))}, {"Activation bytes (`A`)", code(fmt.Sprint(sc.ActBytes))},
		{"KV-cache bytes (`A_kv`)", code(fmt.Sprint(sc.KVBytes))}, {"Gradient bytes (training)", code(fmt.Sprint(sc.GradBytes))},
		{"Tensor parallel (`TP`)", code(fmt.Sprint(sc.TP))}, {"Expert parallel (`EP`, DP = EP)", code(fmt.Sprint(sc.EP))},
	}
	if fp := r.Model.Fingerprint; fp.MoE != nil {
		rows = append(rows, []string{"Routed experts per GPU (`E/EP`)", code(fmt.Sprint(fp.MoE.RoutedExperts / sc.EP))})
	}
	training := fmt.Sprintf("forward + backward + optimizer (recompute `%s`, grad accumulation %d)", sc.Recompute, sc.GradAccum)
	if sc.SeedTraining {
		training = fmt.Sprintf("seed compatibility: prefill x %g FLOPs, x %g bytes", analyzer.SeedTrainingFlopsMult, analyzer.SeedTrainingBytesMult)
	}
	rows = append(rows,
		[]string{"Training model", training},
		[]string{"Time model (achieved GEMM ceiling, HBM share, launch latency)", code(fmt.Sprintf("%s; %.2f; %.1f µs", fracs(pt.Chip.Efficiency.GEMMFrac), pt.Chip.Efficiency.HBMFrac, pt.Chip.Efficiency.KernelLatencyUs))},
		[]string{"Primary roofline target", code(pt.Label())},
		[]string{"Primary peak compute (`P_peak`)", code(fmt.Sprintf("%.1f TFLOPs", pt.Peak/1e12))},
		[]string{"HBM bandwidth (`BW_hbm`)", code(fmt.Sprintf("%.0f GB/s", pt.BWHBM/1e9))},
		[]string{"Interconnect bandwidth (`BW_net`, per direction)", code(fmt.Sprintf("%.0f GB/s", pt.BWNet/1e9))},
		[]string{"HBM ridge (`OI_knee`)", code(fmt.Sprintf("%.3f FLOP/byte", pt.Knee))},
		[]string{"Network ridge (`OI_net`)", code(fmt.Sprintf("%.3f FLOP/byte", pt.OINet))},
		[]string{"Decode batch sweep", code(int64s(r.Options.Batches))},
		[]string{"Prefill sequence sweep", code(int64s(r.Options.Seqs))},
		[]string{"Requested roofline x-limits", code(limits(co.XMin, co.XMax))},
		[]string{"Requested roofline y-limits", code(limits(co.YMin, co.YMax))},
		[]string{"Rendered roofline x-limits (overview)", code(fmt.Sprintf("(%g, %g)", rx0, rx1))},
		[]string{"Rendered roofline y-limits (overview)", code(fmt.Sprintf("(%g, %g)", ry0, ry1))},
		[]string{"Roofline label mode", code(orNone(co.LabelMode))},
	)
	w.table([]string{"Property", "Value"}, "ll", rows)
	w.printf("\n**Roofline Targets (%s dense)**\n\n", strings.ToUpper(sc.ComputeDType))
	rows = nil
	for _, t := range r.Analysis.Targets {
		rows = append(rows, []string{code(t.Label()), fmt.Sprintf("%.1f", t.Peak/1e12), fmt.Sprintf("%.0f", t.BWHBM/1e9), fmt.Sprintf("%.3f", t.Knee), IEC(t.Chip.MemoryBytes())})
	}
	w.table([]string{"Chip", "Peak TFLOPs", "HBM GB/s", "OI_knee (FLOP/byte)", "Memory"}, "lrrrr", rows)
	w.h3("Roofline Overview")
	w.printf("Model points use the primary target; every target's roofline is drawn for comparison.\n\n")
	w.image("roofline")
	tr, _ := w.res(analyzer.Training, last)
	w.printf("**Interpretation.** `%s` training and prefill intensities (%.2f, %.2f) read against `OI_knee=%.2f`; decode at %.2f shows whether serving is still memory-limited under these assumptions.\n",
		last, tr.Timing.AIHBM, pre.Timing.AIHBM, pt.Knee, dec.Timing.AIHBM)
	w.h3("Derivation Notes")
	w.printf("Prefill is parameterized by prompt length `S`, decode by KV length `L`: naive prefill attention has `O(S^2)` score traffic, decode attention `O(L)` KV reads. The x-axis is `AI_hbm`; network effects enter through `T_net` in `T_est`.\n")
	w.h3("Why regimes differ across training/prefill/decode")
	w.printf("Training and prefill run large GEMMs with high reuse (M ≈ B·S = %d here), so they can approach compute-bound operation; decode runs GEMMs with M ≈ B = %d and reads the KV cache every step, which keeps it memory-sensitive even as batch grows. Training adds the backward pass and the optimizer step, whose state traffic does not amortize with batch.\n", sc.Batch*sc.Seq, sc.Batch)

	w.h3("Execution Models (naive vs efficient)")
	w.printf("#### Regime KPI Matrix\n\nOne row per phase and exec mode on `%s`. `Regime` is where most of `T_est` goes; tokens/s per GPU with `B*S` tokens per training/prefill step and `B` per decode step. ⚠ marks a profile whose knobs go below the compulsory HBM traffic (the prediction uses the floor).\n\n", pt.Label())
	rows = nil
	for _, ph := range analyzer.Phases {
		for _, p := range r.Analysis.Profiles {
			res, _ := w.res(ph, p.Name)
			c, tm := res.Step.Cost, res.Timing
			rows = append(rows, []string{code(string(ph)), code(p.Name), SI(tm.FRealizable, "FLOP"), SI(c.BytesHBM(), "B"), Plain(tm.AIHBM), Pct(tm.MFU),
				Ms(tm.TEst) + floorMark(res), Ms(tm.TRoofline), fmt.Sprintf("%.2f", tm.TokensPerS), code(tm.Regime)})
		}
	}
	w.table([]string{"Mode", "Exec", "F_realizable", "bytes_hbm", "AI_hbm", "MFU_est", "T_est (ms)", "T_roofline (ms)", "Tokens/s per GPU", "Regime"}, "llrrrrrrrl", rows)
	w.printf("\n`T_est` is the achievable prediction (each kernel at what `%s`'s kernels achieve, launch latency and exposed communication included); `T_roofline` is the ideal ceiling of the same work at datasheet peak and nominal bandwidth, which no run beats. Where `T_est` goes:\n\n", pt.Label())
	rows = nil
	for _, ph := range analyzer.Phases {
		for _, p := range r.Analysis.Profiles {
			res, _ := w.res(ph, p.Name)
			b := res.Timing.Breakdown
			rows = append(rows, []string{code(string(ph)), code(p.Name), Ms(b.TGEMM), Ms(b.TAttention), Ms(b.TMemory), Ms(b.TComm), Ms(b.TLatency),
				fmt.Sprintf("%.0f", b.Launches), Ms(res.Timing.TEst), fmt.Sprintf("%.2f", res.Timing.EtaTC)})
		}
	}
	w.table([]string{"Mode", "Exec", "GEMMs (ms)", "attention (ms)", "memory-bound kernels (ms)", "exposed comm (ms)", "launch latency (ms)", "launches", "T_est (ms)", "eta_tc"}, "llrrrrrrrr", rows)
	w.floorNotes()
	if len(r.Analysis.Targets) > 1 {
		w.printf("\n**All targets (`%s` mode)**\n\n", last)
		rows = nil
		for _, t := range r.Analysis.Targets {
			for _, ph := range analyzer.Phases {
				res, _ := r.Analysis.Find(t.Label(), ph, last)
				rows = append(rows, []string{code(t.Label()), code(string(ph)), Plain(res.Timing.AIHBM), Ms(res.Timing.TEst) + floorMark(res), Ms(res.Timing.TRoofline), fmt.Sprintf("%.2f", res.Timing.TokensPerS), code(res.Timing.Regime)})
			}
		}
		w.table([]string{"Target", "Mode", "AI_hbm", "T_est (ms)", "T_roofline (ms)", "Tokens/s per GPU", "Regime"}, "llrrrrl", rows)
	}

	w.printf("\n#### Category Delta Overview\n\nPer category, `AI_hbm` from its own `F_theory` and bytes; `bytes_total` includes network attribution.\n\n")
	first := r.Analysis.Profiles[0].Name
	rows = nil
	for _, ph := range analyzer.Phases {
		n, _ := w.res(ph, first)
		e, _ := w.res(ph, last)
		for _, k := range analyzer.SortedCategories(n.Step.ByCat) {
			cn, ce := n.Step.ByCat[k], e.Step.ByCat[k]
			an, ae := report.Share(cn.FTheory, cn.BytesHBM()), report.Share(ce.FTheory, ce.BytesHBM())
			delta := "—"
			if an > 0 {
				delta = fmt.Sprintf("%.1f%%", 100*(ae-an)/an)
			}
			rows = append(rows, []string{code(string(ph)), code(k), Plain(an), Plain(ae), delta, SI(cn.BytesHBM()+cn.BytesNet, "B"), SI(ce.BytesHBM()+ce.BytesNet, "B")})
		}
	}
	w.table([]string{"Mode", "Category", "AI_hbm " + first, "AI_hbm " + last, "AI delta", "bytes_total " + first, "bytes_total " + last}, "llrrrrr", rows)

	w.printf("\n#### Cross-Mode Summary\n\n")
	rows = nil
	for _, ph := range analyzer.Phases {
		n, _ := w.res(ph, first)
		e, _ := w.res(ph, last)
		rows = append(rows, []string{code(string(ph)), Plain(n.Timing.AIHBM), Plain(e.Timing.AIHBM), Ms(n.Timing.TEst), Ms(e.Timing.TEst) + floorMark(e),
			fmt.Sprintf("%.2f", n.Timing.TokensPerS), fmt.Sprintf("%.2f", e.Timing.TokensPerS)})
	}
	w.table([]string{"Mode", "AI_hbm " + first, "AI_hbm " + last, "T_est " + first + " (ms)", "T_est " + last + " (ms)", "Tokens/s " + first, "Tokens/s " + last}, "lrrrrrr", rows)

	w.decodeSweep()
	w.prefillSweep()

	w.printf("\n#### Mode Share Overview\n\nShares of `F_theory` and of bytes (HBM plus network) per category, per GPU at `TP=%d`, `EP=%d`: experts can hold the parameters while other terms hold the runtime.\n\n", sc.TP, sc.EP)
	for _, p := range r.Analysis.Profiles {
		w.image(FileStem(p.Name) + "_mode_category_stacks")
	}
	w.printf("#### Category Roofline (Per Mode)\n\n")
	for _, ph := range analyzer.Phases {
		name := string(ph)
		w.printf("**%s**\n\n", strings.ToUpper(name[:1])+name[1:])
		w.image(string(ph) + "_category_roofline")
	}
	w.exploration()
	w.memory()
	w.envelope()
}

func (w *reportWriter) floorNotes() {
	var notes []string
	for _, ph := range analyzer.Phases {
		for _, p := range w.r.Analysis.Profiles {
			res, _ := w.res(ph, p.Name)
			if res.Timing.BelowFloor {
				notes = append(notes, fmt.Sprintf("- ⚠ `%s`/`%s`: %s.", ph, p.Name, res.Timing.FloorNote))
			}
		}
	}
	if len(notes) > 0 {
		w.printf("\n**Physics check.**\n\n%s\n", strings.Join(notes, "\n"))
	}
}

func (w *reportWriter) decodeSweep() {
	r := w.r
	pt := r.Primary
	first, last := r.Analysis.Profiles[0].Name, w.lastProfile()
	w.printf("\n#### Decode Batch Sweep - Model-Level\n\nDecode batch `B` varies with `L=%d` and `TP=%d`, `EP=%d` fixed. `B_crit` is the batch at which `AI_hbm` crosses the HBM ridge (log-log interpolation between samples); it is a ridge diagnostic and can disagree with the time-model regime when utilization effects dominate.\n\n", r.Analysis.Scenario.KVLen, r.Analysis.Scenario.TP, r.Analysis.Scenario.EP)
	bc := func(p string) string {
		if b, ok := r.BCrit[p]; ok {
			return fmt.Sprintf("%.1f", b)
		}
		return "None"
	}
	w.printf("`B_crit` at HBM ridge (`AI_hbm = OI_knee = %.2f`): %s=`%s`, %s=`%s`.\n\n", pt.Knee, first, bc(first), last, bc(last))
	var rows [][]string
	for _, p := range r.DecodeSweep {
		n, e := p.Results[first], p.Results[last]
		rows = append(rows, []string{fmt.Sprint(p.X), Plain(n.Timing.AIHBM), Plain(e.Timing.AIHBM), Ms(n.Timing.TEst), Ms(e.Timing.TEst) + floorMark(e),
			fmt.Sprintf("%.2f", n.Timing.TFEst), fmt.Sprintf("%.2f", e.Timing.TFEst), code(n.Timing.Regime), code(e.Timing.Regime)})
	}
	w.table([]string{"Batch", "AI_hbm " + first, "AI_hbm " + last, "T_est " + first + " (ms)", "T_est " + last + " (ms)", "TF_est " + first, "TF_est " + last, "Regime " + first, "Regime " + last}, "rrrrrrrll", rows)
	w.printf("\n**How These Numbers Are Calculated**\n\n```text\nF_theory(B,L,m) = sum_i F_i(B,L,m)\nbytes_hbm(B,L,m) = sum_i (bytes_weights_i + bytes_activations_i + bytes_kv_i + bytes_temporary_i)\nAI_hbm = F_theory / bytes_hbm\nT_k = max(FLOPs_k / (P_peak(dtype_k) * eta_k), bytes_k / (BW_hbm * hbm_frac)) + latency_k   per kernel k\nT_est = sum_k T_k + exposed collectives + step overhead;  T_comp = F_realizable / P_peak = sum_k compute_k\nT_roofline = max(F_executed / P_peak, bytes_hbm / BW_hbm, bytes_net / BW_net)   (the ceiling)\nTF_est = F_theory / T_est\nTF_roofline_hbm = min(P_peak, BW_hbm * AI_hbm)\n```\n\n")
	if wk := r.Worked; wk != nil {
		c, tm := wk.Step.Cost, wk.Timing
		rel := "<"
		if tm.AIHBM >= pt.Knee {
			rel = ">="
		}
		unclipped := pt.BWHBM * tm.AIHBM / 1e12
		w.printf("- Worked example (`%s`, `B=%d`, `L=%d`):\n  `F_theory=%.3e`, `bytes_hbm=%.3e`, so `AI_hbm=%.3e`.\n  Ridge check: `AI_hbm %s OI_knee` -> `%.3e %s %.3e`.\n  Roofline upper bound: `BW_hbm * AI_hbm = %.2f TFLOPs`; `TF_roofline_hbm = min(%.2f, %.2f) = %.2f TFLOPs`.\n  Time path: `F_realizable=%.3e` -> `T_comp=%s ms`, `T_hbm=%s ms`, `T_net=%s ms`, `T_est=%s ms` -> regime `%s`.\n  Estimated throughput: `TF_est = F_theory / T_est = %.2f TFLOPs`.\n",
			wk.Step.Profile, wk.Step.Scenario.Batch, wk.Step.Scenario.KVLen, c.FTheory, c.BytesHBM(), tm.AIHBM, rel, tm.AIHBM, rel, pt.Knee,
			unclipped, pt.Peak/1e12, unclipped, math.Min(pt.Peak/1e12, unclipped), tm.FRealizable, Ms(tm.TComp), Ms(tm.THBM), Ms(tm.TNet), Ms(tm.TEst), tm.Regime, tm.TFEst)
		if tm.BelowFloor {
			w.printf("  ⚠ %s; the knobs alone would claim %s ms.\n", tm.FloorNote, Ms(tm.TKnob))
		}
		w.printf("\n")
	}
	w.image("decode_batch_roofline")
	if b, ok := r.BCrit[last]; ok {
		w.printf("**Interpretation.** Decode reaches the ridge at `B_crit≈%.1f` (`%s`); above it, batching buys compute-bound throughput if latency allows.\n", b, last)
	} else {
		w.printf("**Interpretation.** Decode `AI_hbm` rises with batch at fixed `L` but stays left of `OI_knee=%.2f` up to B=%d (`%s`): decode remains memory-limited across the sampled serving batches.\n", pt.Knee, r.DecodeSweep[len(r.DecodeSweep)-1].X, last)
	}
}

func (w *reportWriter) prefillSweep() {
	r := w.r
	first, last := r.Analysis.Profiles[0].Name, w.lastProfile()
	w.printf("\n#### Prefill Sequence Sweep - Model-Level\n\nPrompt length `S` varies with `B=%d` fixed. Weight bytes are nearly independent of `S`, so longer prompts amortize them; naive attention adds `O(S^2)` temporaries that flash-style kernels avoid.\n\n", r.Analysis.Scenario.Batch)
	var rows [][]string
	for _, p := range r.PrefillSweep {
		n, e := p.Results[first], p.Results[last]
		rows = append(rows, []string{fmt.Sprint(p.X), Plain(n.Timing.AIHBM), Plain(e.Timing.AIHBM), Ms(n.Timing.TEst), Ms(e.Timing.TEst) + floorMark(e),
			fmt.Sprintf("%.2f", n.Timing.TFEst), fmt.Sprintf("%.2f", e.Timing.TFEst)})
	}
	w.table([]string{"Sequence", "AI_hbm " + first, "AI_hbm " + last, "T_est " + first + " (ms)", "T_est " + last + " (ms)", "TF_est " + first, "TF_est " + last}, "rrrrrrr", rows)
	w.printf("\n")
	w.image("prefill_seq_roofline")
	cross := "never"
	for _, p := range r.PrefillSweep {
		if p.Results[last].Timing.AIHBM >= r.Primary.Knee {
			cross = fmt.Sprintf("at S=%d", p.X)
			break
		}
	}
	w.printf("**Interpretation.** In `%s` mode prefill crosses the ridge %s in this sweep.\n", last, cross)
}

func (w *reportWriter) exploration() {
	r := w.r
	if len(r.Exploration) == 0 {
		return
	}
	pt := r.Primary
	w.h3("Decode Compute-Bound Exploration (DP=EP, TP=1)")
	if r.Model.Fingerprint.MoE == nil {
		w.printf("This model has no routed experts, so only `EP=1` applies. ")
	}
	w.printf("For each expert-parallel size `EP` and KV length `L`, can decode become compute-limited, and at what per-GPU batch `B_g`? With `DP=EP`, each GPU holds `E/EP` experts and dispatches tokens over the network. `OI_inf_hbm(L)` is `AI_hbm` as `B_g→∞` (weights amortized, KV reads remain); `OI_net` is the same against network bytes. `min B_g` is the first power of two up to %d with `T_comp ≥ %.2f*max(T_hbm, T_net)` (`%s` mode, `OI_knee=%.1f`, `OI_net` ridge %.1f).\n\n",
		r.Options.ExploreMaxB, r.Options.ExploreAlpha, w.lastProfile(), pt.Knee, pt.OINet)
	var rows [][]string
	for _, e := range r.Exploration {
		minB := ""
		if e.MinB > 0 {
			minB = fmt.Sprint(e.MinB)
		}
		net := "∞ (no network bytes)"
		if e.OINet != nil {
			net = fmt.Sprintf("%.1f", *e.OINet)
		}
		rows = append(rows, []string{fmt.Sprint(e.EP), fmt.Sprint(e.L), fmt.Sprintf("%.1f", e.OIInfHBM), net, minB, e.Limiter})
	}
	w.table([]string{"EP", "L (KV len)", "OI_inf_hbm (F/B)", "OI_net (F/B)", fmt.Sprintf("min B_g (alpha=%.2f)", r.Options.ExploreAlpha), "limiter @ min B_g"}, "rrrrrl", rows)
	fp := r.Model.Fingerprint
	w.printf("\n**Model-side drivers.** KV elements per token per layer `C_kv=%d`", fp.CKV)
	if fp.MLA != nil {
		w.printf(" (MLA: `r_kv + d_rope = %d + %d`)", fp.MLA.KVLoraRank, fp.MLA.QKRope)
	}
	if fp.MoE != nil {
		w.printf("; routed experts `E=%d`, `top_k=%d`, `d_moe=%d`", fp.MoE.RoutedExperts, fp.MoE.TopK, fp.MoE.ExpertFFN)
	}
	lo, hi := r.Exploration[0], r.Exploration[len(r.Exploration)-1]
	w.printf(". From `L=%d` to `L=%d`, `OI_inf_hbm` falls from %.1f to %.1f: once KV bytes dominate, intensity declines like `~1/L` and no batch moves decode past the ridge.\n", lo.L, hi.L, lo.OIInfHBM, hi.OIInfHBM)
}

func (w *reportWriter) memory() {
	r := w.r
	f := r.Memory
	l := f.Layout
	w.h3("Memory Feasibility")
	w.printf("Resident bytes per GPU at the anchor, from the one memory model `analyze` and `plan train` use: inference holds the weights (`TP=%d`, `EP=%d`), the KV cache and one prefill step's activations; training on the anchor's own layout (micro-batch %d, `TP=%d`, `EP=%d`, one pipeline stage, no optimizer sharding) holds Megatron's bf16 weights, fp32 main gradients, fp32 master weights and Adam moments (18 B per parameter), the saved activations by component (recompute `%s`), the logits and loss, the backward's working set, the caching allocator's fitted share (%.0f%% of what a step allocates and frees) and the CUDA/NCCL runtime; its verdict is tight within the model's measured ±%.0f%%. For a sharded layout, another framework or a fine-tune run `mrep plan train` or `mrep analyze --dp/--zero/--pp`.\n\n",
		r.Analysis.Scenario.TP, r.Analysis.Scenario.EP, l.MBS, l.TP, l.EP, l.Recompute, 100*layout.AllocatorShare, 100*layout.MemoryUncertainty)
	byName := func(ts []layout.Term) map[string]float64 {
		out := map[string]float64{}
		for _, t := range ts {
			out[t.Name] = t.Bytes
		}
		return out
	}
	inf, tr := byName(f.Inference.Memory.Terms()), byName(f.Training.Memory.Terms())
	var names []string // every term either side, in the memory model's order
	seen := map[string]bool{}
	for _, t := range (layout.Memory{Weights: 1, MasterWeights: 1, Gradients: 1, Optimizer: 1, Activations: 1, MoEBuffers: 1, Logits: 1,
		Transient: 1, CommBuffers: 1, KV: 1, Allocator: 1, Runtime: 1, Margin: 1}).Terms() {
		if !seen[t.Name] {
			seen[t.Name] = true
			names = append(names, t.Name)
		}
	}
	var rows [][]string
	for _, name := range names {
		a, b := inf[name], tr[name]
		if a == 0 && b == 0 {
			continue
		}
		rows = append(rows, []string{name, IEC(a), IEC(b)})
	}
	rows = append(rows, []string{"**total**", IEC(f.Inference.Memory.Total), IEC(f.Training.Memory.Total)},
		[]string{"HBM (`" + r.Primary.Chip.Name + "`)", IEC(f.Inference.Capacity), IEC(f.Training.Capacity)})
	w.table([]string{"Item", "Inference", "Training"}, "lrr", rows)
	w.printf("\nInference fits the HBM: `%s` (%s of it); training on this layout: `%s` (%s).", yesNo(f.Inference.Fits),
		pct(f.Inference.Memory.Total, f.Inference.Capacity), f.Training.Status, pct(f.Training.Memory.Total, f.Training.Capacity))
	if !f.Inference.Fits {
		need := math.Ceil(f.Inference.Memory.Total / f.Inference.Capacity)
		w.printf(" Holding the weights and this KV cache takes at least %.0f GPUs of this kind.", need)
	}
	w.printf("\n")
}

func (w *reportWriter) envelope() {
	r := w.r
	if len(r.Envelope) == 0 {
		return
	}
	w.h3("Communication Envelope")
	w.printf("Routed-MoE dispatch and combine move each token's activation to its `k` experts and back. At `EP=%d`, the inter-device share is `(EP-1)/EP`; the time is against `BW_net=%.0f GB/s` per direction.\n\n", r.Analysis.Scenario.EP, r.Primary.BWNet/1e9)
	var rows [][]string
	for _, e := range r.Envelope {
		rows = append(rows, []string{code(string(e.Phase)), SI(e.IntraBytes, "B"), SI(e.InterBytes, "B"), Ms(e.Time)})
	}
	w.table([]string{"Mode", "Dispatch + combine (all)", "Inter-device (est.)", "Interconnect Time (ms, est.)"}, "lrrr", rows)
}

func (w *reportWriter) sensitivity() {
	r := w.r
	w.h2("Sensitivity Analysis")
	if len(r.Sensitivity) == 0 {
		w.printf("Sensitivity is off for this report (`--sensitivity off`, or the model has no attention to vary).\n")
		return
	}
	last := w.lastProfile()
	w.printf("We run the `%s` full factorial grid (total points: `%d`) over decode on `%s` to find which knobs move `T_est` and the regime. The full sweep is in `%s`.\n\n", r.Grid, len(r.Sensitivity), r.Primary.Label(), w.o.CSVName)
	var rows [][]string
	for _, e := range r.Findings.Extremes {
		for _, pt := range append(e.Fast, e.Slow...) {
			k := pt.Knobs
			topK := "—"
			if k.TopK > 0 {
				topK = fmt.Sprint(k.TopK)
			}
			rows = append(rows, []string{code(k.Exec), fmt.Sprint(k.KVBytes), topK, fmt.Sprintf("%.2f", k.KVRankScale), fmt.Sprintf("%.2f", k.HiddenScale), fmt.Sprint(k.L),
				Plain(pt.Timing.AIHBM), Ms(pt.Timing.TEst) + map[bool]string{true: " ⚠", false: ""}[pt.Timing.BelowFloor], Pct(pt.Timing.MFU), code(pt.Timing.Regime)})
		}
	}
	w.table([]string{"Exec", "kv_dtype(B)", "top_k", "kv_rank_scale", "hidden_scale", "L", "AI_hbm", "T_est(ms)", "MFU_est", "Regime"}, "lrrrrrrrrl", rows)
	counts, below := r.Findings.Regimes, r.Findings.BelowFloor
	var cs []string
	for _, k := range []string{"compute-bound", "hbm-bound", "net-bound"} {
		if counts[k] > 0 {
			cs = append(cs, fmt.Sprintf("%d `%s`", counts[k], k))
		}
	}
	w.printf("\nThe three fastest and three slowest points per mode. In `%s` mode the grid has %s points; %d are below the compulsory HBM traffic (⚠).\n", last, strings.Join(cs, ", "), below)
	w.h3("Knob Ranking (Decode)")
	w.printf("Efficient-mode decode points; effect size = spread of the median `T_est` across a knob's values, relative to the smallest median.\n\n")
	rows = nil
	for _, k := range r.Ranks {
		var parts []string
		for _, v := range k.Values {
			parts = append(parts, fmt.Sprintf("%s:%.2f", v, k.Medians[v]*1e3))
		}
		rows = append(rows, []string{k.Knob, fmt.Sprintf("%.1f%%", 100*k.Effect), code(strings.Join(parts, ", "))})
	}
	w.table([]string{"Knob", "Effect size", "Median `T_est(ms)` by value"}, "lrl", rows)
	w.printf("\nHow to use the CSV: filter to decode points of one exec mode; plot `T_est_ms` against `L` grouped by `kv_dtype_bytes` and `top_k`; track `regime` and `below_floor` to see which knobs change the limiter.\n")
}

func (w *reportWriter) limits() {
	r := w.r
	last := w.lastProfile()
	w.h2("Architectural Limits")
	var parts []string
	for _, ph := range analyzer.Phases {
		res, _ := w.res(ph, last)
		s := fmt.Sprintf("%s is `%s` (`T_est` %s ms", ph, res.Timing.Regime, Ms(res.Timing.TEst))
		if res.Timing.BelowFloor {
			s += fmt.Sprintf(" (the knobs alone claim %s ms, below the compulsory floor)", Ms(res.Timing.TKnob))
		}
		parts = append(parts, s+")")
	}
	w.printf("On `%s` in `%s` mode, %s.", r.Primary.Label(), last, strings.Join(parts, "; "))
	if len(r.Exploration) > 0 {
		reach := 0
		for _, e := range r.Exploration {
			if e.MinB > 0 {
				reach++
			}
		}
		w.printf(" Decode becomes compute-favourable in %d of %d (EP, L) settings explored; where it does not, KV traffic growing with `L` keeps `OI_inf_hbm` below the ridge.", reach, len(r.Exploration))
	}
	if fp := r.Model.Fingerprint; fp.MoE != nil {
		if r.Analysis.Scenario.EP > 1 {
			w.printf(" With `EP=%d`, routed dispatch crosses the network and `T_net` enters the time model.", r.Analysis.Scenario.EP)
		} else {
			w.printf(" MoE dispatch stays on the device at `EP=1`; it becomes a network term only when `EP > 1`.")
		}
	}
	if inf := r.Memory.Inference; inf.Memory.Weights > inf.Capacity {
		w.printf(" The weights alone exceed one `%s` (%s of %s), so serving needs model parallelism before any of these regimes applies.", r.Primary.Chip.Name, IEC(inf.Memory.Weights), IEC(inf.Capacity))
	} else if !inf.Fits {
		w.printf(" The weights and this KV cache exceed one `%s` (%s of %s), so serving this batch needs model parallelism or a shorter context.", r.Primary.Chip.Name, IEC(inf.Memory.Total), IEC(inf.Capacity))
	}
	w.printf("\n")
}

func (w *reportWriter) appendix() {
	w.h2("Appendix A: Full FLOP Derivations")
	fp := w.r.Model.Fingerprint
	w.printf("- Dense linear: input `[B,S,In]`, weight `[In,Out]`: `F = 2*B*S*In*Out`; backward `2F` (activation and weight gradients).\n")
	w.printf("- Attention core per layer: `F_QK = 2*B*h*S*L_k*d_qk`, `F_AV = 2*B*h*S*L_k*d_v`, softmax `3*B*h*S*L_k` (Chinchilla's count); `L_k = S` in prefill (full, as FlopCounterMode counts; a causal kernel executes `(S+1)/(2S)` of it), `L_k = L` in decode, capped at the sliding window.\n")
	if m := fp.MLA; m != nil {
		w.printf("- MLA (this model): `F_Q = 2*T*(H*%d + %d*h*(%d+%d))`, `F_KV = 2*T*(H*(%d+%d) + %d*h*(%d+%d))`, from the `q_a/q_b/kv_a/kv_b` projections in the tree; prefill attends with `d_qk=%d`, `d_v=%d`; absorbed decode attends in the latent with `d_qk=%d`, `d_v=%d`; the cache holds `%d` elements per token per layer.\n",
			m.QLoraRank, m.QLoraRank, m.QKNope, m.QKRope, m.KVLoraRank, m.QKRope, m.KVLoraRank, m.QKNope, m.VHead, m.QKNope+m.QKRope, m.VHead, m.KVLoraRank+m.QKRope, m.KVLoraRank, fp.CKV)
	}
	if moe := fp.MoE; moe != nil {
		w.printf("- Routed MoE per token: `F = k * 2 * 3 * H * d_moe = %d * 6 * %d * %d`; weight traffic follows `E*(1-(1-k/E)^T)` distinct experts for `T` tokens.\n", moe.TopK, fp.Hidden, moe.ExpertFFN)
	}
	w.printf("- Training: `F_theory = F_fwd + 2*F_fwd` (model FLOPs; PaLM's `6N + 12*L*H*Q*T` per token); recomputation adds hardware FLOPs to `F_realizable` only; Adam adds %d scalar FLOPs per parameter.\n", analyzer.AdamFlopsPerParam)
	w.printf("- Checked against: PyTorch FlopCounterMode per module (dense, MoE, MLA traces), Korthikanti et al. `72*B*s*l*h^2*(1+s/6h+V/12lh)`, PaLM, NVIDIA's Llama-3.1-70B recipe (3.94e15 per sequence), the founding documents' Llama-3-8B hand calculations (the analyzer's tests carry them).\n")
	w.h2("Appendix B: Common Failure Modes / Debugging Checklist")
	w.printf("- `T_comp` uses `F_realizable` as a peak-equivalent cost (`T_comp = F_realizable / P_peak`), never `F_theory` divided by a utilization twice.\n- WRF applies to weight reads in every phase, never to gradient writes or optimizer state.\n- KV bytes are per layer times layers, capped by sliding windows; MLA caches the latent once (no K/V factor 2).\n- Temporary bytes are not double-counted as activations: GEMM inputs/outputs are activations, elementwise and score/prob traffic are temporaries.\n- dtype byte widths are set separately for weights, activations, KV and gradients; check the configuration table.\n- A ⚠ result's knobs go below the compulsory HBM traffic: `T_est` already uses the floor; the knobs' own claim is `T_knob` in report.json.\n- Tied embeddings count once as parameters but the LM head still reads its matrix every step.\n")
}
