package calib

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/serve"
	"github.com/mrep-dev/mrep/timing"
)

// RunDiff sets two measured serving runs side by side: what was measured, what mrep predicts,
// and which part of the engine's step moved between them, in the words of the report's step
// table, so a change a user measured is explained by a mechanism (a larger batch's GEMMs, the
// attention of longer contexts, the engine's host time), or shown not to be.
type RunDiff struct {
	A         string        `json:"a"`
	B         string        `json:"b"`
	Figures   []Figures     `json:"figures"`
	StepA     serve.StepMix `json:"step_a"`
	StepB     serve.StepMix `json:"step_b"`
	Moves     []Move        `json:"moves"` // per step, largest first
	Predicted string        `json:"predicted"`
}

// Figures is one figure of both runs, measured and predicted ("ttft median", in its unit).
type Figures struct {
	Name          string  `json:"name"`
	Unit          string  `json:"unit"`
	MeasuredA     float64 `json:"measured_a"`
	MeasuredB     float64 `json:"measured_b"`
	PredictedA    float64 `json:"predicted_a"`
	PredictedB    float64 `json:"predicted_b"`
	MeasuredMove  float64 `json:"measured_move"` // B/A - 1
	PredictedMove float64 `json:"predicted_move"`
}

// Move is one part of the step, as the report names it, in each run (seconds per step).
type Move struct {
	Part string  `json:"part"`
	A    float64 `json:"a_s"`
	B    float64 `json:"b_s"`
}

// StepParts are the report's names for the parts of an engine step (render's step table).
var StepParts = []string{"GEMMs (dense and grouped)", "Attention", "Memory-bound kernels (norms, activations, routing, KV writes)",
	"Exposed communication", "Kernel launches outside CUDA graphs", "Engine overhead (per step and per sequence)"}

func parts(m serve.StepMix) []float64 {
	return []float64{m.GEMM, m.Attention, m.Memory, m.Comm, m.Launch, m.Overhead}
}

// DiffRuns compares two measured runs, each given as its rows (one run's figures: every row the
// same run, as RunOf says). Both are simulated on the shipped figures.
func DiffRuns(a, b []Prepared) (RunDiff, error) {
	if len(a) == 0 || len(b) == 0 {
		return RunDiff{}, fmt.Errorf("a run without figures")
	}
	d := RunDiff{A: runID(a[0].Row), B: runID(b[0].Row)}
	sa, err := a[0].simulation()
	if err != nil {
		return d, fmt.Errorf("run %s: %w", d.A, err)
	}
	sb, err := b[0].simulation()
	if err != nil {
		return d, fmt.Errorf("run %s: %w", d.B, err)
	}
	d.StepA, d.StepB = sa.Mix, sb.Mix
	byName := map[string]*Figures{}
	var order []string
	add := func(ps []Prepared, first bool) error {
		for _, p := range ps {
			if p.Row.Kind != KindBenchServe {
				continue
			}
			name := p.Row.Metric + " " + p.Row.Stat
			f := byName[name]
			if f == nil {
				f = &Figures{Name: name, Unit: p.Row.Unit}
				byName[name] = f
				order = append(order, name)
			}
			pred, _, err := p.Predict(p.Chip.Efficiency)
			if err != nil {
				return err
			}
			if first {
				f.MeasuredA, f.PredictedA = p.Row.Measured, pred
			} else {
				f.MeasuredB, f.PredictedB = p.Row.Measured, pred
			}
		}
		return nil
	}
	if err := add(a, true); err != nil {
		return d, err
	}
	if err := add(b, false); err != nil {
		return d, err
	}
	for _, n := range order {
		f := byName[n]
		if f.MeasuredA > 0 && f.MeasuredB > 0 {
			f.MeasuredMove, f.PredictedMove = f.MeasuredB/f.MeasuredA-1, f.PredictedB/f.PredictedA-1
			d.Figures = append(d.Figures, *f)
		}
	}
	pa, pb := parts(d.StepA), parts(d.StepB)
	for i, name := range StepParts {
		d.Moves = append(d.Moves, Move{Part: name, A: pa[i], B: pb[i]})
	}
	sort.SliceStable(d.Moves, func(i, j int) bool {
		return math.Abs(d.Moves[i].B-d.Moves[i].A) > math.Abs(d.Moves[j].B-d.Moves[j].A)
	})
	d.Predicted = d.explain()
	return d, nil
}

// explain says in a sentence what moved: the step's change and its largest parts, with the
// batch and prompt tokens per step behind them.
func (d RunDiff) explain() string {
	a, b := d.StepA, d.StepB
	if !(a.MeanStep > 0) || !(b.MeanStep > 0) {
		return "the simulation took no steps"
	}
	var parts []string
	for _, m := range d.Moves[:2] {
		if delta := m.B - m.A; math.Abs(delta) > 0.05*math.Abs(b.MeanStep-a.MeanStep) {
			parts = append(parts, fmt.Sprintf("%s %+.2f ms", strings.SplitN(m.Part, " (", 2)[0], 1e3*delta))
		}
	}
	return fmt.Sprintf("the step goes from %.2f to %.2f ms (%+.0f%%): %s; %.0f → %.0f sequences decode per step, %.0f → %.0f prompt tokens per step",
		1e3*a.MeanStep, 1e3*b.MeanStep, 100*(b.MeanStep/a.MeanStep-1), strings.Join(parts, ", "), a.DecodeSeqs, b.DecodeSeqs, a.PrefillTokens, b.PrefillTokens)
}

// runID is the measured run a row belongs to, as its id says (DIGEST#RECORD), else RunOf.
func runID(r Row) string {
	if i := strings.LastIndex(r.ID, "-"); i > 0 {
		if j := strings.LastIndex(r.ID[:i], "-"); j > 0 && strings.Contains(r.ID[:j], "#") {
			return r.ID[:j]
		}
	}
	return RunOf(r)
}

// simulation is the bench row's run simulated step by step on the shipped figures.
func (p Prepared) simulation() (serve.SimResult, error) {
	if p.serve == nil || p.Row.Kind != KindBenchServe {
		return serve.SimResult{}, fmt.Errorf("row %s is not a serving benchmark's", p.Row.ID)
	}
	chip := p.Chip
	chip.Efficiency = chip.Efficiency.Lane(engineOf(p.Row, p.Chip))
	s, err := p.Row.Scenario()
	if err != nil {
		return serve.SimResult{}, err
	}
	tm, err := timing.New(chip, s.ComputeDType)
	if err != nil {
		return serve.SimResult{}, err
	}
	s.ETP = serve.InferenceETP(s.TP, s.EP)
	rp := serve.Replica{Model: p.serve, Scenario: s, Pred: tm, MemBytes: chip.MemoryBytes(), Engine: rowEngine(p.serve, p.Row, chip)}
	load := serve.Load{Kind: serve.Users, N: int(p.Row.Concurrency), Requests: int(p.Row.Requests), Seed: 1, Lengths: benchLengths(p.Row)}
	if p.Row.RequestRate > 0 {
		load.Kind, load.N, load.Rate = serve.Rate, 0, p.Row.RequestRate
	}
	return simulated(rp, load, p.Row, chip.Efficiency)
}
