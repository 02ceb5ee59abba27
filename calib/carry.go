package calib

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/mrep-dev/mrep/chips"
)

// A lane's GEMM fraction carried to a chip without rows of its own is scaled by how the two
// chips' measured GEMM kernels compare: the shipped kernel tables (aiconfigurator-core's, the
// same grid of shapes timed on every chip under each engine) say how much of its peak each
// chip's GEMMs reach relative to the other's. A framework's GEMMs differ from the engines' by
// what the framework adds (Transformer Engine's casts, its kernel choices), which the lane's
// fit on the sibling holds; the chip-to-chip step is the silicon's and its power budget's,
// which the kernels measure. Where both chips have their own fits the ratio is checked against
// them (TestKernelRatioCarriesTheLaneFit): B200 over GB200.

// carryShape is the smallest GEMM dimension the ratio is taken over: training's GEMMs (a
// micro-batch of thousands of tokens, hidden sizes of thousands) are large, where the engines'
// small-M shapes are launch- and weight-bound.
const carryShape = 4096

// kernelEngines are the engines whose GEMM tables the ratio pools (the median of theirs).
var kernelEngines = []string{"sglang", "trtllm", "vllm"}

// fracRatio is chip a's measured GEMM fraction of its dtype peak over chip b's: per engine,
// the median over the large shapes both chips' tables hold of b's time over a's, times b's peak
// over a's; then the median over the engines with both tables. ok is false where no engine has
// both.
type fracRatio struct {
	ratio   float64
	engines []string
	shapes  int
}

var (
	ratioOnce sync.Once
	ratioTabs map[[3]string]map[[3]float64]float64 // chip, engine, dtype -> shape -> us
	ratioErr  error
)

func gemmTables() (map[[3]string]map[[3]float64]float64, error) {
	ratioOnce.Do(func() {
		ks, err := Kernels()
		if err != nil {
			ratioErr = err
			return
		}
		ratioTabs = map[[3]string]map[[3]float64]float64{}
		for _, g := range ks.Groups {
			if g.Family != "gemm" || len(g.Cols) < 4 || g.Cols[0] != "m" || g.Cols[3] != "us" {
				continue
			}
			t := map[[3]float64]float64{}
			for _, r := range g.Rows {
				if r[0] >= carryShape && r[1] >= carryShape && r[2] >= carryShape && r[3] > 0 {
					t[[3]float64{r[0], r[1], r[2]}] = r[3]
				}
			}
			if len(t) > 0 {
				ratioTabs[[3]string{g.Chip, g.Engine, g.DType}] = t
			}
		}
	})
	return ratioTabs, ratioErr
}

// kernelFracRatio is a's GEMM fraction in dtype over b's, as the shipped kernels measure them
// (peaks from db).
func kernelFracRatio(db *chips.DB, a, b, dtype string) (fracRatio, bool) {
	tabs, err := gemmTables()
	if err != nil || db == nil {
		return fracRatio{}, false
	}
	ca, errA := db.Lookup(a)
	cb, errB := db.Lookup(b)
	if errA != nil || errB != nil {
		return fracRatio{}, false
	}
	pa, errA := ca.Peak(dtype)
	pb, errB := cb.Peak(dtype)
	if errA != nil || errB != nil || pa <= 0 || pb <= 0 {
		return fracRatio{}, false
	}
	var per []float64
	out := fracRatio{}
	for _, eng := range kernelEngines {
		ta, tb := tabs[[3]string{ca.Name, eng, dtype}], tabs[[3]string{cb.Name, eng, dtype}]
		var rs []float64
		for s, ua := range ta {
			if ub, ok := tb[s]; ok {
				rs = append(rs, ub/ua)
			}
		}
		if len(rs) == 0 {
			continue
		}
		sort.Float64s(rs)
		per = append(per, median(rs)*pb/pa)
		out.engines = append(out.engines, eng)
		out.shapes += len(rs)
	}
	if len(per) == 0 {
		return fracRatio{}, false
	}
	sort.Float64s(per)
	out.ratio = median(per)
	return out, true
}

// shippedChips is the chip database the kernel tables were measured on: their peaks turn the
// measured times into fractions (parsed once; lane carries run per row in leave-one-source-out).
var shippedChips = sync.OnceValue(chips.Default)

var (
	ratioMu   sync.Mutex
	ratioMemo = map[[3]string]fracRatio{}
)

// shippedFracRatio is kernelFracRatio on the shipped chips, memoized.
func shippedFracRatio(a, b, dtype string) (fracRatio, bool) {
	key := [3]string{a, b, dtype}
	ratioMu.Lock()
	defer ratioMu.Unlock()
	if r, ok := ratioMemo[key]; ok {
		return r, r.ratio > 0
	}
	r, _ := kernelFracRatio(shippedChips(), a, b, dtype)
	ratioMemo[key] = r
	return r, r.ratio > 0
}

// carriedGEMMFrac is a GEMM fraction v fitted on chip from carried to chip to, and why: scaled by
// the kernels' ratio where both chips have measured GEMMs in that dtype, as it was otherwise.
func carriedGEMMFrac(to, from, dtype string, v float64) (float64, string) {
	r, ok := shippedFracRatio(to, from, dtype)
	if !ok {
		return v, ""
	}
	return math.Min(1, v*r.ratio), fmt.Sprintf(" x %.3f, %s's measured %s GEMM fraction over %s's (the shipped kernel tables: %s, %d shapes of at least %d in every dimension, median per engine, then over engines)",
		r.ratio, to, dtype, from, strings.Join(r.engines, ", "), r.shapes, carryShape)
}
