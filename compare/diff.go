package compare

import (
	"context"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/store"
)

// Diff is everything `mrep diff` shows: two runs under one scenario, or one run under two.
type Diff struct {
	RunA       analyzer.RunInfo `json:"run_a"`
	RunB       analyzer.RunInfo `json:"run_b"`
	Config     []ConfigChange   `json:"config_changes"`
	Categories []CountDelta     `json:"params_by_category"`
	Patterns   []CountDelta     `json:"params_by_pattern"`
	MetricsA   RunMetrics       `json:"metrics_a"`
	MetricsB   RunMetrics       `json:"metrics_b"`
	// ScenarioA and ScenarioB: a diff of one run under two scenarios (the flags of each);
	// phases are then paired by position (the targets may differ).
	ScenarioA string   `json:"scenario_a,omitempty"`
	ScenarioB string   `json:"scenario_b,omitempty"`
	Why       []string `json:"why"`
	Drift     []Drift  `json:"weight_drift,omitempty"`
	DriftNote string   `json:"drift_note,omitempty"`
}

// RunInfo names a stored run the way diffs, histories and reports do.
func RunInfo(r store.Run) analyzer.RunInfo {
	info := analyzer.RunInfo{ID: r.ID, Name: r.ModelName, Step: r.Step, Hash: r.ContentHash}
	if r.Label != nil {
		info.Label = *r.Label
	}
	return info
}

// Pairs pairs the two sides' phase metrics: by target, phase and profile for two runs, by
// position for one run under two scenarios.
func (d Diff) Pairs() [][2]PhaseMetrics {
	var out [][2]PhaseMetrics
	for i, pa := range d.MetricsA.Phases {
		if d.ScenarioA != "" {
			if i < len(d.MetricsB.Phases) {
				out = append(out, [2]PhaseMetrics{pa, d.MetricsB.Phases[i]})
			}
			continue
		}
		if pb, ok := d.MetricsB.Find(pa.Target, pa.Phase, pa.Profile); ok {
			out = append(out, [2]PhaseMetrics{pa, pb})
		}
	}
	return out
}

// Explain is the diff's opening paragraph: for each phase on the first target under the last
// profile, what moved the time (Why).
func (d Diff) Explain() []string {
	pairs := d.Pairs()
	if len(pairs) == 0 {
		return nil
	}
	target, profile := pairs[0][0].Target, pairs[len(pairs)-1][0].Profile
	var out []string
	for _, p := range pairs {
		if p[0].Target == target && p[0].Profile == profile {
			if s := Why(p[0], p[1]); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// RunsOptions are two stored runs to compare under one scenario.
type RunsOptions struct {
	Runs  [2]store.Run
	Dumps [2]*model.Dump // the runs' dumps, overrides applied
	Scenario
}

// Runs compares two runs: config, parameters, the performance model (through the analysis
// cache) and, for checkpoints of one architecture with real weights, weight drift.
func Runs(ctx context.Context, db *store.DB, o RunsOptions) (Diff, error) {
	var metrics [2]RunMetrics
	for i, r := range o.Runs {
		var err error
		if metrics[i], err = MetricsFor(ctx, db, r.ID, o.Scenario, o.Dumps[i]); err != nil {
			return Diff{}, err
		}
	}
	a, b := o.Dumps[0], o.Dumps[1]
	cats, pats := ParamDeltas(a, b, analyzer.NewModel(a), analyzer.NewModel(b))
	d := Diff{RunA: RunInfo(o.Runs[0]), RunB: RunInfo(o.Runs[1]),
		Config: ConfigDiff(a.Config, b.Config), Categories: cats, Patterns: pats,
		MetricsA: metrics[0], MetricsB: metrics[1]}
	switch {
	case !SameArchitecture(a, b):
		d.DriftNote = "Weight drift is compared only between runs of the same architecture (checkpoints); these module trees differ."
	case !o.Runs[0].HasStats || !o.Runs[1].HasStats:
		d.DriftNote = "Weight drift needs real weight statistics in both runs; at least one was dumped without values (meta device)."
	default:
		stats, err := db.TensorStats(ctx, []int64{o.Runs[0].ID, o.Runs[1].ID})
		if err != nil {
			return Diff{}, err
		}
		d.Drift = WeightDrift(stats[o.Runs[0].ID], stats[o.Runs[1].ID])
	}
	d.Why = d.Explain()
	return d, nil
}

// ScenariosOptions is one stored run to compare under two scenarios.
type ScenariosOptions struct {
	Run  store.Run
	Dump *model.Dump // the run's dump, overrides applied
	A, B Scenario
	// FlagsA and FlagsB are the flags each scenario was given as, which name it in the diff.
	FlagsA, FlagsB string
}

// Scenarios compares one run under two scenarios: which terms move its time. Phases pair by
// position, so A and B should name as many targets and profiles.
func Scenarios(ctx context.Context, db *store.DB, o ScenariosOptions) (Diff, error) {
	ma, err := MetricsFor(ctx, db, o.Run.ID, o.A, o.Dump)
	if err != nil {
		return Diff{}, err
	}
	mb, err := MetricsFor(ctx, db, o.Run.ID, o.B, o.Dump)
	if err != nil {
		return Diff{}, err
	}
	// the flags on one line, however they were spaced
	d := Diff{RunA: RunInfo(o.Run), RunB: RunInfo(o.Run), MetricsA: ma, MetricsB: mb,
		ScenarioA: strings.Join(strings.Fields(o.FlagsA), " "), ScenarioB: strings.Join(strings.Fields(o.FlagsB), " ")}
	d.Why = d.Explain()
	return d, nil
}
