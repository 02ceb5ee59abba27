package render

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	gochart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/compare"
	"github.com/mrep-dev/mrep/render/chart"
)

func runName(r analyzer.RunInfo) string {
	s := fmt.Sprintf("run %d `%s`", r.ID, r.Name)
	if r.Label != "" {
		s += "@" + r.Label
	}
	if r.Step != nil {
		s += fmt.Sprintf(" step %d", *r.Step)
	}
	return s
}

func signed(d int64) string {
	if d > 0 {
		return "+" + Comma(d)
	}
	return Comma(d)
}

func relPct(a, b float64) string {
	if a == 0 {
		if b == 0 {
			return "0.0%"
		}
		return "new"
	}
	return fmt.Sprintf("%+.1f%%", 100*(b-a)/math.Abs(a))
}

// WriteDiff renders a comparison of two runs, or of one run under two scenarios; chartName,
// when set, is the drift chart's file, linked below the drift tables.
func WriteDiff(out io.Writer, d compare.Diff, chartName string) error {
	w := &errWriter{w: out}
	if d.ScenarioA != "" {
		w.printf("# Diff: %s under two scenarios\n\nA: `%s`\n\nB: `%s`\n\n", runName(d.RunA), d.ScenarioA, d.ScenarioB)
	} else {
		w.printf("# Diff: %s → %s\n\n", runName(d.RunA), runName(d.RunB))
	}
	if len(d.Why) > 0 {
		w.printf("## Why\n\n")
		for _, s := range d.Why {
			w.printf("- %s\n", s)
		}
		w.printf("\n")
	}
	if d.ScenarioA != "" {
		return writeDiffPerformance(w, d)
	}
	w.printf("## Config\n\n")
	if len(d.Config) == 0 {
		w.printf("No config key differs.\n")
	} else {
		var rows [][]string
		for _, c := range d.Config {
			rows = append(rows, []string{code(c.Key), code(c.A), code(c.B)})
		}
		table(w, []string{"Key", "A", "B"}, "lll", rows)
	}
	ma, mb := d.MetricsA, d.MetricsB
	w.printf("\n## Parameters\n\n")
	rows := [][]string{
		{"**total**", Comma(ma.TotalParams), Comma(mb.TotalParams), signed(mb.TotalParams - ma.TotalParams), relPct(float64(ma.TotalParams), float64(mb.TotalParams))},
		{"active per token", Comma(int64(ma.Active)), Comma(int64(mb.Active)), signed(int64(mb.Active) - int64(ma.Active)), relPct(ma.Active, mb.Active)},
		{"KV bytes per token", fmt.Sprintf("%.0f", ma.KVBytesPerTok), fmt.Sprintf("%.0f", mb.KVBytesPerTok), fmt.Sprintf("%+.0f", mb.KVBytesPerTok-ma.KVBytesPerTok), relPct(ma.KVBytesPerTok, mb.KVBytesPerTok)},
	}
	for _, c := range d.Categories {
		rows = append(rows, []string{code(c.Name), Comma(c.A), Comma(c.B), signed(c.B - c.A), relPct(float64(c.A), float64(c.B))})
	}
	table(w, []string{"Category", "A", "B", "Δ", "Δ%"}, "lrrrr", rows)
	if len(d.Patterns) > 0 {
		w.printf("\n**Module patterns that changed**\n\n")
		rows = nil
		for i, p := range d.Patterns {
			if i == 30 {
				rows = append(rows, []string{fmt.Sprintf("… %d more", len(d.Patterns)-30), "", "", ""})
				break
			}
			rows = append(rows, []string{code(p.Name), Comma(p.A), Comma(p.B), signed(p.B - p.A)})
		}
		table(w, []string{"Pattern", "A", "B", "Δ"}, "lrrr", rows)
	}
	w.printf("\n")
	if err := writeDiffPerformance(w, d); err != nil {
		return err
	}
	w.printf("\n## Weight drift\n\n")
	if len(d.Drift) == 0 {
		w.printf("%s\n", d.DriftNote)
		return w.err
	}
	writeDrift(w, d.Drift)
	if chartName != "" {
		w.printf("\n![weight drift](%s)\n", chartName)
	}
	return w.err
}

func writeDiffPerformance(w *errWriter, d compare.Diff) error {
	w.printf("## Performance model\n\nPer phase and exec profile on each target; ⚠ marks results below the compulsory HBM traffic in either run.\n\n")
	var rows [][]string
	var changes []string
	for _, pair := range d.Pairs() {
		pa, pb := pair[0], pair[1]
		target := code(pa.Target)
		if pa.Target != pb.Target {
			target = fmt.Sprintf("`%s` → `%s`", pa.Target, pb.Target)
		}
		regime := code(pa.Regime)
		if pa.Regime != pb.Regime {
			regime = fmt.Sprintf("**`%s` → `%s`**", pa.Regime, pb.Regime)
			changes = append(changes, fmt.Sprintf("- `%s` %s/%s: `%s` → `%s`", pa.Target, pa.Phase, pa.Profile, pa.Regime, pb.Regime))
		}
		dom := code(pa.Dominant)
		if pa.Dominant != pb.Dominant {
			dom = fmt.Sprintf("`%s` → `%s`", pa.Dominant, pb.Dominant)
		}
		flag := ""
		if pa.BelowFloor || pb.BelowFloor {
			flag = " ⚠"
		}
		rows = append(rows, []string{target, code(string(pa.Phase)), code(pa.Profile),
			fmt.Sprintf("%s → %s%s", Ms(pa.TEst), Ms(pb.TEst), flag), relPct(pa.TEst, pb.TEst),
			fmt.Sprintf("%.3g → %.3g", pa.AIHBM, pb.AIHBM), fmt.Sprintf("%.1f%% → %.1f%%", 100*pa.MFU, 100*pb.MFU),
			fmt.Sprintf("%.4g → %.4g", pa.TokensPerS, pb.TokensPerS), dom, regime})
	}
	table(w, []string{"Target", "Phase", "Exec", "T_est (ms)", "ΔT_est", "AI_hbm (FLOP/B)", "MFU_est", "Tokens/s per GPU", "Dominant bytes", "Regime"}, "llllrrrrll", rows)
	if len(changes) > 0 {
		w.printf("\n**Regime changes**\n\n%s\n", strings.Join(changes, "\n"))
	} else {
		w.printf("\nNo regime changes.\n")
	}
	return w.err
}

// isMatrix: the weights whose drift is ranked first; norms and biases are shown apart.
func isMatrix(x compare.Drift) bool { return x.Kind != "norm" && x.Kind != "bias" }

func driftMethods(ds []compare.Drift) string {
	n := map[string]int{}
	for _, x := range ds {
		n[x.Method]++
	}
	var parts []string
	if c := n["sketch"]; c > 0 {
		parts = append(parts, fmt.Sprintf("%d estimated from the dumps' CountSketches (about 2%% error)", c))
	}
	if c := n["exact"]; c > 0 {
		parts = append(parts, fmt.Sprintf("%d exact (small enough to be their own sketch)", c))
	}
	if c := n["stats"]; c > 0 {
		parts = append(parts, fmt.Sprintf("%d from dumps without sketches, as the shift of mean and std in units of A's std (a proxy, not ||B - A|| / ||A||)", c))
	}
	return strings.Join(parts, "; ")
}

func writeDrift(w *errWriter, ds []compare.Drift) {
	w.printf("%d tensors compared: %s.", len(ds), driftMethods(ds))
	for _, x := range ds {
		if x.Method != "stats" {
			w.printf(" Relative change is ||B - A|| / ||A||.")
			break
		}
	}
	w.printf("\n\n")
	var rows [][]string
	for _, s := range compare.DriftByKind(ds) {
		rows = append(rows, []string{code(s.Group), Comma(int64(s.Tensors)), fmt.Sprintf("%.4g", s.Rel), fmt.Sprintf("%.4g", s.Max), code(s.MaxName)})
	}
	table(w, []string{"Kind", "Tensors", "Relative change (as one vector)", "Largest", "Largest tensor"}, "lrrrl", rows)

	section := func(title string, keep func(compare.Drift) bool, n int) {
		rows = nil
		for _, x := range ds {
			if !keep(x) || x.ZeroBaseline {
				continue
			}
			if len(rows) == n {
				break
			}
			rows = append(rows, []string{fmt.Sprintf("#%d", len(rows)+1), code(x.Name), code(x.Kind), fmt.Sprintf("%.4g", x.RelChange),
				Sci(x.NormA), Sci(x.MeanA) + " → " + Sci(x.MeanB), Sci(x.StdA) + " → " + Sci(x.StdB), x.Method})
		}
		if len(rows) == 0 {
			return
		}
		w.printf("\n%s\n\n", title)
		table(w, []string{"Rank", "Tensor", "Kind", "Relative change", "‖A‖", "Mean", "Std", "Method"}, "rllrrrrl", rows)
	}
	section("**Weights** (top movers; numbered as in the chart):", isMatrix, 20)
	section("**Norms and biases**, apart (a gain near 1 or a bias near 0 changes on another scale than a matrix, and would crowd the ranking):",
		func(x compare.Drift) bool { return !isMatrix(x) }, 10)
	rows = nil
	for _, x := range ds {
		if x.ZeroBaseline {
			rows = append(rows, []string{code(x.Name), code(x.Kind), Sci(x.AbsChange), x.Method})
		}
	}
	if len(rows) > 0 {
		w.printf("\n**Zero in A** (initialised to zero: no relative change; the absolute ||B - A|| instead):\n\n")
		table(w, []string{"Tensor", "Kind", "‖B − A‖", "Method"}, "llrl", rows)
	}
}

// DriftChart is a bar chart of the weight matrices' top movers (norms and biases are apart in
// the table): bars numbered #1.. as the table numbers them, coloured by kind, and a key on the
// right giving each number's tensor name as written.
func DriftChart(title string, ds []compare.Drift, n int) gochart.BarChart {
	var vs []gochart.Value
	var key []chart.LegendEntry
	kinds := map[string]int{}
	var kindEntries []chart.LegendEntry
	top := 0.0
	for _, d := range ds {
		if len(vs) == n {
			break
		}
		if !isMatrix(d) || d.ZeroBaseline {
			continue
		}
		k, ok := kinds[d.Kind]
		if !ok {
			k = len(kinds)
			kinds[d.Kind] = k
			kindEntries = append(kindEntries, chart.LegendEntry{Label: Visible(d.Kind), Color: chart.ColorAt(k), Fill: true, Solid: true})
		}
		top = math.Max(top, d.RelChange)
		col := chart.ColorAt(k)
		vs = append(vs, gochart.Value{Value: d.RelChange, Label: fmt.Sprintf("#%d", len(vs)+1), Style: gochart.Style{FillColor: col, StrokeColor: col}})
		key = append(key, chart.LegendEntry{Label: fmt.Sprintf("#%d %s", len(vs), Visible(d.Name))})
	}
	if top == 0 {
		top = 1
	}
	entries := append(kindEntries, chart.LegendEntry{Label: ""})
	entries = append(entries, key...)
	return gochart.BarChart{Title: title, TitleStyle: gochart.Style{FontSize: 12}, Width: 1300, Height: 600, BarWidth: 30, Bars: vs,
		Background: gochart.Style{Padding: gochart.Box{Top: 50, Left: 70, Right: 380, Bottom: 40}},
		XAxis:      gochart.Style{FontSize: 8},
		YAxis:      gochart.YAxis{Style: gochart.Hidden(), Range: &gochart.ContinuousRange{Min: 0, Max: top * 1.1}},
		Elements:   []gochart.Renderable{chart.LeftTicks("||B − A|| / ||A||", 0, top*1.1, chart.TickNumber), chart.Legend(entries)}}
}

// WriteHistory renders a metric across runs; chartName, when set, is the chart's file.
func WriteHistory(out io.Writer, h compare.History, chartName string) error {
	w := &errWriter{w: out}
	metric, xLabel, pts := h.Metric, h.XLabel, h.Points
	series := h.Series()
	w.printf("# History: `%s`\n\n%d runs, ordered by %s", metric, len(pts), xLabel)
	if len(series) > 1 {
		w.printf(", in %d series (one per label: different training runs are not one line)", len(series))
	}
	w.printf(".\n\n")
	predicted := false
	for _, p := range pts {
		predicted = predicted || p.Predicted > 0
	}
	var rows [][]string
	for i, p := range pts {
		delta := "—"
		if i > 0 && pts[i-1].Run.Label == p.Run.Label {
			delta = relPct(pts[i-1].Value, p.Value)
		}
		step := "—"
		if p.Run.Step != nil {
			step = Comma(*p.Run.Step)
		}
		row := []string{fmt.Sprint(p.Run.ID), p.Run.Name, orDashS(p.Run.Label), step, fmt.Sprintf("%.6g", p.Value), delta}
		if predicted {
			row = append(row, orDashS(Visible(p.Device)), orDashF(p.Predicted, func(v float64) string { return fmt.Sprintf("%.6g", v) }),
				orDashS(Visible(p.Chip)), orDashF(p.Predicted, func(v float64) string { return fmt.Sprintf("%.2f", p.Value/v) }))
		}
		rows = append(rows, row)
	}
	head, align := []string{"Run", "Model", "Label", "Step", compare.MetricLabel(metric), "Δ vs previous"}, "rllrrr"
	if predicted {
		head, align = append(head, "measured on", "predicted", "predicted on", "measured / predicted"), align+"lrlr"
	}
	table(w, head, align, rows)
	if predicted && !h.SameDevice() {
		w.printf("\nThe measurements ran on another device than the chip predicted (see the columns): the ratio compares two machines, and the chart leaves the prediction off the measured line. Give `--chip` the chip the runs ran on to compare like with like.\n")
	}
	if chartName != "" {
		w.printf("\n![%s](%s)\n", metric, chartName)
	}
	return w.err
}

func orDashS(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// HistoryChart is a line chart of the metric against the x axis: one line per label, with a
// legend when there are several.
func HistoryChart(h compare.History) gochart.Chart {
	metric, xLabel, pts := h.Metric, h.XLabel, h.Points
	var series []gochart.Series
	predicted := false
	seen := map[float64]bool{}
	var ticks []gochart.Tick
	groups := h.Series()
	for gi, g := range groups {
		var xs, ys []float64
		for _, p := range g {
			xs, ys = append(xs, p.X), append(ys, p.Value)
			if !seen[p.X] {
				seen[p.X] = true
				ticks = append(ticks, gochart.Tick{Value: p.X, Label: fmt.Sprintf("%.0f", p.X)})
			}
		}
		if len(xs) == 1 { // go-chart needs a range; show one point on a unit span
			xs, ys = append(xs, xs[0]+1), append(ys, ys[0])
		}
		name := metric
		if len(groups) > 1 {
			name = orDashS(g[0].Run.Label)
		}
		series = append(series, gochart.ContinuousSeries{Name: name, XValues: xs, YValues: ys,
			Style: gochart.Style{StrokeColor: chart.ColorAt(gi), StrokeWidth: 2, DotColor: chart.ColorAt(gi), DotWidth: 4, FillColor: drawing.ColorTransparent}})
		var px, py []float64
		for _, p := range g {
			if p.Predicted > 0 {
				px, py = append(px, p.X), append(py, p.Predicted)
			}
		}
		if len(px) == 1 {
			px, py = append(px, px[0]+1), append(py, py[0])
		}
		if len(px) > 0 && !h.SameDevice() {
			predicted = true // said in the legend, not drawn: another machine than the measurement's
			px = nil
		}
		if len(px) > 0 { // mrep's prediction: the same colour, dashed, hollow dots
			series = append(series, gochart.ContinuousSeries{Name: name + " (predicted)", XValues: px, YValues: py,
				Style: gochart.Style{StrokeColor: chart.ColorAt(gi), StrokeWidth: 1.5, StrokeDashArray: []float64{6, 4}, DotColor: drawing.ColorWhite, DotWidth: 4, FillColor: drawing.ColorTransparent}})
			predicted = true
		}
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Value < ticks[j].Value })
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		for _, v := range []float64{p.Value, p.Predicted} {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if hi <= 0 {
		hi = 1
	}
	if len(ticks) > 25 { // one tick per step while few: steps are integers, go-chart's own ticks are not
		ticks = nil
	}
	c := gochart.Chart{
		Title: metric, TitleStyle: gochart.Style{FontSize: 13}, Width: 1000, Height: 520,
		Background: gochart.Style{Padding: gochart.Box{Top: 50, Left: 20, Right: 20, Bottom: 20}},
		XAxis:      gochart.XAxis{Name: xLabel, Ticks: ticks, ValueFormatter: func(v interface{}) string { return fmt.Sprintf("%.4g", v) }},
		YAxis:      chart.NiceAxis(compare.MetricLabel(metric), math.Min(0, lo), hi*1.05),
		// unused secondary axis: hidden, or go-chart draws its empty range at NaN positions
		YAxisSecondary: gochart.YAxis{Style: gochart.Hidden()},
		Series:         series,
	}
	if len(groups) > 1 || predicted {
		var entries []chart.LegendEntry
		for _, s := range series {
			if cs, ok := s.(gochart.ContinuousSeries); ok {
				entries = append(entries, chart.LegendEntry{Label: cs.Name, Color: cs.Style.StrokeColor, Dash: cs.Style.StrokeDashArray})
			}
		}
		if d, c := devices(pts); d != "" {
			entries = append(entries, chart.LegendEntry{Label: "measured on"}, chart.LegendEntry{Label: "  " + d})
			if h.SameDevice() {
				entries = append(entries, chart.LegendEntry{Label: "predicted on " + c})
			} else {
				entries = append(entries, chart.LegendEntry{Label: "prediction (" + c + ") not drawn:"}, chart.LegendEntry{Label: "  another machine; see the table"})
			}
		}
		c.Width, c.Background.Padding.Right = 1100, 300 // room for a device's full name
		c.Elements = []gochart.Renderable{chart.Legend(entries)}
	}
	chart.LeftAxis(&c)
	return c
}

// devices names the measurements' devices and the predictions' chips (each distinct, in order).
func devices(pts []compare.Point) (device, chip string) {
	var ds, cs []string
	seenD, seenC := map[string]bool{}, map[string]bool{}
	for _, p := range pts {
		if p.Device != "" && !seenD[p.Device] {
			seenD[p.Device] = true
			ds = append(ds, Visible(p.Device))
		}
		if p.Chip != "" && !seenC[p.Chip] {
			seenC[p.Chip] = true
			cs = append(cs, Visible(p.Chip))
		}
	}
	return strings.Join(ds, ", "), strings.Join(cs, ", ")
}
