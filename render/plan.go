package render

import (
	"fmt"
	"io"
	"math"

	gochart "github.com/wcharczuk/go-chart/v2"

	"github.com/mrep-dev/mrep/layout"
	"github.com/mrep-dev/mrep/render/chart"
)

// WritePlan renders `mrep plan train`: the ranked layouts with their time and memory.
func WritePlan(out io.Writer, model, target string, p layout.Plan) error {
	w := &errWriter{w: out}
	o := p.Options
	w.printf("# Training layouts: %s on %d x %s\n\n", model, o.GPUs, target)
	w.printf("Global batch %d sequences of %d tokens; %d layouts evaluated, %d fit in %.0f GiB per GPU. Step time is the achievable model: GA micro-batches on the slowest pipeline stage, the interleaved-1F1B bubble `(PP-1)/VP`, exposed data-parallel traffic and the (distributed) optimizer step. MFU counts `F_theory` (full-S² attention).\n\n",
		o.GBS, o.Seq, p.Evaluated, p.Feasible, o.MemoryBytes/(1<<30))
	if p.Feasible == 0 {
		w.printf("%s\n", p.NoFit)
		return w.err
	}
	var rows [][]string
	for i, c := range p.Top {
		l, s := c.Step.Layout, c.Step
		rows = append(rows, []string{fmt.Sprint(i + 1), layoutName(l), fmt.Sprint(l.MBS), fmt.Sprint(l.GA()), l.Recompute,
			fmt.Sprintf("%.2f", s.StepTime), fmt.Sprintf("%.0f", s.TokensPerS/float64(l.GPUs())), fmt.Sprintf("%.1f%%", 100*s.MFU),
			fmt.Sprintf("%.1f", c.Memory.Total/(1<<30)), fmt.Sprintf("%.2f / %.2f / %.2f", s.Bubble, s.DPExposed, s.Optimizer), c.Why})
	}
	table(w, []string{"#", "Layout", "MBS", "GA", "Recompute", "Step (s)", "Tokens/s/GPU", "MFU", "Memory (GiB)", "Bubble / DP / optimizer (s)", "Why ahead of the next"}, "rlrrlrrrrrl", rows)
	return w.err
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
		rows = append(rows, []string{fmt.Sprintf("%s MBS%d %s", layoutName(l), l.MBS, l.Recompute),
			fmt.Sprintf("%.1f", c.Memory.Total/(1<<30)), fmt.Sprintf("%.2f", c.Step.StepTime)})
	}
	table(w, []string{"Layout", "Memory (GiB)", "Step (s)"}, "lrr", rows)
	return w.err
}

// LayoutResult is a training step on a layout for one target, with its memory per GPU.
type LayoutResult struct {
	Target       string        `json:"target"`
	Step         layout.Step   `json:"step"`
	Memory       layout.Memory `json:"memory_per_gpu"`
	MemoryBudget float64       `json:"memory_budget"`
	Fits         bool          `json:"fits"` // the memory model's verdict (layout.Check)
}

// WriteLayouts puts the training layout's verdict first: does it fit, how long is a step,
// where the time goes.
func WriteLayouts(out io.Writer, rs []LayoutResult) error {
	w := &errWriter{w: out}
	for _, r := range rs {
		l, s, m := r.Step.Layout, r.Step, r.Memory
		fit := "fits"
		if !r.Fits {
			fit = "does NOT fit"
		}
		w.printf("**Training on %d GPUs of %s (%s, MBS %d, GBS %d, GA %d, recompute %s):** memory per GPU %s, %.1f GiB of %.1f GiB (weights %.1f, gradients %.1f, optimizer %.1f, activations %.1f, margin %.1f GiB). Step %.3f s: %d micro-batches of %.1f ms on the slowest stage (kernels %.1f ms, exposed TP/CP/EP collectives %.1f ms in all), bubble %.1f ms, exposed data-parallel traffic %.1f ms, optimizer %.1f ms; %.0f tokens/s (%.0f per GPU); MFU %.1f%% (F_theory), %.1f%% (6N + 12·L·H·Q·T), HFU %.1f%%.\n\n",
			l.GPUs(), r.Target, layoutName(l), l.MBS, l.GBS, l.GA(), l.Recompute, fit, m.Total/(1<<30), r.MemoryBudget/(1<<30),
			m.Weights/(1<<30), m.Gradients/(1<<30), m.Optimizer/(1<<30), m.Activations/(1<<30), m.Margin/(1<<30),
			s.StepTime, l.GA(), s.Microbatch*1e3, s.Kernels*1e3, s.LayerComm*1e3, s.Bubble*1e3, s.DPExposed*1e3, s.Optimizer*1e3, s.TokensPerS, s.TokensPerS/float64(l.GPUs()),
			100*s.MFU, 100*s.MFU6N, 100*s.HFU)
	}
	return w.err
}

// PlanChart plots every feasible layout's step time against its memory per GPU, the Pareto
// front drawn through. Layouts slower than twice the best are left out so the front stays
// readable.
func PlanChart(title string, p layout.Plan) gochart.Chart {
	var xs, ys, fx, fy []float64
	best := math.Inf(1)
	for _, c := range p.Considered {
		best = math.Min(best, c.Step.StepTime)
	}
	for _, c := range p.Considered {
		if c.Step.StepTime > 2*best {
			continue
		}
		xs = append(xs, c.Memory.Total/(1<<30))
		ys = append(ys, c.Step.StepTime)
	}
	for _, c := range p.Pareto {
		fx = append(fx, c.Memory.Total/(1<<30))
		fy = append(fy, c.Step.StepTime)
	}
	dots := gochart.Style{StrokeWidth: gochart.Disabled, DotWidth: 2.5, DotColor: chart.ColorAt(0).WithAlpha(110)}
	c := gochart.Chart{
		Title: title, TitleStyle: gochart.Style{FontSize: 13}, Width: 1000, Height: 600,
		Background:     gochart.Style{Padding: gochart.Box{Top: 50, Left: 20, Right: 20, Bottom: 20}},
		XAxis:          chart.NiceXAxis("memory per GPU (GiB)", 0, maxOf(xs)),
		YAxis:          chart.NiceAxis("step time (s, layouts within 2x of the best)", 0.95*best, 2*best),
		YAxisSecondary: gochart.YAxis{Style: gochart.Hidden()}, // unused: hidden, or go-chart draws it at NaN
		Series: []gochart.Series{
			gochart.ContinuousSeries{Name: "feasible layouts", XValues: xs, YValues: ys, Style: dots},
			gochart.ContinuousSeries{Name: "Pareto front", XValues: fx, YValues: fy,
				Style: gochart.Style{StrokeColor: chart.ColorAt(1), StrokeWidth: 2, DotColor: chart.ColorAt(1), DotWidth: 4}},
		},
	}
	c.Background.Padding.Right = 200 // the legend lives right of the plot
	c.Elements = []gochart.Renderable{chart.Legend([]chart.LegendEntry{{Label: "feasible layouts", Color: chart.ColorAt(0), Dot: true}, {Label: "Pareto front", Color: chart.ColorAt(1)}})}
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

// layoutName is "TP4 PP4 VP5 CP2 DP2 ZeRO-1" (with EP when experts are spread).
func layoutName(l layout.Layout) string {
	s := fmt.Sprintf("TP%d PP%d VP%d CP%d DP%d", l.TP, l.PP, l.VP, l.CP, l.DP)
	if l.EP > 1 {
		s += fmt.Sprintf(" EP%d", l.EP)
	}
	if l.ETP > 0 && l.ETP != l.TP {
		s += fmt.Sprintf(" ETP%d", l.ETP)
	}
	return s + fmt.Sprintf(" ZeRO-%d", l.Stage())
}
