package render

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	gochart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"

	"github.com/mrep-dev/mrep/econ"
	"github.com/mrep-dev/mrep/render/chart"
	"github.com/mrep-dev/mrep/serve"
)

// ServeInputs are the figures a serving plan's cost and energy come from, shown beside it.
type ServeInputs struct {
	Chip, Price, Power string
}

// WriteServePlan writes a serving plan as markdown: the question, the best deployments, the
// Pareto front and the inputs of the cost and energy estimates.
func WriteServePlan(out io.Writer, model string, p serve.Plan, inputs []ServeInputs) error {
	w := &errWriter{w: out}
	o := p.Options
	w.printf("# Serving %s: %d-token prompts, %d-token outputs\n\n", Visible(model), o.ISL, o.OSL)
	load := "offline: every request queued at once (maximum throughput)"
	switch p.Mode {
	case "users":
		load = fmt.Sprintf("%g concurrent users (closed loop)", o.Users)
	case "rate":
		load = fmt.Sprintf("%g requests/s (open arrivals)", o.Rate)
	}
	slo := []string{}
	if o.TTFT > 0 {
		slo = append(slo, fmt.Sprintf("TTFT ≤ %s", seconds(o.TTFT)))
	}
	if o.TPOT > 0 {
		slo = append(slo, fmt.Sprintf("TPOT ≤ %s", seconds(o.TPOT)))
	}
	if len(slo) == 0 {
		slo = append(slo, "none")
	}
	if o.Workload != "" {
		w.printf("From the %s.\n\n", o.Workload)
	}
	if o.Engine.PrefixHit > 0 {
		w.printf("Prefix cache: %.0f%% of each prompt is a hit and is not prefilled.\n\n", 100*o.Engine.PrefixHit)
	}
	if e := o.Engine; e.SpecTokens > 0 {
		why := "estimates: --spec-accept's, and an MTP head of one layer unless --spec-draft-cost says otherwise"
		if e.MTP.MTPSrc != "" && e.SpecAccept == e.MTP.AcceptAt(e.SpecTokens) {
			why = "the engine's measured MTP figures at this many drafts: " + e.MTP.MTPSrc
		}
		w.printf("Speculative decoding: %d draft tokens per step, each accepted with probability %.2f, so a step emits %.2f tokens per sequence on average; a step verifies %d query rows per sequence (weights and KV read once) and drafting costs %.3g of a decode step per draft token (%s).\n\n",
			e.SpecTokens, e.SpecAccept, e.SpecTokensPerStep(), e.SpecTokens+1, e.SpecDraftCost, Visible(why))
	}
	if e := o.Engine; e.RequestPathUs > 0 {
		how, _, _ := strings.Cut(e.MTP.RequestPathSrc, ";")
		w.printf("TTFT includes the request path a benchmark client waits beyond the engine's steps (HTTP, tokenizer, hand-off to the scheduler, streaming): %s per request (%s), or the chip's own where its engine lane fitted one.\n\n",
			seconds(e.RequestPathUs*1e-6), Visible(how))
	}
	if o.Disagg {
		w.printf("Disaggregated deployments searched too: a prefill pool and a decode pool of any two layouts, balanced for the load, each request's KV cache sent from one to the other (NVLink inside a node, else the scale-out network); a decode replica's steps carry no prefill.\n\n")
	}
	engine := "Engine"
	if e := o.Engine; e.Name != "" {
		engine = fmt.Sprintf("Engine: %s %s defaults (at most %g sequences, %d-token KV blocks);", Visible(e.Name), Visible(e.Release), e.MaxBatch, e.KVBlock)
	} else {
		engine += ":"
	}
	refuted := ""
	if n := len(p.Refuted); n > 0 {
		refuted = fmt.Sprintf(" in the steady state (%d of those simulated under the load miss it at the %s)", n, p.Refuted[0].UnderLoad.Quantile)
	}
	w.printf("Load: %s. SLO: %s. %d layouts searched, %d fit, %d deployments meet the SLO%s%s. %s in-flight batching, chunked prefill under a %g-token budget, %s.\n\n",
		load, strings.Join(slo, ", "), p.Considered, p.Fitting, p.Meeting, gpusNote(o), refuted, engine, o.Engine.TokenBudget, o.Engine.KVMemory())
	w.printf("Precision: %s GEMMs, %s weights, %s KV cache.\n\n", Visible(string(o.Scenario.ComputeDType)), o.Scenario.WeightDType.Label(), o.Scenario.KVDType.Label())
	if p.Meeting == 0 {
		w.printf("**No deployment meets the SLO and the load.** %s\n\n", Visible(p.NoConfig))
		writeRefuted(w, p)
	} else {
		var rows [][]string
		for i, c := range p.Best {
			rows = append(rows, []string{fmt.Sprint(i + 1), mdName(c.Chip), serveLayout(c), fmt.Sprint(c.GPUs),
				fmt.Sprintf("%.0f", c.Result.Concurrency), fmt.Sprintf("%.0f", c.Result.MaxByKV),
				seconds(c.Result.TTFT), seconds(c.Result.TPOT), fmt.Sprintf("%.0f", c.TokSPerGPU), fmt.Sprintf("%.1f", c.TokSPerUser),
				usd(c.USDPerMTok), tokenUSD(c.PerToken), tokenJ(c.PerToken), c.Result.Bound})
		}
		table(w, []string{"#", "Chip", "Layout", "GPUs", "Seqs/replica", "KV holds", "TTFT", "TPOT", "Tok/s/GPU", "Tok/s/user", "$/1M out, all-in (est.)", "$/1M in / out / blended", "J/token in / out / blended", "Batch bound"}, "rllrrrrrrrrrrl", rows)
		w.printf("\nAll-in: the whole spend over output tokens. In / out: input tokens carry the share of the GPUs' time prefill takes (the step beside the same step without its prompts; a disaggregated deployment's prefill pool), output tokens the rest; blended: the spend over every token, %d in and %d out per request.\n", o.ISL, o.OSL)
		if b := p.Best[0]; b.Result.Bound == "token-budget" {
			w.printf("\n**The token budget bounds the batch:** a step of %g tokens holds about %.0f sequences decoding beside the %d-token prompts that keep them fed (each decoding sequence brings %.1f prompt tokens a step), so the load takes more replicas than the memory needs; a larger --token-budget (the engines default to 8192 or more) serves it on fewer GPUs.\n",
				o.Engine.TokenBudget, b.BatchCap, o.ISL, float64(o.ISL)/math.Max(float64(o.OSL-1), 1))
		}
		writeUnderLoad(w, p)
		writeServeMemory(w, p)
		writeTTFTQuantiles(w, p.Best)
		writeDisagg(w, p.Best)
	}
	writeSimulated(w, p)
	w.printf("\nPareto front of one replica over batch caps (more tokens/s per user costs tokens/s per GPU):\n\n")
	var rows [][]string
	for _, c := range p.Pareto {
		rows = append(rows, []string{mdName(c.Chip), serveLayout(c), fmt.Sprintf("%.0f", c.BatchCap),
			fmt.Sprintf("%.1f", c.TokSPerUser), fmt.Sprintf("%.0f", c.TokSPerGPU), seconds(c.Result.TTFT), usd(c.USDPerMTok), tokenUSD(c.PerToken)})
	}
	table(w, []string{"Chip", "Layout", "Batch cap", "Tok/s/user", "Tok/s/GPU", "TTFT", "$/1M out, all-in (est.)", "$/1M in / out / blended"}, "llrrrrrr", rows)
	w.printf("\nEstimates, from these inputs (override prices with --price CHIP=USD):\n\n")
	for _, in := range inputs {
		w.printf("- %s: %s; %s\n", mdName(in.Chip), mdName(in.Price), mdName(in.Power))
	}
	if p.Command != "" {
		cmd := Visible(p.Command)
		fence := "```"
		for strings.Contains(cmd, fence) {
			fence += "`"
		}
		w.printf("\nThis plan, reproduced:\n\n%ssh\n%s\n%s\n", fence, cmd, fence)
	}
	return w.err
}

// writeUnderLoad shows what decided each deployment's SLO beside its steady state: one replica
// simulated step by step under its share of the load, at the plan's SLO quantile.
func writeUnderLoad(w *errWriter, p serve.Plan) {
	var rows [][]string
	q := ""
	for i, c := range p.Best {
		u := c.UnderLoad
		if u == nil {
			if q != "" || i > 0 {
				rows = append(rows, []string{fmt.Sprint(i + 1), mdName(c.Chip), serveLayout(c), "–", "–", "steady state only (not simulated)"})
			}
			continue
		}
		q = u.Quantile
		verdict := "meets"
		if !u.MeetsSLO {
			verdict = "misses"
		}
		ttft := seconds(u.TTFT)
		if p.Mode == "offline" {
			ttft = "–"
		}
		rows = append(rows, []string{fmt.Sprint(i + 1), mdName(c.Chip), serveLayout(c), ttft, seconds(u.TPOT), verdict})
	}
	if q == "" {
		return
	}
	how := "under its share of the load (requests arriving, queueing for admission, prefilled in chunks beside the running decodes)"
	if p.Mode == "offline" {
		how = "as a wave of twice its batch (all queued at once, prefilled in chunks beside the running decodes; a wave's TTFT is its queue, so only TPOT is held)"
	}
	w.printf("\nSLOs under load: each deployment above also meets them with one replica simulated step by step %s, at the %s of its requests (--slo-quantile):\n\n", how, q)
	table(w, []string{"#", "Chip", "Layout", q + " TTFT", q + " TPOT", "SLO"}, "rllrrl", rows)
	writeRefuted(w, p)
}

// writeRefuted lists the deployments that met the SLOs in the steady state and missed them
// simulated under the load, so a reader sees why a smaller one is not recommended.
func writeRefuted(w *errWriter, p serve.Plan) {
	if len(p.Refuted) == 0 {
		return
	}
	const most = 8
	var rows [][]string
	for i, c := range p.Refuted {
		if i == most {
			break
		}
		rows = append(rows, []string{mdName(c.Chip), serveLayout(c), fmt.Sprint(c.GPUs), fmt.Sprintf("%.0f", c.Result.Concurrency), seconds(c.Result.TTFT), seconds(c.Result.TPOT), mdName(c.Miss)})
	}
	more := ""
	if n := len(p.Refuted); n > most {
		more = fmt.Sprintf(" (the first %d of %d)", most, n)
	}
	w.printf("\nMet the SLOs in the steady state but not simulated under the load%s, so not recommended:\n\n", more)
	table(w, []string{"Chip", "Layout", "GPUs", "Seqs/replica", "Steady TTFT", "Steady TPOT", "Under load"}, "llrrrrl", rows)
}

// writeServeMemory is each recommended deployment's memory per GPU: what the engine that runs it
// holds (weights, the KV cache pool and the part the planned load fills, its reserve) and what
// is left of the GPU.
func writeServeMemory(w *errWriter, p serve.Plan) {
	engine := "mrep's default engine"
	if n := p.Options.Engine.Name; n != "" {
		engine = Visible(n)
	}
	var rows [][]string
	for i, c := range p.Best {
		m := c.Memory
		if m == nil {
			continue
		}
		gib := func(b float64) string { return fmt.Sprintf("%.1f", b/(1<<30)) }
		rows = append(rows, []string{fmt.Sprint(i + 1), mdName(c.Chip), serveLayout(c), engine, gib(m.Capacity), gib(m.Weights),
			fmt.Sprintf("%s (%s)", gib(m.KVPool), gib(m.KVInUse)), gib(m.Reserve), gib(m.Headroom)})
	}
	if len(rows) == 0 {
		return
	}
	w.printf("\nMemory per GPU, GiB (the KV cache pool the engine allocates, and in brackets what the planned sequences fill at their mean length):\n\n")
	table(w, []string{"#", "Chip", "Layout", "Engine", "Capacity", "Weights", "KV pool (in use)", "Reserve", "Headroom"}, "rlllrrrrr", rows)
}

func gpusNote(o serve.PlanOptions) string {
	switch {
	case o.GPUs > 0:
		return fmt.Sprintf(" on %d GPUs", o.GPUs)
	case o.MaxGPUs > 0:
		return fmt.Sprintf(" within %d GPUs", o.MaxGPUs)
	}
	return ""
}

func serveLayout(c serve.Config) string {
	s := c.Layout()
	if c.Replicas > 1 && c.Disagg == nil {
		s += fmt.Sprintf(" x%d replicas", c.Replicas)
	}
	return s
}

// tokenUSD is "$in / $out / $blended" per 1M tokens, or a dash with no price.
func tokenUSD(t econ.TokenCosts) string {
	if t.BlendedUSDPerM <= 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s / %s", usd(t.InputUSDPerM), usd(t.OutputUSDPerM), usd(t.BlendedUSDPerM))
}

// tokenJ is joules per input, output and blended token.
func tokenJ(t econ.TokenCosts) string {
	return fmt.Sprintf("%.3g / %.3g / %.3g", t.InputJ, t.OutputJ, t.BlendedJ)
}

func usd(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("$%.3g", v)
}

// seconds prints a duration in the unit a reader of serving SLOs expects.
func seconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.1f ms", s*1e3)
	}
	return fmt.Sprintf("%.0f µs", s*1e6)
}

// ServePlanChart plots the Pareto front: tokens/s per GPU against tokens/s per user.
func ServePlanChart(title string, p serve.Plan) gochart.Chart {
	type key struct{ chip, layout string }
	var series []gochart.Series
	var entries []chart.LegendEntry
	idx := map[key]int{}
	var keys []key
	var xs, ys [][]float64
	var low []float64 // the cheapest blended $/1M tokens on each layout's front
	var notes []gochart.Value2
	for _, c := range p.Pareto {
		k := key{c.Chip, serveLayout(c)}
		i, ok := idx[k]
		if !ok {
			i = len(keys)
			idx[k] = i
			keys = append(keys, k)
			xs, ys, low = append(xs, nil), append(ys, nil), append(low, 0)
		}
		if b := c.PerToken.BlendedUSDPerM; b > 0 && (low[i] == 0 || b < low[i]) {
			low[i] = b
		}
		xs[i] = append(xs[i], c.TokSPerUser)
		ys[i] = append(ys[i], c.TokSPerGPU)
		// each point says its batch cap (the knob that moves along a layout's curve)
		notes = append(notes, gochart.Value2{XValue: c.TokSPerUser, YValue: c.TokSPerGPU, Label: fmt.Sprintf("B%.0f", c.BatchCap)})
	}
	maxY, maxX := 0.0, 1.0
	for i, k := range keys {
		for _, y := range ys[i] {
			maxY = math.Max(maxY, y)
		}
		for _, x := range xs[i] {
			maxX = math.Max(maxX, x)
		}
		label := Visible(k.chip + " " + k.layout)
		if low[i] > 0 {
			label = fmt.Sprintf("%s ≥ %s/1M", label, usd(low[i])) // the cheapest blended tokens of this layout
		}
		entries = append(entries, chart.LegendEntry{Label: label, Color: chart.ColorAt(i)})
		series = append(series, gochart.ContinuousSeries{Name: label, XValues: xs[i], YValues: ys[i],
			Style: gochart.Style{StrokeWidth: 2, StrokeColor: chart.ColorAt(i), DotWidth: 4, DotColor: chart.ColorAt(i)}})
	}
	if len(p.Best) > 0 {
		maxX = math.Max(maxX, p.Best[0].TokSPerUser)
		maxY = math.Max(maxY, p.Best[0].TokSPerGPU)
	}
	top := 1.05 * math.Max(maxY, 1)
	if o := p.Options; o.TPOT > 0 {
		maxX = math.Max(maxX, 1/o.TPOT)
		line, entry := tpotLine(o.TPOT, top)
		series, entries = append(series, line), append(entries, entry)
	}
	if len(p.Best) > 0 {
		b := p.Best[0]
		// a gold dot ringed in black: no layout's colour
		for _, dot := range []struct {
			w float64
			c drawing.Color
		}{{12, drawing.ColorBlack}, {8, drawing.ColorFromHex("f5b700")}} {
			series = append(series, gochart.ContinuousSeries{Name: "chosen", XValues: []float64{b.TokSPerUser}, YValues: []float64{b.TokSPerGPU},
				Style: gochart.Style{StrokeWidth: 0, StrokeColor: dot.c, DotWidth: dot.w, DotColor: dot.c}})
		}
		notes = append(notes, gochart.Value2{XValue: b.TokSPerUser, YValue: b.TokSPerGPU,
			Label: Visible(fmt.Sprintf("chosen: %s %s", b.Chip, serveLayout(b)))})
		entries = append(entries, chart.LegendEntry{Label: "chosen deployment (the table's #1)", Color: drawing.ColorFromHex("f5b700"), Dot: true})
	}
	if len(notes) > 0 {
		series = append(series, gochart.AnnotationSeries{Annotations: notes,
			Style: gochart.Style{FontSize: 7, StrokeColor: drawing.ColorFromHex("bbbbbb"), FillColor: drawing.ColorWhite}})
	}
	return frontChart(title, series, entries, maxX, top, 290)
}

// tpotLine is a TPOT SLO drawn as the floor it is on tokens/s per user (the deployments right
// of it meet it), up to top, with its legend entry.
func tpotLine(tpot, top float64) (gochart.Series, chart.LegendEntry) {
	x, red := 1/tpot, drawing.ColorFromHex("c0392b")
	return gochart.ContinuousSeries{Name: "TPOT SLO", XValues: []float64{x, x}, YValues: []float64{0, top},
			Style: gochart.Style{StrokeWidth: 1.5, StrokeColor: red, StrokeDashArray: []float64{6, 4}}},
		chart.LegendEntry{Label: fmt.Sprintf("TPOT ≤ %s: meet it right of the line", seconds(tpot)), Color: red, Dash: []float64{6, 4}}
}

// frontChart is a serving Pareto chart: tokens/s per GPU against tokens/s per user, the legend
// right of the plot (legend pixels wide), the value axis on the left.
func frontChart(title string, series []gochart.Series, entries []chart.LegendEntry, maxX, top float64, legend int) gochart.Chart {
	c := gochart.Chart{
		Title: title, TitleStyle: gochart.Style{FontSize: 12}, Width: 1100, Height: 640,
		Background:     gochart.Style{Padding: gochart.Box{Top: 50, Left: 20, Right: legend, Bottom: 20}},
		XAxis:          chart.NiceXAxis("output tokens/s per user (1/TPOT)", 0, 1.05*maxX),
		YAxis:          chart.NiceAxis("output tokens/s per GPU", 0, top),
		YAxisSecondary: gochart.YAxis{Style: gochart.Hidden()},
		Series:         series,
	}
	c.Elements = []gochart.Renderable{chart.Legend(entries)}
	chart.LeftAxis(&c)
	return c
}

// ServeChipsChart answers "which chip": one curve per chip, its Pareto front over every layout
// and batch cap searched (tokens/s per GPU against tokens/s per user), in the palette's colours
// ranked in the legend by what each gives at the TPOT SLO (or, without one, at its most tokens/s
// per GPU), with the layout and batch that get it there, its point ringed on the curve. The per-layout
// curves are ServePlanChart's (plan serve --chart layouts).
func ServeChipsChart(title string, p serve.Plan) gochart.Chart {
	type front struct {
		chip string
		cs   []serve.Config
		at   *serve.Config // the most tokens/s per GPU at or beyond the TPOT SLO
	}
	floor := 0.0 // the TPOT SLO as tokens/s per user
	if p.Options.TPOT > 0 {
		floor = 1 / p.Options.TPOT
	}
	var fronts []*front
	idx := map[string]*front{}
	for _, c := range p.Pareto {
		f := idx[c.Chip]
		if f == nil {
			f = &front{chip: c.Chip}
			idx[c.Chip] = f
			fronts = append(fronts, f)
		}
		f.cs = append(f.cs, c)
	}
	for _, f := range fronts {
		sort.SliceStable(f.cs, func(a, b int) bool { return f.cs[a].TokSPerUser < f.cs[b].TokSPerUser })
		for k := range f.cs {
			if c := &f.cs[k]; c.TokSPerUser >= floor && (f.at == nil || c.TokSPerGPU > f.at.TokSPerGPU) {
				f.at = c
			}
		}
	}
	// the legend ranks the chips by what they give at the SLO: the answer reads top down
	sort.SliceStable(fronts, func(a, b int) bool {
		fa, fb := fronts[a].at, fronts[b].at
		if (fa == nil) != (fb == nil) {
			return fb == nil
		}
		return fa != nil && fa.TokSPerGPU > fb.TokSPerGPU
	})
	var series, marks []gochart.Series
	var entries []chart.LegendEntry
	maxX, maxY := 1.0, 0.0
	for i, f := range fronts {
		var xs, ys []float64
		for _, c := range f.cs {
			xs, ys = append(xs, c.TokSPerUser), append(ys, c.TokSPerGPU)
			maxX, maxY = math.Max(maxX, c.TokSPerUser), math.Max(maxY, c.TokSPerGPU)
		}
		col := chart.ColorAt(i)
		label := Visible(f.chip) + ": misses the TPOT SLO"
		if at := f.at; at != nil {
			label = fmt.Sprintf("%d. %s: %.0f tok/s/GPU at %.0f tok/s/user, %s B%.0f", i+1, Visible(f.chip), at.TokSPerGPU, at.TokSPerUser, Visible(serveLayout(*at)), at.BatchCap)
			// the chip's point at the SLO: a dot in its colour ringed in black
			for _, dot := range []struct {
				w float64
				c drawing.Color
			}{{11, drawing.ColorBlack}, {7, col}} {
				marks = append(marks, gochart.ContinuousSeries{XValues: []float64{at.TokSPerUser}, YValues: []float64{at.TokSPerGPU},
					Style: gochart.Style{StrokeWidth: 0, StrokeColor: dot.c, DotWidth: dot.w, DotColor: dot.c}})
			}
		}
		entries = append(entries, chart.LegendEntry{Label: label, Color: col})
		series = append(series, gochart.ContinuousSeries{Name: f.chip, XValues: xs, YValues: ys,
			Style: gochart.Style{StrokeWidth: 2.5, StrokeColor: col, DotWidth: 3, DotColor: col}})
	}
	top := 1.05 * math.Max(maxY, 1)
	if floor > 0 {
		maxX = math.Max(maxX, floor)
		line, entry := tpotLine(p.Options.TPOT, top)
		series, entries = append(series, line), append(entries, entry)
	}
	entries = append(entries, chart.LegendEntry{Label: "ringed: each chip's best at the SLO", Color: drawing.ColorBlack, Dot: true})
	return frontChart(title, append(series, marks...), entries, maxX, top, 360)
}

// writeTTFTQuantiles lists, for a workload of mixed lengths, the TTFT of its p50/p90/p99
// prompts on each best deployment (the table's TTFT is the mean prompt's).
func writeTTFTQuantiles(w *errWriter, best []serve.Config) {
	if len(best) == 0 || len(best[0].TTFTQuantiles) == 0 {
		return
	}
	head := []string{"#"}
	align := "r"
	for _, q := range best[0].TTFTQuantiles {
		head = append(head, fmt.Sprintf("TTFT p%g (%d-token prompt)", 100*q.Quantile, q.Prompt))
		align += "r"
	}
	var rows [][]string
	for i, c := range best {
		row := []string{fmt.Sprint(i + 1)}
		for _, q := range c.TTFTQuantiles {
			row = append(row, seconds(q.TTFT))
		}
		rows = append(rows, row)
	}
	w.printf("\nTime to first token by prompt length (the workload's quantiles, in the steady state of its means; queueing not included):\n\n")
	table(w, head, align, rows)
}

// writeDisagg details the disaggregated deployments among the best: each pool, the prompt's
// prefill, the KV transfer and the wait for a prefill step that make up its TTFT.
func writeDisagg(w *errWriter, best []serve.Config) {
	var rows [][]string
	for i, c := range best {
		d := c.Disagg
		if d == nil {
			continue
		}
		rows = append(rows, []string{fmt.Sprint(i + 1), fmt.Sprintf("%s x%d (%d GPUs)", d.Layout(), d.PrefillReplicas, d.PrefillGPUs),
			fmt.Sprintf("%s x%d (%d GPUs)", serve.LayoutName(c.TP, c.EP, c.PP), c.Replicas, d.DecodeGPUs),
			fmt.Sprintf("%.3g", d.Prefill.ReqPerS), fmt.Sprintf("%.0f%%", 100*math.Min(d.Utilization, 1)),
			seconds(d.Step.Prefill), seconds(d.RequestPath), seconds(d.KVTransfer), seconds(d.QueueWait)})
	}
	if len(rows) == 0 {
		return
	}
	w.printf("\nDisaggregated: TTFT = the prompt's prefill (in a step of the prompts waiting under the load: at low load its own) + the request path + its KV transfer + the wait for a prefill step (M/D/1 at the prefill pool's utilisation; none offline):\n\n")
	table(w, []string{"#", "Prefill pool", "Decode pool", "Requests/s per prefill replica (full steps)", "Prefill utilisation", "Prefill", "Request path", "KV transfer", "Prefill wait"}, "lllrrrrrr", rows)
}

// writeSimulated prints the first deployment's load run step by step, with what its TTFT
// includes beside the steady state's, and the composition of a typical step (to hold against
// a trace: nsys, the engine's step logs).
func writeSimulated(w *errWriter, p serve.Plan) {
	sm := p.Simulated
	if sm == nil {
		return
	}
	r := sm.Result
	load := ""
	switch r.Load {
	case serve.Wave:
		load = fmt.Sprintf("a wave of %d requests queued at once (offline)", r.N)
	case serve.Users:
		load = fmt.Sprintf("%d users in a closed loop, all starting together, %d requests", r.N, r.Requests)
	case serve.Rate:
		load = fmt.Sprintf("Poisson arrivals at %.3g requests/s, %d requests", r.Rate, r.Requests)
	}
	w.printf("\n## Under load, step by step: one replica of %s\n\n", Visible(sm.Config))
	w.printf("The engine's scheduler run over %s: each step decodes every running sequence, then fills the token budget with prompt chunks (prompts already started first, then waiting requests in arrival order, admitted while the batch cap and the free KV cache allow). **TTFT here runs from arrival to first token and includes** the wait for admission, the step in flight when the request arrived, and every chunk of its prompt beside the running decodes. The steady-state TTFT in the table above is the prompt's chunks beside a full batch of decodes, plus, under a closed loop beyond the batch, the queue Little's law prices; it has no burst and no admission wait.\n\n", load)
	row := func(name string, d serve.Dist) []string {
		return []string{name, seconds(d.Mean), seconds(d.P50), seconds(d.P90), seconds(d.P99)}
	}
	table(w, []string{"Per request", "Mean", "p50", "p90", "p99"}, "lrrrr", [][]string{
		row("TTFT", r.TTFT), row("TPOT", r.TPOT), row("End to end", r.E2E), row("Queue wait (arrival to admission)", r.QueueWait)})
	w.printf("\n%.0f output tok/s over the run (%.0f in and out) in %s; at most %d sequences running.\n\n", r.OutputTokS, r.TotalTokS, seconds(r.Duration), r.PeakSeqs)
	m := r.Mix
	if m.Steps == 0 || !(m.MeanStep > 0) {
		return
	}
	w.printf("A typical step (means over %d steps): %.1f decode sequences, %.0f prompt tokens, %.0f%% of steps carry a prompt chunk.\n\n", m.Steps, m.DecodeSeqs, m.PrefillTokens, 100*m.PrefillShare)
	share := func(x float64) string { return fmt.Sprintf("%.0f%%", 100*x/m.MeanStep) }
	table(w, []string{"Step time", "Per step", "Share"}, "lrr", [][]string{
		{"GEMMs (dense and grouped)", seconds(m.GEMM), share(m.GEMM)},
		{"Attention", seconds(m.Attention), share(m.Attention)},
		{"Memory-bound kernels (norms, activations, routing, KV writes)", seconds(m.Memory), share(m.Memory)},
		{"Exposed communication", seconds(m.Comm), share(m.Comm)},
		{"Kernel launches outside CUDA graphs", seconds(m.Launch), share(m.Launch)},
		{"Engine overhead (per step and per sequence)", seconds(m.Overhead), share(m.Overhead)},
		{"Whole step", seconds(m.MeanStep), "100%"},
	})
}
