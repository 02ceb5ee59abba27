package render

import (
	"fmt"
	"io"
	"math"
	"strings"

	chart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"

	"github.com/mrep-dev/mrep/analyzer"
)

// DiffData is everything `mrep diff` shows.
type DiffData struct {
	RunA       analyzer.RunInfo        `json:"run_a"`
	RunB       analyzer.RunInfo        `json:"run_b"`
	Config     []analyzer.ConfigChange `json:"config_changes"`
	Categories []analyzer.CountDelta   `json:"params_by_category"`
	Patterns   []analyzer.CountDelta   `json:"params_by_pattern"`
	MetricsA   analyzer.RunMetrics     `json:"metrics_a"`
	MetricsB   analyzer.RunMetrics     `json:"metrics_b"`
	Drift      []analyzer.Drift        `json:"weight_drift,omitempty"`
	DriftNote  string                  `json:"drift_note,omitempty"`
	ChartName  string                  `json:"-"`
}

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

// WriteDiff renders a comparison of two runs.
func WriteDiff(out io.Writer, d DiffData) error {
	w := &errWriter{w: out}
	w.printf("# Diff: %s → %s\n\n", runName(d.RunA), runName(d.RunB))
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
	w.printf("\n## Performance model\n\nPer phase and exec profile on each target; ⚠ marks results below the compulsory HBM traffic in either run.\n\n")
	rows = nil
	var changes []string
	for _, pa := range ma.Phases {
		pb, ok := mb.Find(pa.Target, pa.Phase, pa.Profile)
		if !ok {
			continue
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
		rows = append(rows, []string{code(pa.Target), code(string(pa.Phase)), code(pa.Profile),
			fmt.Sprintf("%s → %s%s", Ms(pa.TEst), Ms(pb.TEst), flag), relPct(pa.TEst, pb.TEst),
			fmt.Sprintf("%.3g → %.3g", pa.AIHBM, pb.AIHBM), fmt.Sprintf("%.3g → %.3g", pa.MFU, pb.MFU),
			fmt.Sprintf("%.4g → %.4g", pa.TokensPerS, pb.TokensPerS), dom, regime})
	}
	table(w, []string{"Target", "Phase", "Exec", "T_est (ms)", "ΔT_est", "AI_hbm", "MFU_est", "Tokens/s", "Dominant bytes", "Regime"}, "llllrrrrll", rows)
	if len(changes) > 0 {
		w.printf("\n**Regime changes**\n\n%s\n", strings.Join(changes, "\n"))
	} else {
		w.printf("\nNo regime changes.\n")
	}
	w.printf("\n## Weight drift\n\n")
	if len(d.Drift) == 0 {
		w.printf("%s\n", d.DriftNote)
		return w.err
	}
	var sum float64
	for _, x := range d.Drift {
		sum += x.RelChange
	}
	w.printf("%d tensors compared; mean relative change %.4g (the shift of mean and std in units of A's std). Top movers:\n\n", len(d.Drift), sum/float64(len(d.Drift)))
	rows = nil
	for i, x := range d.Drift {
		if i == 20 {
			break
		}
		rows = append(rows, []string{fmt.Sprintf("#%d", i+1), code(x.Name), Sci(x.MeanA), Sci(x.MeanB), Sci(x.StdA), Sci(x.StdB), fmt.Sprintf("%.4g", x.RelChange)})
	}
	table(w, []string{"Rank", "Tensor", "Mean A", "Mean B", "Std A", "Std B", "Relative change"}, "rlrrrrr", rows)
	if d.ChartName != "" {
		w.printf("\n![weight drift](%s)\n", d.ChartName)
	}
	return w.err
}

// DriftChart is a bar chart of the top movers' relative change; bars are numbered in the order
// of the markdown table, whose rows carry the tensor names (long names do not fit under bars).
func DriftChart(title string, ds []analyzer.Drift, n int) chart.BarChart {
	if len(ds) > n {
		ds = ds[:n]
	}
	var vs []chart.Value
	top := 0.0
	for i, d := range ds {
		top = math.Max(top, d.RelChange)
		vs = append(vs, chart.Value{Value: d.RelChange, Label: fmt.Sprintf("#%d", i+1), Style: chart.Style{FillColor: colorAt(1), StrokeColor: colorAt(1)}})
	}
	return chart.BarChart{Title: title, TitleStyle: chart.Style{FontSize: 12}, Width: 1100, Height: 520, BarWidth: 36, Bars: vs,
		Background: chart.Style{Padding: chart.Box{Top: 50, Left: 20, Right: 20, Bottom: 30}},
		XAxis:      chart.Style{FontSize: 8},
		YAxis: chart.YAxis{Name: "relative change (shift in units of A's std)", Style: chart.Style{FontSize: 8},
			Range:          &chart.ContinuousRange{Min: 0, Max: top * 1.1},
			ValueFormatter: func(v interface{}) string { return fmt.Sprintf("%.3g", v) }}}
}

// HistoryPoint is one run's value of a metric.
type HistoryPoint struct {
	Run   analyzer.RunInfo `json:"run"`
	X     float64          `json:"x"` // step, or run order when steps are missing
	Value float64          `json:"value"`
}

// WriteHistory renders a metric across runs.
func WriteHistory(out io.Writer, metric, xLabel string, pts []HistoryPoint, chartName string) error {
	w := &errWriter{w: out}
	w.printf("# History: `%s`\n\n%d runs, ordered by %s.\n\n", metric, len(pts), xLabel)
	var rows [][]string
	for i, p := range pts {
		delta := "—"
		if i > 0 {
			delta = relPct(pts[i-1].Value, p.Value)
		}
		step := "—"
		if p.Run.Step != nil {
			step = Comma(*p.Run.Step)
		}
		rows = append(rows, []string{fmt.Sprint(p.Run.ID), p.Run.Name, orDashS(p.Run.Label), step, fmt.Sprintf("%.6g", p.Value), delta})
	}
	table(w, []string{"Run", "Model", "Label", "Step", metric, "Δ vs previous"}, "rllrrr", rows)
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

// HistoryChart is a line chart of the metric against the x axis.
func HistoryChart(metric, xLabel string, pts []HistoryPoint) chart.Chart {
	var xs, ys []float64
	for _, p := range pts {
		xs, ys = append(xs, p.X), append(ys, p.Value)
	}
	if len(xs) == 1 { // go-chart needs a range; show one point on a unit span
		xs, ys = append(xs, xs[0]+1), append(ys, ys[0])
	}
	var ticks []chart.Tick
	if len(pts) <= 25 { // one tick per run: steps are integers, go-chart's own ticks are not
		for _, p := range pts {
			ticks = append(ticks, chart.Tick{Value: p.X, Label: fmt.Sprintf("%.0f", p.X)})
		}
	}
	return chart.Chart{
		Title: metric, TitleStyle: chart.Style{FontSize: 13}, Width: 1000, Height: 520,
		Background: chart.Style{Padding: chart.Box{Top: 50, Left: 20, Right: 20, Bottom: 20}},
		XAxis:      chart.XAxis{Name: xLabel, Ticks: ticks, ValueFormatter: func(v interface{}) string { return fmt.Sprintf("%.4g", v) }},
		YAxis:      chart.YAxis{Name: metric, ValueFormatter: func(v interface{}) string { return fmt.Sprintf("%.4g", v) }},
		// unused secondary axis: hidden, or go-chart draws its empty range at NaN positions
		YAxisSecondary: chart.YAxis{Style: chart.Hidden()},
		Series: []chart.Series{chart.ContinuousSeries{Name: metric, XValues: xs, YValues: ys,
			Style: chart.Style{StrokeColor: colorAt(0), StrokeWidth: 2, DotColor: colorAt(0), DotWidth: 4, FillColor: drawing.ColorTransparent}}},
	}
}
