package render

import (
	"fmt"
	"io"

	"github.com/mrep-dev/mrep/layout"
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
		rows = append(rows, []string{fmt.Sprint(i + 1), fmt.Sprintf("TP%d PP%d VP%d CP%d DP%d ZeRO-%d", l.TP, l.PP, l.VP, l.CP, l.DP, l.Stage()), fmt.Sprint(l.MBS), fmt.Sprint(l.GA()), l.Recompute,
			fmt.Sprintf("%.2f", s.StepTime), fmt.Sprintf("%.0f", s.TokensPerS/float64(l.GPUs())), fmt.Sprintf("%.1f%%", 100*s.MFU),
			fmt.Sprintf("%.1f", c.Memory.Total/(1<<30)), fmt.Sprintf("%.2f / %.2f / %.2f", s.Bubble, s.DPExposed, s.Optimizer), c.Why})
	}
	table(w, []string{"#", "Layout", "MBS", "GA", "Recompute", "Step (s)", "Tokens/s/GPU", "MFU", "Memory (GiB)", "Bubble / DP / optimizer (s)", "Why ahead of the next"}, "rlrrlrrrrrl", rows)
	return w.err
}

// LayoutResult is a training step on a layout for one target, with its memory per GPU.
type LayoutResult struct {
	Target       string        `json:"target"`
	Step         layout.Step   `json:"step"`
	Memory       layout.Memory `json:"memory_per_gpu"`
	MemoryBudget float64       `json:"memory_budget"`
}

// WriteLayouts puts the training layout's verdict first: does it fit, how long is a step,
// where the time goes.
func WriteLayouts(out io.Writer, rs []LayoutResult) error {
	w := &errWriter{w: out}
	for _, r := range rs {
		l, s, m := r.Step.Layout, r.Step, r.Memory
		fit := "fits"
		if m.Total > r.MemoryBudget {
			fit = "does NOT fit"
		}
		w.printf("**Training on %d GPUs of %s (TP%d PP%d VP%d CP%d DP%d, ZeRO-%d, MBS %d, GBS %d, GA %d, recompute %s):** memory per GPU %s, %.1f GiB of %.1f GiB (weights %.1f, gradients %.1f, optimizer %.1f, activations %.1f, margin %.1f GiB). Step %.3f s: %d micro-batches of %.1f ms on the slowest stage, bubble %.1f ms, exposed data-parallel traffic %.1f ms, optimizer %.1f ms; %.0f tokens/s (%.0f per GPU); MFU %.1f%% (F_theory), %.1f%% (6N + 12·L·H·Q·T), HFU %.1f%%.\n\n",
			l.GPUs(), r.Target, l.TP, l.PP, l.VP, l.CP, l.DP, l.Stage(), l.MBS, l.GBS, l.GA(), l.Recompute, fit, m.Total/(1<<30), r.MemoryBudget/(1<<30),
			m.Weights/(1<<30), m.Gradients/(1<<30), m.Optimizer/(1<<30), m.Activations/(1<<30), m.Margin/(1<<30),
			s.StepTime, l.GA(), s.Microbatch*1e3, s.Bubble*1e3, s.DPExposed*1e3, s.Optimizer*1e3, s.TokensPerS, s.TokensPerS/float64(l.GPUs()),
			100*s.MFU, 100*s.MFU6N, 100*s.HFU)
	}
	return w.err
}
