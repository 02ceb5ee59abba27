// Package report builds every number and finding the full model report shows, computed once:
// the analysis on every target, the sweeps, the exploration, memory per GPU (from the one
// memory model in layout), the communication envelope, the sensitivity grid and the advice.
// It writes nothing: render turns its Data into markdown and charts.
package report

import (
	"fmt"
	"math"
	"sort"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/layout"
	"github.com/mrep-dev/mrep/model"
)

// Options are the report's knobs (the seed's dump_model_info options).
type Options struct {
	Batches            []int64 // decode batch sweep
	Seqs               []int64 // prefill sequence sweep
	SeqsDefault        bool    // Seqs are the defaults: the model's context length may be appended
	SensitivityProfile string  // a analyzer.GridProfiles name, or "off"
	ExploreEPs         []int64
	ExploreLens        []int64
	ExploreAlpha       float64
	ExploreMaxB        int64
	WorkedBatch        int64 // preferred batch of the worked example
}

// DefaultOptions are the seed's sweeps.
func DefaultOptions() Options {
	return Options{
		Batches:            []int64{1, 2, 4, 8, 16, 32, 64, 128},
		Seqs:               []int64{64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768},
		SeqsDefault:        true,
		SensitivityProfile: "medium_full_grid",
		ExploreEPs:         []int64{1, 2, 4, 8, 16, 32, 64},
		ExploreLens:        []int64{2048, 4096, 8192, 16384},
		ExploreAlpha:       0.9,
		ExploreMaxB:        16384,
		WorkedBatch:        128,
	}
}

// Data is every value the report shows, computed once; render only formats it.
type Data struct {
	Run           analyzer.RunInfo            `json:"run"`
	Model         *analyzer.Model             `json:"model"`
	Summary       analyzer.ParamSummary       `json:"summary"`
	Patterns      []analyzer.PatternRow       `json:"patterns"` // the largest MaxPatterns
	PatternsTotal int                         `json:"patterns_total"`
	Tensors       []analyzer.TensorRow        `json:"-"`
	Trace         *model.Trace                `json:"-"` // the dump's FlopCounterMode trace, if any
	Config        [][2]string                 `json:"config"`
	Analysis      analyzer.Analysis           `json:"analysis"`
	Primary       analyzer.Target             `json:"primary"`
	DecodeSweep   []analyzer.SweepPoint       `json:"decode_batch_sweep"`
	BCrit         map[string]float64          `json:"B_crit"` // by profile; absent = not reached
	PrefillSweep  []analyzer.SweepPoint       `json:"prefill_seq_sweep"`
	Worked        *analyzer.Result            `json:"worked_example"`
	WorkedProfile string                      `json:"worked_profile"`
	Exploration   []analyzer.ExplorationRow   `json:"decode_exploration"`
	Memory        Memory                      `json:"memory"`
	Envelope      []analyzer.EnvelopeRow      `json:"communication_envelope"`
	Grid          string                      `json:"sensitivity_profile"`
	Sensitivity   []analyzer.SensitivityPoint `json:"sensitivity"`
	Ranks         []analyzer.KnobRank         `json:"knob_ranking"`
	// Categories places each parameter category of each phase and profile on the primary
	// target's roofline (the category rooflines).
	Categories []CategoryPoint `json:"category_roofline"`
	// Advice is the three next optimizations, by how much of the step the term they target holds.
	Advice []string `json:"next_optimizations"`
	// Findings are the values the report's prose states, computed here so render only formats.
	Findings Findings `json:"-"`
	Options  Options  `json:"options"`
}

// MaxPatterns bounds the module patterns a report carries: a model of 200,000 distinct
// modules would otherwise put 37 MB of one-instance rows into report.json.
const MaxPatterns = 200

// Build computes the report's values. profiles[0..] and targets[0] (the primary) drive
// the sweeps, exploration and sensitivity; every target gets the KPI matrix.
func Build(d *model.Dump, run analyzer.RunInfo, s analyzer.Scenario, targets []analyzer.Target, profiles []analyzer.ExecProfile, o Options) (Data, error) {
	m := analyzer.NewModel(d)
	pats := analyzer.Breakdown(d)
	total := len(pats)
	if len(pats) > MaxPatterns {
		pats = pats[:MaxPatterns]
	}
	r := Data{Run: run, Model: m, Summary: analyzer.Summarize(d), Patterns: pats, PatternsTotal: total, Tensors: analyzer.Tensors(d),
		Trace: d.Trace, Config: analyzer.ConfigTable(d), Primary: targets[0], BCrit: map[string]float64{}, Options: o}
	var err error
	if r.Analysis, err = analyzer.Run(m, s, targets, profiles, analyzer.Phases); err != nil {
		return r, err
	}
	if r.DecodeSweep, err = analyzer.SweepDecodeBatch(m, s, targets[0], profiles, o.Batches); err != nil {
		return r, err
	}
	for _, p := range profiles {
		if b, ok := analyzer.BCrit(r.DecodeSweep, p.Name, targets[0].Knee); ok {
			r.BCrit[p.Name] = b
		}
	}
	seqs := o.Seqs
	// As the seed does, end the default sweep at the model's context length when it is longer.
	if mp := m.Fingerprint.MaxPositions; o.SeqsDefault && len(seqs) > 0 && mp > seqs[len(seqs)-1] && mp <= 1<<20 {
		seqs = append(append([]int64(nil), seqs...), mp)
		r.Options.Seqs = seqs
	}
	if r.PrefillSweep, err = analyzer.SweepPrefillSeq(m, s, targets[0], profiles, seqs); err != nil {
		return r, err
	}
	// Worked example: the preferred batch (the seed uses 128) under the last profile, else the
	// largest sampled batch.
	r.WorkedProfile = profiles[len(profiles)-1].Name
	for i := range r.DecodeSweep {
		pt := r.DecodeSweep[i]
		if pt.X == o.WorkedBatch || (r.Worked == nil && i == len(r.DecodeSweep)-1) {
			res := pt.Results[r.WorkedProfile]
			r.Worked = &res
		}
	}
	if m.Fingerprint.Transformer {
		explore := profiles[len(profiles)-1]
		eps := o.ExploreEPs
		if m.Fingerprint.MoE == nil {
			eps = []int64{1} // EP means nothing without experts
		}
		if r.Exploration, err = analyzer.ExploreDecode(m, s, targets[0], explore, eps, o.ExploreLens, o.ExploreAlpha, o.ExploreMaxB); err != nil {
			return r, err
		}
	}
	r.Memory = MemoryOf(m, s, targets[0].Chip.MemoryBytes())
	r.Envelope = analyzer.Envelope(m, s, targets[0])
	if g, ok := analyzer.GridProfiles[o.SensitivityProfile]; ok && m.Fingerprint.Transformer {
		r.Grid = g.Name
		if r.Sensitivity, err = analyzer.Sensitivity(m, s, targets[0], profiles, g); err != nil {
			return r, err
		}
		r.Ranks = analyzer.RankKnobs(r.Sensitivity, profiles[len(profiles)-1].Name)
	} else if o.SensitivityProfile != "off" && o.SensitivityProfile != "" && !ok {
		return r, fmt.Errorf("sensitivity profile %q: want one of small_grid, medium_full_grid, large_full_grid or off", o.SensitivityProfile)
	}
	r.Categories = categoryPoints(r.Analysis, targets[0])
	if m.Fingerprint.Transformer && len(r.DecodeSweep) > 0 {
		r.Advice = nextOptimizations(r)
	}
	r.Findings = findings(r, profiles)
	return r, nil
}

// Findings are what the report's prose says of the values above: the sensitivity grid's
// extremes and regimes, and the conclusions' shares.
type Findings struct {
	// Extremes are each profile's three fastest and three slowest sensitivity points, in
	// profile order.
	Extremes []ProfileExtremes
	// Regimes counts the last profile's sensitivity points by regime; BelowFloor those below
	// the compulsory HBM traffic.
	Regimes    map[string]int
	BelowFloor int
	// DecodeRegimes are the regimes the decode batch sweep passes through under the last
	// profile, sorted.
	DecodeRegimes []string
	// OptimizerBytes is the training step's optimizer term's HBM bytes under the last profile.
	OptimizerBytes float64
	// Largest is the category holding the most parameters, and LargestShare its share.
	Largest      analyzer.Category
	LargestShare float64
}

// ProfileExtremes are one profile's fastest and slowest sensitivity points.
type ProfileExtremes struct {
	Profile    string
	Fast, Slow []analyzer.SensitivityPoint
}

func findings(r Data, profiles []analyzer.ExecProfile) Findings {
	last := profiles[len(profiles)-1].Name
	var f Findings
	for _, p := range profiles {
		fast, slow := Extremes(r.Sensitivity, p.Name, 3)
		f.Extremes = append(f.Extremes, ProfileExtremes{Profile: p.Name, Fast: fast, Slow: slow})
	}
	f.Regimes, f.BelowFloor = RegimeCounts(r.Sensitivity, last)
	seen := map[string]bool{}
	for _, pt := range r.DecodeSweep {
		if rg := pt.Results[last].Timing.Regime; !seen[rg] {
			seen[rg] = true
			f.DecodeRegimes = append(f.DecodeRegimes, rg)
		}
	}
	sort.Strings(f.DecodeRegimes)
	if tr, ok := r.Analysis.Find(r.Primary.Label(), analyzer.Training, last); ok {
		f.OptimizerBytes = TermCost(tr.Step, "optimizer").BytesHBM()
	}
	f.Largest, f.LargestShare = Largest(r.Model)
	return f
}

// Memory is the report's memory per GPU at the anchor scenario, from the one memory model:
// inference (weights, the KV cache of B sequences of L tokens, a prefill step's activations) and
// training on the scenario's own layout (its TP, CP and EP, one pipeline stage, no optimizer
// sharding), each with its verdict.
type Memory struct {
	Inference layout.Fit    `json:"inference"`
	Training  layout.Fit    `json:"training"`
	Layout    layout.Layout `json:"training_layout"`
}

// MemoryOf is the report's memory section for the scenario on a GPU of capacity bytes.
func MemoryOf(m *analyzer.Model, s analyzer.Scenario, capacity float64) Memory {
	l := layout.ScenarioLayout(s)
	return Memory{
		Inference: layout.Check(fmt.Sprintf("inference (B=%d, S=%d, L=%d)", s.Batch, s.Seq, s.KVLen), layout.InferenceMemory(m, s, 1, 0), capacity),
		Training:  layout.CheckTraining(fmt.Sprintf("training (MBS %d, seq %d, TP %d, EP %d, no ZeRO)", l.MBS, l.Seq, l.TP, l.EP), layout.TrainingMemory(m, l), capacity),
		Layout:    l,
	}
}

// Extremes returns the n fastest and n slowest points of a profile.
func Extremes(points []analyzer.SensitivityPoint, profile string, n int) (fast, slow []analyzer.SensitivityPoint) {
	var ps []analyzer.SensitivityPoint
	for _, p := range points {
		if p.Knobs.Exec == profile {
			ps = append(ps, p)
		}
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Timing.TEst < ps[j].Timing.TEst })
	if n > len(ps) {
		n = len(ps)
	}
	fast = ps[:n]
	slow = append([]analyzer.SensitivityPoint(nil), ps[len(ps)-n:]...)
	return fast, slow
}

// RegimeCounts counts regimes (and below-floor points) of a profile's sensitivity points.
func RegimeCounts(points []analyzer.SensitivityPoint, profile string) (counts map[string]int, below int) {
	counts = map[string]int{}
	for _, p := range points {
		if p.Knobs.Exec != profile {
			continue
		}
		counts[p.Timing.Regime]++
		if p.Timing.BelowFloor {
			below++
		}
	}
	return counts, below
}

// Share is part/whole guarded against zero.
func Share(part, whole float64) float64 {
	if whole == 0 || math.IsNaN(whole) {
		return 0
	}
	return part / whole
}

// CategoryPoint is one parameter category of one phase under one profile on the primary
// target's roofline, its own kernels timed without the step's fixed overhead.
type CategoryPoint struct {
	Phase    analyzer.Phase `json:"phase"`
	Profile  string         `json:"profile"`
	Category string         `json:"category"`
	AIHBM    float64        `json:"AI_hbm"`
	TFEst    float64        `json:"TF_est"`
}

func categoryPoints(a analyzer.Analysis, primary analyzer.Target) []CategoryPoint {
	var out []CategoryPoint
	for _, ph := range analyzer.Phases {
		for _, p := range a.Profiles {
			for _, st := range a.Steps {
				if st.Phase != ph || st.Profile != p.Name {
					continue
				}
				for _, k := range analyzer.SortedCategories(st.ByCat) {
					c := st.ByCat[k]
					if c.FTheory <= 0 || c.BytesHBM() <= 0 {
						continue
					}
					tm := analyzer.Time(c, st.KernelsOf(k), primary, 0, false)
					if t := tm.TEst - tm.Breakdown.TOverhead; t > 0 {
						tm.TFEst = c.FTheory / t / 1e12
					}
					out = append(out, CategoryPoint{Phase: ph, Profile: p.Name, Category: k, AIHBM: tm.AIHBM, TFEst: tm.TFEst})
				}
			}
		}
	}
	return out
}
