package render

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"

	"github.com/mrep-dev/mrep/analyzer"
)

// WriteSensitivityCSV writes every grid point: knobs, then the time model's outputs.
func WriteSensitivityCSV(out io.Writer, points []analyzer.SensitivityPoint) error {
	w := csv.NewWriter(out)
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 8, 64) }
	if err := w.Write([]string{"exec", "kv_dtype_bytes", "top_k", "kv_rank_scale", "hidden_scale", "L", "AI_hbm", "T_comp_ms",
		"T_hbm_ms", "T_net_ms", "T_est_ms", "MFU_est", "regime", "below_floor", "T_roofline_ms"}); err != nil {
		return err
	}
	for _, p := range points {
		k, t := p.Knobs, p.Timing
		if err := w.Write([]string{k.Exec, f(k.KVBytes), fmt.Sprint(k.TopK), f(k.KVRankScale), f(k.HiddenScale), fmt.Sprint(k.L),
			f(t.AIHBM), f(t.TComp * 1e3), f(t.THBM * 1e3), f(t.TNet * 1e3), f(t.TEst * 1e3), f(t.MFU), t.Regime,
			strconv.FormatBool(t.BelowFloor), f(t.TRoofline * 1e3)}); err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}
