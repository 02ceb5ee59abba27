package calib

import (
	"sort"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/chips"
)

// curvePoint is one serving run: its interactivity (tokens/s a user sees, 1/TPOT) and the
// output tokens/s per GPU the deployment carried.
type curvePoint struct{ user, gpu float64 }

// at is the curve's tokens/s per GPU at interactivity x, linear between the runs around it; a
// prediction may extend its end runs' line by up to a fifth of its span (a model whose TPOT is
// a little long puts the same runs a little left of the measured ones). false: x is further out.
func at(pts []curvePoint, x, reach float64) (float64, bool) {
	sort.Slice(pts, func(i, j int) bool { return pts[i].user < pts[j].user })
	n := len(pts)
	if n < 2 {
		return 0, false
	}
	line := func(a, b curvePoint) float64 {
		if b.user == a.user {
			return (a.gpu + b.gpu) / 2
		}
		return a.gpu + (b.gpu-a.gpu)*(x-a.user)/(b.user-a.user)
	}
	for i := 1; i < n; i++ {
		if pts[i-1].user <= x && x <= pts[i].user {
			return line(pts[i-1], pts[i]), true
		}
	}
	span := pts[n-1].user - pts[0].user
	switch {
	case x < pts[0].user && pts[0].user-x <= reach*span:
		return line(pts[0], pts[1]), true
	case x > pts[n-1].user && x-pts[n-1].user <= reach*span:
		return line(pts[n-2], pts[n-1]), true
	}
	return 0, false
}

// A buyer's question: at 30 tokens/s per user, which chip (each with the engine its maker or
// the engine's project published DeepSeek-R1 on, about 1k in / 1k out, 8 GPUs or the FP4
// deployment's 4) carries the most output tokens/s per GPU? The measured curves of the fit
// sources (AMD's ATOM runs on MI355X and MI300X, sgl-cookbook's SGLang runs on B200) give an
// order; mrep's predictions of the same runs must give the same order wherever the measured
// figures differ by more than 15%.
func TestChipRankingAtInteractivity(t *testing.T) {
	const target = 30.0
	rows := append(AMDServing(), BenchServe()...)
	type key struct {
		name                string
		conc, isl, osl, gpu int64
		src                 string
	}
	configs := map[string]func(Row) bool{
		"MI355X ATOM FP8 TP8":   func(r Row) bool { return r.Chip == "MI355X" && r.TP == 8 && r.WeightDType == "fp8" && r.ISL < 2000 },
		"MI355X ATOM MXFP4 TP4": func(r Row) bool { return r.Chip == "MI355X" && r.TP == 4 && r.WeightDType == "fp4" && r.ISL < 2000 },
		"MI300X ATOM FP8 TP8":   func(r Row) bool { return r.Chip == "MI300X" && r.Engine == "atom" },
		"B200 SGLang FP8 TP8":   func(r Row) bool { return r.Chip == "B200" && r.Engine == "sglang" && r.ISL < 1000 && r.OSL < 1000 },
	}
	var picked []Row
	for _, r := range rows {
		if r.Model != "DeepSeek-R1" && r.Model != "DeepSeek-V3" || r.SpecTokens > 0 || r.Metric != "tpot" && r.Metric != "output_throughput" {
			continue
		}
		for _, ok := range configs {
			if ok(r) {
				picked = append(picked, r)
			}
		}
	}
	rep, err := Validate(prepared(t, picked), nil)
	if err != nil {
		t.Fatal(err)
	}
	type run struct{ tpot, tps, ptpot, ptps float64 }
	runs := map[string]map[key]*run{}
	for i, r := range picked {
		res := rep.Rows[i]
		if res.ID != r.ID || res.Skipped != "" {
			t.Fatalf("row %s: %+v", r.ID, res)
		}
		for name, ok := range configs {
			if !ok(r) {
				continue
			}
			if runs[name] == nil {
				runs[name] = map[key]*run{}
			}
			k := key{name, r.Concurrency, r.ISL, r.OSL, r.GPUs, r.Source}
			if runs[name][k] == nil {
				runs[name][k] = &run{}
			}
			u := runs[name][k]
			if r.Metric == "tpot" {
				if u.tpot == 0 || r.Stat == "median" {
					u.tpot, u.ptpot = r.Measured, res.Predicted
				}
			} else {
				u.tps, u.ptps = r.Measured/float64(r.GPUs), res.Predicted/float64(r.GPUs)
			}
		}
	}
	measured, predicted := map[string]float64{}, map[string]float64{}
	var names []string
	for name, rs := range runs {
		var m, p []curvePoint
		for _, u := range rs {
			if u.tpot > 0 && u.tps > 0 {
				m = append(m, curvePoint{1 / u.tpot, u.tps})
				p = append(p, curvePoint{1 / u.ptpot, u.ptps})
			}
		}
		mv, ok1 := at(m, target, 0)
		pv, ok2 := at(p, target, 0.2)
		if !ok1 || !ok2 {
			t.Errorf("%s: its runs do not span %g tok/s per user (measured %v, predicted %v)", name, target, m, p)
			continue
		}
		measured[name], predicted[name] = mv, pv
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return measured[names[i]] > measured[names[j]] })
	for i, n := range names {
		t.Logf("%d. %-22s measured %5.0f tok/s/GPU, predicted %5.0f (%+.0f%%)", i+1, n, measured[n], predicted[n], 100*(predicted[n]/measured[n]-1))
	}
	if len(names) != len(configs) {
		t.Fatalf("%d of %d chips ranked", len(names), len(configs))
	}
	for i, a := range names {
		for _, b := range names[i+1:] {
			if measured[a] > 1.15*measured[b] && !(predicted[a] > predicted[b]) {
				t.Errorf("measured %s (%.0f) ahead of %s (%.0f) by %.0f%%; predicted %.0f and %.0f", a, measured[a], b, measured[b],
					100*(measured[a]/measured[b]-1), predicted[a], predicted[b])
			}
		}
	}
}

// AMD's own serving runs (amd_serving.json) are MI355X's atom lane's fit set: by engine and chip,
// its throughput within 15% median, TPOT within 20% (the bounds) and mean TTFT within
// 25% (a mean carries the first burst's queue); MI300X's runs, which no figure was fitted to,
// within 15%; MI325X and MI355X's other engines carry what the sources say they share.
func TestAMDServingLanes(t *testing.T) {
	rep, err := Validate(prepared(t, AMDServing()), nil)
	if err != nil {
		t.Fatal(err)
	}
	bound := map[string]float64{"atom on MI355X bench_output_throughput": 0.15, "atom on MI355X bench_tpot": 0.20, "atom on MI355X bench_ttft": 0.25,
		"atom on MI300X bench_output_throughput": 0.15, "atom on MI300X bench_tpot": 0.15}
	seen := 0
	for _, g := range rep.EngineChips {
		b, ok := bound[g.Group+" "+g.Phase]
		if !ok {
			t.Errorf("unexpected group %s %s", g.Group, g.Phase)
			continue
		}
		seen++
		t.Logf("%s %s: %d rows, median |err| %.1f%%", g.Group, g.Phase, g.Rows, 100*g.MedianAbsErr)
		if g.MedianAbsErr > b {
			t.Errorf("%s %s: median |err| %.1f%%, bound %.0f%%", g.Group, g.Phase, 100*g.MedianAbsErr, 100*b)
		}
	}
	if seen != len(bound) {
		t.Errorf("%d of %d engine x chip groups", seen, len(bound))
	}
	db := chips.Default()
	lanes := db.LanesOf("MI355X")
	if !strings.Contains(lanes["atom"].Sources["hbm_frac"], "amd_serving.json") || lanes["atom"].Release == "" {
		t.Errorf("MI355X's atom lane: %+v", lanes["atom"])
	}
	for _, e := range []string{"sglang", "vllm"} {
		if lanes[e].HBMFrac != lanes["atom"].HBMFrac || !strings.Contains(lanes[e].Sources["hbm_frac"], "AITER") {
			t.Errorf("MI355X's %s lane does not carry the atom lane's kernels: %+v", e, lanes[e])
		}
	}
	for e, l := range db.LanesOf("MI300X") {
		if db.LanesOf("MI325X")[e].StepOverheadUs != l.StepOverheadUs {
			t.Errorf("MI325X's %s lane does not carry MI300X's", e)
		}
	}
}
