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
