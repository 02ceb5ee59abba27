package render

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	gochart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"

	"github.com/mrep-dev/mrep/layout"
	"github.com/mrep-dev/mrep/render/chart"
)

// WritePlan renders `mrep plan train`: the ranked layouts with their time and memory.
func WritePlan(out io.Writer, model, target string, p layout.Plan) error {
	w := &errWriter{w: out}
	o := p.Options
	what := model
	if o.FineTune != "" || o.Knobs.Stack != "" {
		var parts []string
		if o.FineTune != "" {
			parts = append(parts, o.FineTune)
		}
		if o.Knobs.Stack != "" {
			parts = append(parts, o.Knobs.Stack+" stack")
		}
		what += " (" + strings.Join(parts, ", ") + ")"
	}
	w.printf("# Training layouts: %s on %d x %s\n\n", what, o.GPUs, target)
	w.printf("Global batch %d sequences of %d tokens; %d layouts evaluated, %d fit in %.0f GiB per GPU. Step time is the achievable model: GA micro-batches on the slowest pipeline stage, the pipeline bubble (interleaved 1F1B's `(PP-1)/VP`, or DualPipe's `(PP/2-1)(F&B+B-3W)`), the exposed expert all-to-all, exposed data-parallel traffic and the (distributed) optimizer step. MFU counts `F_theory` (full-S² attention).\n\n",
		o.GBS, o.Seq, p.Evaluated, p.Feasible, o.MemoryBytes/(1<<30))
	if p.Feasible == 0 {
		w.printf("%s\n", p.NoFit)
		return w.err
	}
	var rows [][]string
	for i, c := range p.Top {
		l, s := c.Step.Layout, c.Step
		rows = append(rows, []string{fmt.Sprint(i + 1), l.String(), fmt.Sprint(l.MBS), fmt.Sprint(l.GA()), l.Recompute,
			fmt.Sprintf("%.2f", s.StepTime), fmt.Sprintf("%.0f", s.TokensPerS/float64(l.GPUs())), fmt.Sprintf("%.1f%%", 100*s.MFU),
			fmt.Sprintf("%.1f", c.Memory.Total/(1<<30)), fmt.Sprintf("%s, %+.1f", c.Fit.Status, c.Fit.Headroom()/(1<<30)),
			fmt.Sprintf("%.2f / %.2f / %.2f / %.2f", s.Bubble, s.DPExposed, s.Optimizer, s.Offload), c.Why})
	}
	table(w, []string{"#", "Layout", "MBS", "GA", "Recompute", "Step (s)", "Tokens/s/GPU", "MFU", "Memory (GiB)", "Verdict, headroom (GiB)", "Bubble / DP / optimizer / offload (s)", "Why ahead of the next"}, "rlrrlrrrrlrl", rows)
	if p.Traded != "" {
		w.printf("\nThe winner was %s.\n", p.Traded)
	}
	if p.OverOnly != "" {
		w.printf("\n**Over the capacity:** %s.\n", p.OverOnly)
	}
	if best := p.Top[0]; best.Analyze != "" {
		w.printf("\nThe winner alone, step by step (the same step time, every term and the memory per GPU; `--json` gives each row's command):\n\n```sh\n%s\n```\n", Visible(best.Analyze))
	}
	best := p.Top[0]
	k := best.Step.Layout
	w.printf("\nMemory per GPU of the winner, term by term (%s framework, %s optimizer; %s; tight means within the memory model's ±%.0f%% measured uncertainty; the allocator's share, %.0f%% of the memory a step allocates and frees, is fitted to measured peaks):\n\n",
		frameworkLabel(k), orDefault(k.Optimizer, "adamw"), stageHolding(k, best.Memory.Stage), 100*layout.MemoryUncertainty, 100*layout.AllocatorShare)
	memoryTable(w, best.Memory)
	writeMechanisms(w, best.Step)
	return w.err
}

// writeMechanisms names the framework mechanisms the winner's time rests on, with their figures.
func writeMechanisms(w *errWriter, s layout.Step) {
	l := s.Layout
	var ms []string
	fw := orDefault(l.Framework, layout.Megatron)
	ms = append(ms, fmt.Sprintf("framework lane **%s**: its fitted figures on this chip time the kernels (chips.json efficiency.lanes.%s)", fw, fw))
	if l.PP > 1 {
		if l.A2AOverlap == layout.OverlapDualPipe {
			ms = append(ms, fmt.Sprintf("DualPipe over %d stages: bubble (PP/2-1)(F&B+B-3W) = %.2f s, two copies of a stage's parameters, PP+1 micro-batches in flight", l.PP, s.Bubble))
		} else {
			ms = append(ms, fmt.Sprintf("interleaved 1F1B, %d stages x %d virtual: bubble (PP-1)/VP micro-batches = %.2f s", l.PP, l.VP, s.Bubble))
		}
		if l.EmbeddingInPipe || l.LossInPipe {
			ms = append(ms, "embedding and loss counted as pipeline layers (Megatron's account-for-embedding/loss-in-pipeline-split)")
		}
	}
	if l.TPOverlap && l.TP > 1 {
		ms = append(ms, "TP collectives overlapped with the GEMMs (userbuffers / async TP)")
	}
	if l.EP > 1 {
		d := orDefault(l.Dispatcher, layout.DispatchAllToAll)
		ov := orDefault(l.A2AOverlap, layout.OverlapNone)
		ms = append(ms, fmt.Sprintf("expert all-to-all (%s dispatcher, overlap %s): %.2f GB sent per MoE layer and micro-batch, %.0f%% of it off the NVLink domain; %.1f ms per micro-batch, %.1f ms exposed",
			d, ov, s.A2A.BytesPerLayer/1e9, 100*s.A2A.ScaleOutShare, 1e3*s.A2A.Time, 1e3*s.A2A.Exposed))
	}
	if l.Stage() == 3 {
		what := "ZeRO-3"
		if fw == layout.FSDP {
			what = "FSDP2"
		}
		ms = append(ms, fmt.Sprintf("%s: each layer's weights gathered before use and gradients reduce-scattered after, prefetched a layer ahead; %.2f s exposed per step", what, s.DPExposed))
	}
	if l.Replicas > 1 {
		ms = append(ms, fmt.Sprintf("HSDP: sharded within %d ranks, replicated across %d groups (gradients all-reduced over the scale-out network)", l.DP*l.CP/l.Replicas, l.Replicas))
	}
	if l.MTP > 0 {
		ms = append(ms, fmt.Sprintf("%d multi-token-prediction module(s) on the last stage", l.MTP))
	}
	if l.Precision != "" && l.Precision != "bf16" {
		ms = append(ms, fmt.Sprintf("precision recipe %s: its casts and cached low-precision copies are counted", l.Precision))
	}
	w.printf("\nMechanisms of the winner:\n\n")
	for _, m := range ms {
		w.printf("- %s\n", m)
	}
}

// memoryTable lists every term of a memory, with the host memory offloading uses.
func memoryTable(w *errWriter, m layout.Memory) {
	var rows [][]string
	for _, t := range m.Terms() {
		rows = append(rows, []string{t.Name, fmt.Sprintf("%.2f", t.Bytes/(1<<30))})
	}
	rows = append(rows, []string{"**total**", fmt.Sprintf("**%.2f**", m.Total/(1<<30))})
	if m.Host > 0 {
		rows = append(rows, []string{"in host memory (not in the total)", fmt.Sprintf("%.2f", m.Host/(1<<30))})
	}
	table(w, []string{"Term", "GiB"}, "lr", rows)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// WritePlanPage is WritePlan with the chart and the Pareto front, for `plan train -o DIR`.
func WritePlanPage(out io.Writer, model, target string, p layout.Plan, chartName string) error {
	if err := WritePlan(out, model, target, p); err != nil {
		return err
	}
	w := &errWriter{w: out}
	if p.Feasible == 0 {
		return w.err
	}
	w.printf("\n![step time against memory per GPU](%s)\n\nThe Pareto front (no layout is both faster and smaller):\n\n", chartName)
	var rows [][]string
	for _, c := range p.Pareto {
		l := c.Step.Layout
		rows = append(rows, []string{fmt.Sprintf("%s MBS%d %s", l.String(), l.MBS, l.Recompute),
			fmt.Sprintf("%.1f", c.Memory.Total/(1<<30)), fmt.Sprintf("%.2f", c.Step.StepTime)})
	}
	table(w, []string{"Layout", "Memory (GiB)", "Step (s)"}, "lrr", rows)
	return w.err
}

// LayoutResult is a training step on a layout for one target, with its memory per GPU.
type LayoutResult struct {
	Target string      `json:"target"`
	Step   layout.Step `json:"step"`
	Fit    layout.Fit  `json:"memory"` // the memory model's verdict (layout.CheckTraining)
	// FineTune names the fine-tune trained ("LoRA r=16"; "" for full training).
	FineTune string `json:"fine_tune,omitempty"`
	// FitsWith, for a layout that does not fit, is the fastest setting its framework offers
	// that does (layout.Trainer.FastestFitting), and the step under it.
	FitsWith *Alternative `json:"fits_with,omitempty"`
	// HostRemedy is what removes a host-bound step's host pace on the target's stack
	// (layout.HostRemedy); empty: NVIDIA's CUDA graph.
	HostRemedy string `json:"host_remedy,omitempty"`
	// HostPaceUs is the host's time per kernel of an eager MoE layer the step was timed with
	// (the lane's moe_launch_us), and MoELaunches the kernels one MoE layer issues per
	// micro-batch (layout.Layout.MoELaunches): what the host-bound sentence quotes.
	HostPaceUs  float64 `json:"host_pace_us,omitempty"`
	MoELaunches float64 `json:"moe_launches,omitempty"`
	// FP8AttentionUnmeasured: the layout asks for FP8 attention where the chip has no measured
	// FP8 attention kernels, so it is timed as 16-bit (layout.Layout.FP8AttentionUnmeasured).
	FP8AttentionUnmeasured bool `json:"fp8_attention_unmeasured,omitempty"`
	// QuantizedExpertsStep, for a layout whose legacy grouped GEMM keeps the experts 16-bit
	// under a low-precision recipe (layout.Layout.LegacyExperts16), is the step with
	// Transformer Engine's grouped GEMM, which quantizes them (seconds; 0: not asked).
	QuantizedExpertsStep float64 `json:"quantized_experts_step_s,omitempty"`
}

// Alternative is a setting that makes a layout fit, and its step.
type Alternative struct {
	layout.Saver
	Step layout.Step `json:"step"`
	Fit  layout.Fit  `json:"memory"` // fits, or tight within the memory model's uncertainty
}

// frameworkLabel is the framework a layout's memory and time follow, with its stack.
func frameworkLabel(l layout.Layout) string {
	fw := orDefault(l.Framework, layout.Megatron)
	if l.Stack != "" {
		return l.Stack + " stack, " + fw
	}
	return fw
}

// WriteLayouts puts the training layout's verdict first: does it fit, how long is a step,
// where the time goes.
func WriteLayouts(out io.Writer, rs []LayoutResult) error {
	w := &errWriter{w: out}
	for _, r := range rs {
		l, s := r.Step.Layout, r.Step
		ft := ""
		if r.FineTune != "" {
			ft = r.FineTune + ", "
		}
		w.printf("**Training on %d GPUs of %s (%s%s, MBS %d, GBS %d, GA %d, recompute %s, %s framework, %s optimizer):** %s. Step %.3f s: %d micro-batches of %.1f ms on %s (kernels %.1f ms, exposed TP/CP/EP collectives %.1f ms in all), bubble %.1f ms, exposed data-parallel traffic %.1f ms, optimizer %.1f ms, offload %.1f ms; %.0f tokens/s (%.0f per GPU); MFU %.1f%% (F_theory), %.1f%% (6N + 12·L·H·Q·T), HFU %.1f%%.\n\n",
			l.GPUs(), r.Target, ft, l.String(), l.MBS, l.GBS, l.GA(), orDefault(l.Recompute, "none"), frameworkLabel(l), orDefault(l.Optimizer, "adamw"), r.Fit.Verdict(),
			s.StepTime, l.GA(), s.Microbatch*1e3, slowest(l), s.Kernels*1e3, s.LayerComm*1e3, s.Bubble*1e3, s.DPExposed*1e3, s.Optimizer*1e3, s.Offload*1e3, s.TokensPerS, s.TokensPerS/float64(l.GPUs()),
			100*s.MFU, 100*s.MFU6N, 100*s.HFU)
		if s.HostBound > 0.05*s.StepTime {
			// the knobs follow the host's time per step: micro-batches x MoE layers x kernels
			remedy := orDefault(r.HostRemedy, layout.HostRemedy("NVIDIA"))
			why := "each layer's forward copies its token counts to the host, so the host cannot issue its experts' kernels ahead"
			if l.SyncFreeMoE >= 2 {
				// nothing waits on the host: its launches alone outlast the GPU's kernels, and
				// the sync-free remedy is already taken
				why = "sync-free: no layer waits on the host, and its launches alone outlast the GPU's kernels"
				remedy = layout.HostRemedy("NVIDIA")
			}
			tail := "; " + remedy
			if r.HostPaceUs > 0 && r.MoELaunches > 0 {
				tail = fmt.Sprintf(". It issues %.0f kernels per MoE layer and micro-batch at %.1f µs each (the lane's host pace); a larger micro-batch (fewer micro-batches) or more expert parallelism (fewer local experts) shortens the host's share, and %s",
					r.MoELaunches, r.HostPaceUs, remedy)
			}
			w.printf("The host bounds the MoE layers: of the kernels' %.1f ms, %.1f ms is the host issuing the MoE layers' kernels eagerly, slower than the GPU runs them (%s)%s.\n\n",
				s.Kernels*1e3, s.HostBound*1e3, why, tail)
		}
		if s.Casts > 0.05*s.StepTime {
			w.printf("The %s casts take %.1f ms of the kernels (%.0f%% of the step): %s.\n\n",
				l.Precision, s.Casts*1e3, 100*s.Casts/s.StepTime, l.CastNote())
		}
		if l.LegacyExperts16() && r.QuantizedExpertsStep > 0 {
			w.printf("The legacy grouped GEMM runs the routed experts' GEMMs in 16 bits under the %s recipe (grouped_gemm's gmm has no FP8 path; the other linears are quantized): Transformer Engine's grouped GEMM (`--grouped-gemm te`) quantizes them too, a step of %.3f s.\n\n",
				l.Precision, r.QuantizedExpertsStep)
		}
		if r.FP8AttentionUnmeasured {
			w.printf("FP8 attention: %s has no measured FP8 attention kernels for the %s recipe (chips.json train_attn_frac), so its attention's matmuls are timed at the 16-bit rate (the quantize passes before them are counted) and the gain cuDNN's FP8 kernels measure on Blackwell is not claimed.\n\n",
				r.Target, l.Precision)
		}
		if a := r.FitsWith; a != nil {
			how := "fits"
			if a.Fit.Status == layout.Tight {
				how = fmt.Sprintf("is tight (within the memory model's ±%.0f%%)", 100*a.Fit.Uncertainty)
			}
			w.printf("With %s (`%s`) it %s: %.1f of %.1f GiB per GPU, step %.3f s, %.0f tokens/s per GPU.\n\n",
				a.Name, a.Flags, how, a.Fit.Memory.Total/(1<<30), a.Fit.Capacity/(1<<30), a.Step.StepTime, a.Step.TokensPerS/float64(l.GPUs()))
		} else if !r.Fit.Fits {
			w.printf("None of the settings its framework offers to save memory (the pipeline split, activation offload, recompute) makes it fit.\n\n")
		}
		if l.PP > 1 {
			w.printf("Per GPU on %s, the fullest:\n\n", stageHolding(l, r.Fit.Memory.Stage))
		}
		memoryTable(w, r.Fit.Memory)
		w.printf("\n")
	}
	return w.err
}

// PlanChart plots every feasible layout's step time against its memory per GPU, the Pareto
// front drawn through. Layouts slower than twice the best are left out so the front stays
// readable.
func PlanChart(title string, p layout.Plan) gochart.Chart {
	best := math.Inf(1)
	for _, c := range p.Considered {
		best = math.Min(best, c.Step.StepTime)
	}
	// feasible layouts, coloured by ZeRO stage, sized by recompute (none, selective, full)
	type group struct {
		zero int
		rc   string
	}
	sizes := map[string]float64{"none": 2.5, "": 2.5, "selective": 4, "full": 5.5}
	pts := map[group][2][]float64{}
	var groups []group
	var maxX float64
	for _, c := range p.Considered {
		if c.Step.StepTime > 2*best {
			continue
		}
		g := group{c.Step.Layout.Stage(), c.Step.Layout.Recompute}
		v, ok := pts[g]
		if !ok {
			groups = append(groups, g)
		}
		x := c.Memory.Total / (1 << 30)
		maxX = math.Max(maxX, x)
		pts[g] = [2][]float64{append(v[0], x), append(v[1], c.Step.StepTime)}
	}
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].zero != groups[j].zero {
			return groups[i].zero < groups[j].zero
		}
		return sizes[groups[i].rc] < sizes[groups[j].rc]
	})
	var series []gochart.Series
	var entries []chart.LegendEntry
	seenZero := map[int]bool{}
	for _, g := range groups {
		col := chart.ColorAt(2 + g.zero)
		series = append(series, gochart.ContinuousSeries{Name: fmt.Sprintf("ZeRO-%d %s", g.zero, g.rc), XValues: pts[g][0], YValues: pts[g][1],
			Style: gochart.Style{StrokeWidth: gochart.Disabled, DotWidth: sizes[g.rc], DotColor: col.WithAlpha(120)}})
		if !seenZero[g.zero] {
			seenZero[g.zero] = true
			entries = append(entries, chart.LegendEntry{Label: fmt.Sprintf("ZeRO-%d", g.zero), Color: col, Dot: true})
		}
	}
	entries = append(entries, chart.LegendEntry{Label: "size: recompute none, selective, full"})
	var fx, fy []float64
	var notes []gochart.Value2
	last := ""
	for _, c := range p.Pareto {
		if c.Step.StepTime > 2*best {
			continue // off the plot: an annotation there would squeeze the canvas to reach it
		}
		x := c.Memory.Total / (1 << 30)
		fx, fy = append(fx, x), append(fy, c.Step.StepTime)
		l := c.Step.Layout
		if lab := fmt.Sprintf("TP%d PP%d", l.TP, l.PP); lab != last { // a label where the front changes TP or PP
			notes = append(notes, gochart.Value2{XValue: x, YValue: c.Step.StepTime, Label: lab})
			last = lab
		}
	}
	series = append(series, gochart.ContinuousSeries{Name: "Pareto front", XValues: fx, YValues: fy,
		Style: gochart.Style{StrokeColor: chart.ColorAt(1), StrokeWidth: 2, DotColor: chart.ColorAt(1), DotWidth: 3}})
	entries = append(entries, chart.LegendEntry{Label: "Pareto front (labelled TP, PP)", Color: chart.ColorAt(1)})
	top := 2 * best
	if capGiB := p.Options.MemoryBytes / (1 << 30); capGiB > 0 {
		maxX = math.Max(maxX, capGiB)
		red := drawing.ColorFromHex("c0392b")
		series = append(series, gochart.ContinuousSeries{Name: "memory", XValues: []float64{capGiB, capGiB}, YValues: []float64{0.95 * best, top},
			Style: gochart.Style{StrokeWidth: 1.5, StrokeColor: red, StrokeDashArray: []float64{6, 4}}})
		entries = append(entries, chart.LegendEntry{Label: fmt.Sprintf("%.0f GiB per GPU", capGiB), Color: red, Dash: []float64{6, 4}})
	}
	if len(p.Top) > 0 {
		w := p.Top[0]
		x := w.Memory.Total / (1 << 30)
		for _, dot := range []struct {
			w float64
			c drawing.Color
		}{{12, drawing.ColorBlack}, {8, drawing.ColorFromHex("f5b700")}} {
			series = append(series, gochart.ContinuousSeries{Name: "winner", XValues: []float64{x}, YValues: []float64{w.Step.StepTime},
				Style: gochart.Style{StrokeWidth: gochart.Disabled, DotWidth: dot.w, DotColor: dot.c}})
		}
		notes = append(notes, gochart.Value2{XValue: x, YValue: w.Step.StepTime, Label: "winner: " + w.Step.Layout.String()})
		entries = append(entries, chart.LegendEntry{Label: "winner (the table's #1)", Color: drawing.ColorFromHex("f5b700"), Dot: true})
	}
	series = append(series, gochart.AnnotationSeries{Annotations: notes,
		Style: gochart.Style{FontSize: 7, StrokeColor: drawing.ColorFromHex("bbbbbb"), FillColor: drawing.ColorWhite}})
	c := gochart.Chart{
		Title: title, TitleStyle: gochart.Style{FontSize: 13}, Width: 1100, Height: 620,
		Background:     gochart.Style{Padding: gochart.Box{Top: 50, Left: 20, Right: 260, Bottom: 20}},
		XAxis:          chart.NiceXAxis("memory per GPU (GiB)", 0, 1.05*maxX),
		YAxis:          chart.NiceAxis("step time (s, layouts within 2x of the best)", 0.95*best, top),
		YAxisSecondary: gochart.YAxis{Style: gochart.Hidden()}, // unused: hidden, or go-chart draws it at NaN
		Series:         series,
	}
	c.Elements = []gochart.Renderable{chart.Legend(entries)}
	chart.LeftAxis(&c)
	return c
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}

// slowest names what sets a pipeline's pace: its slowest stage, or under DualPipe its slowest
// rank, which runs each of its two stages for half the micro-batches.
func slowest(l layout.Layout) string {
	if l.A2AOverlap == layout.OverlapDualPipe && l.PP > 1 {
		return "the slowest rank, the mean of its two DualPipe stages"
	}
	return "the slowest stage"
}

// stageHolding names the rank a memory count is for: a pipeline stage, or under DualPipe the
// pair of stages a rank holds.
func stageHolding(l layout.Layout, stage string) string {
	if l.A2AOverlap == layout.OverlapDualPipe {
		if stage == "middle" {
			return "a middle rank (DualPipe: the two middle stages)"
		}
		return "an end rank (DualPipe: the first and the last stage)"
	}
	return "the " + stage + " pipeline stage"
}
