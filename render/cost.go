package render

import (
	"fmt"
	"io"
	"math"

	"github.com/mrep-dev/mrep/econ"
)

// WriteTrainingCost writes the cost of a training run on the plan's best layout (nothing
// when r is nil), its inputs beside it: every figure is an estimate.
func WriteTrainingCost(out io.Writer, r *econ.Run) error {
	if r == nil {
		return nil
	}
	w := &errWriter{w: out}
	w.printf("\n## Training run of %.3g tokens on the best layout (estimate)\n\n", r.Tokens)
	w.printf("| Wall time | GPU-hours | Cost | Energy |\n|---:|---:|---:|---:|\n")
	cost := "– (no price: give --price CHIP=USD)"
	if r.USD > 0 {
		cost = "$" + Comma(int64(math.Round(r.USD)))
	}
	mwh := fmt.Sprintf("%.3g", r.MWh)
	if r.MWh >= 100 {
		mwh = Comma(int64(math.Round(r.MWh)))
	}
	w.printf("| %.1f days | %s | %s | %s MWh |\n\n", r.Seconds/86400, Comma(int64(math.Round(r.GPUHours))), cost, mwh)
	w.printf("Inputs: %s GPUs at %s tokens/s (the layout's step); ", Comma(r.GPUs), Comma(int64(math.Round(r.TokensPerS))))
	if r.USD > 0 {
		w.printf("price from %s; ", Visible(r.PriceSource))
	}
	w.printf("%.0f W per GPU with the node's share (%.0f W TDP, %.0f W idle, %.0f W node share, busy outside the pipeline bubble; %s).\n",
		r.WattsPerGPU, r.Power.TDPW, r.Power.IdleW, r.Power.NodeOverheadW, Visible(r.Power.Source))
	return w.err
}
