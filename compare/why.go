package compare

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/internal/units"
)

// Why explains, for one phase, which terms moved T_est from a to b: the total change, the
// kernel family that carries most of it, and the causes beneath (bytes of weights and KV
// cache, FLOPs, the chip's peak and bandwidth). Empty when nothing moved.
func Why(a, b PhaseMetrics) string {
	if a.TEst <= 0 || b.TEst <= 0 {
		return ""
	}
	dt := b.TEst - a.TEst
	if math.Abs(dt) < 1e-3*a.TEst {
		return fmt.Sprintf("`%s` (%s): unchanged at %s.", a.Phase, a.Profile, fmtSec(a.TEst))
	}
	where := a.Target
	if a.Target != b.Target {
		where = a.Target + " → " + b.Target
	}
	var s strings.Builder
	fmt.Fprintf(&s, "`%s` on %s: %s → %s (%+.0f%%)", a.Phase, where, fmtSec(a.TEst), fmtSec(b.TEst), 100*dt/a.TEst)
	// the term that moved most, in the direction of the change
	names := make([]string, 0, len(a.Terms))
	for k := range a.Terms {
		names = append(names, k)
	}
	sort.Strings(names)
	top, topD := "", 0.0
	for _, k := range names {
		if d := b.Terms[k] - a.Terms[k]; d*dt > 0 && math.Abs(d) > math.Abs(topD) {
			top, topD = k, d
		}
	}
	if top != "" {
		fmt.Fprintf(&s, ", mostly %s (%s of the %s)", top, fmtSignedSec(topD), fmtSignedSec(dt))
	}
	var causes []string
	ratio := func(what string, x, y float64, unit func(float64) string) {
		if x > 0 && y > 0 && math.Abs(y/x-1) >= 0.02 {
			causes = append(causes, fmt.Sprintf("%s %s → %s (%+.0f%%)", what, unit(x), unit(y), 100*(y/x-1)))
		}
	}
	bytesU := func(v float64) string { return units.SI(v, "B") }
	ratio("weights streamed", a.BytesWeights, b.BytesWeights, bytesU)
	ratio("KV cache read", a.BytesKV, b.BytesKV, bytesU)
	ratio("activations", a.BytesAct, b.BytesAct, bytesU)
	ratio("FLOPs", a.FTheory, b.FTheory, func(v float64) string { return units.SI(v, "FLOP") })
	ratio("peak", a.Peak, b.Peak, func(v float64) string { return units.SI(v, "FLOP/s") })
	ratio("HBM bandwidth", a.BWHBM, b.BWHBM, func(v float64) string { return units.SI(v, "B/s") })
	if len(causes) > 0 {
		fmt.Fprintf(&s, ": %s", strings.Join(causes, "; "))
	}
	if a.Regime != b.Regime {
		fmt.Fprintf(&s, "; the regime changes from `%s` to `%s`", a.Regime, b.Regime)
	}
	return s.String() + "."
}

func fmtSec(v float64) string { return fmt.Sprintf("%.3g ms", v*1e3) }

func fmtSignedSec(v float64) string { return fmt.Sprintf("%+.3g ms", v*1e3) }
