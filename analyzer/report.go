package analyzer

import (
	"fmt"
	"math"
	"sort"

	"github.com/mrep-dev/mrep/model"
)

// ReportOptions are the report's knobs (the seed's dump_model_info options).
type ReportOptions struct {
	Batches            []int64 // decode batch sweep
	Seqs               []int64 // prefill sequence sweep
	SeqsDefault        bool    // Seqs are the defaults: the model's context length may be appended
	SensitivityProfile string  // a GridProfiles name, or "off"
	ExploreEPs         []int64
	ExploreLens        []int64
	ExploreAlpha       float64
	ExploreMaxB        int64
	WorkedBatch        int64 // preferred batch of the worked example
}

// DefaultReportOptions are the seed's sweeps.
func DefaultReportOptions() ReportOptions {
	return ReportOptions{
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

// ReportData is every value the report shows, computed once; render only formats it.
type ReportData struct {
	Run           RunInfo            `json:"run"`
	Model         *Model             `json:"model"`
	Summary       ParamSummary       `json:"summary"`
	Patterns      []PatternRow       `json:"patterns"` // the largest MaxReportPatterns
	PatternsTotal int                `json:"patterns_total"`
	Tensors       []TensorRow        `json:"-"`
	Trace         *model.Trace       `json:"-"` // the dump's FlopCounterMode trace, if any
	Config        [][2]string        `json:"config"`
	Analysis      Analysis           `json:"analysis"`
	Primary       Target             `json:"primary"`
	DecodeSweep   []SweepPoint       `json:"decode_batch_sweep"`
	BCrit         map[string]float64 `json:"B_crit"` // by profile; absent = not reached
	PrefillSweep  []SweepPoint       `json:"prefill_seq_sweep"`
	Worked        *Result            `json:"worked_example"`
	WorkedProfile string             `json:"worked_profile"`
	Exploration   []ExplorationRow   `json:"decode_exploration"`
	Memory        Feasibility        `json:"memory"`
	Envelope      []EnvelopeRow      `json:"communication_envelope"`
	Grid          string             `json:"sensitivity_profile"`
	Sensitivity   []SensitivityPoint `json:"sensitivity"`
	Ranks         []KnobRank         `json:"knob_ranking"`
	Options       ReportOptions      `json:"options"`
}

// MaxReportPatterns bounds the module patterns a report carries: a model of 200,000 distinct
// modules would otherwise put 37 MB of one-instance rows into report.json.
const MaxReportPatterns = 200

// RunInfo identifies the run in the report.
type RunInfo struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Label string `json:"label,omitempty"`
	Step  *int64 `json:"step,omitempty"`
	Hash  string `json:"content_hash"`
}

// BuildReport computes the report's values. profiles[0..] and targets[0] (the primary) drive
// the sweeps, exploration and sensitivity; every target gets the KPI matrix.
func BuildReport(d *model.Dump, run RunInfo, s Scenario, targets []Target, profiles []ExecProfile, o ReportOptions) (ReportData, error) {
	m := NewModel(d)
	pats := Breakdown(d)
	total := len(pats)
	if len(pats) > MaxReportPatterns {
		pats = pats[:MaxReportPatterns]
	}
	r := ReportData{Run: run, Model: m, Summary: Summarize(d), Patterns: pats, PatternsTotal: total, Tensors: Tensors(d),
		Trace: d.Trace, Config: ConfigTable(d), Primary: targets[0], BCrit: map[string]float64{}, Options: o}
	var err error
	if r.Analysis, err = Run(m, s, targets, profiles, Phases); err != nil {
		return r, err
	}
	if r.DecodeSweep, err = SweepDecodeBatch(m, s, targets[0], profiles, o.Batches); err != nil {
		return r, err
	}
	for _, p := range profiles {
		if b, ok := BCrit(r.DecodeSweep, p.Name, targets[0].Knee); ok {
			r.BCrit[p.Name] = b
		}
	}
	seqs := o.Seqs
	// As the seed does, end the default sweep at the model's context length when it is longer.
	if mp := m.Fingerprint.MaxPositions; o.SeqsDefault && len(seqs) > 0 && mp > seqs[len(seqs)-1] && mp <= 1<<20 {
		seqs = append(append([]int64(nil), seqs...), mp)
		r.Options.Seqs = seqs
	}
	if r.PrefillSweep, err = SweepPrefillSeq(m, s, targets[0], profiles, seqs); err != nil {
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
		if r.Exploration, err = ExploreDecode(m, s, targets[0], explore, eps, o.ExploreLens, o.ExploreAlpha, o.ExploreMaxB); err != nil {
			return r, err
		}
	}
	if r.Memory, err = Memory(m, s, targets[0]); err != nil {
		return r, err
	}
	r.Envelope = Envelope(m, s, targets[0])
	if g, ok := GridProfiles[o.SensitivityProfile]; ok && m.Fingerprint.Transformer {
		r.Grid = g.Name
		if r.Sensitivity, err = Sensitivity(m, s, targets[0], profiles, g); err != nil {
			return r, err
		}
		r.Ranks = RankKnobs(r.Sensitivity, profiles[len(profiles)-1].Name)
	} else if o.SensitivityProfile != "off" && o.SensitivityProfile != "" && !ok {
		return r, fmt.Errorf("sensitivity profile %q: want one of small_grid, medium_full_grid, large_full_grid or off", o.SensitivityProfile)
	}
	return r, nil
}

// Shares of each byte term in bytes_hbm.
type Shares struct {
	Weights, Activations, KV, Temporary float64
}

// ByteShares is the byte dominance test's input.
func ByteShares(c Cost) Shares {
	h := c.BytesHBM()
	if h == 0 {
		return Shares{}
	}
	return Shares{c.BytesWeights / h, c.BytesActivations / h, c.BytesKV / h, c.BytesTemporary / h}
}

// Dominant names the largest byte term.
func (s Shares) Dominant() string {
	names := []string{"weights", "activations", "kv", "temporary"}
	vals := []float64{s.Weights, s.Activations, s.KV, s.Temporary}
	best := 0
	for i := range vals {
		if vals[i] > vals[best] {
			best = i
		}
	}
	return names[best]
}

// Extremes returns the n fastest and n slowest points of a profile.
func Extremes(points []SensitivityPoint, profile string, n int) (fast, slow []SensitivityPoint) {
	var ps []SensitivityPoint
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
	slow = append([]SensitivityPoint(nil), ps[len(ps)-n:]...)
	return fast, slow
}

// RegimeCounts counts regimes (and below-floor points) of a profile's sensitivity points.
func RegimeCounts(points []SensitivityPoint, profile string) (counts map[string]int, below int) {
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
