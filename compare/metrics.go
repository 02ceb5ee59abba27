package compare

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/store"
)

// Scenario is what a run is analysed under: the analyzer's inputs, and the config overrides
// (`--set`) that change what the analyzer reads.
type Scenario struct {
	Scenario analyzer.Scenario
	Targets  []analyzer.Target
	Profiles []analyzer.ExecProfile
	// Sets is the overrides as one line ("" for none): part of the cache key.
	Sets string
	// Apply writes the overrides into a dump loaded from the database; nil when there are none.
	Apply func(*model.Dump) error
}

// cacheKey is the cache key of an analysis: the scenario, and the overrides.
func (s Scenario) cacheKey() string {
	key := ScenarioKey(s.Scenario, s.Targets, s.Profiles)
	if s.Sets != "" {
		key += " set " + s.Sets
	}
	return key
}

// MetricsFor returns a run's analysis metrics under s, from the cache when an entry for (run,
// scenario, analyzer version) exists, else computed and cached (unless the database is
// read-only). d is the run's dump with the overrides applied; nil loads it.
func MetricsFor(ctx context.Context, db *store.DB, id int64, s Scenario, d *model.Dump) (RunMetrics, error) {
	key := s.cacheKey()
	if b, ok, err := db.CachedResult(ctx, id, key, analyzer.Version); err != nil {
		return RunMetrics{}, err
	} else if ok {
		var m RunMetrics
		// entries cached before the phases carried their terms are recomputed (diff's "why")
		if err := json.Unmarshal(b, &m); err == nil && (len(m.Phases) == 0 || m.Phases[0].Terms != nil) {
			return m, nil
		}
		// an unreadable entry is recomputed and replaced below
	}
	if d == nil {
		var err error
		if d, err = db.LoadDump(ctx, id); err != nil {
			return RunMetrics{}, err
		}
		if s.Apply != nil {
			if err := s.Apply(d); err != nil {
				return RunMetrics{}, err
			}
		}
	}
	a, err := analyzer.Run(analyzer.NewModel(d), s.Scenario, s.Targets, s.Profiles, analyzer.Phases)
	if err != nil {
		return RunMetrics{}, err
	}
	m := Metrics(a)
	b, err := json.Marshal(m)
	if err != nil {
		return m, err
	}
	if err := db.PutResult(ctx, id, key, analyzer.Version, b); err != nil && !errors.Is(err, store.ErrReadOnly) {
		return m, err
	}
	return m, nil
}

// ScenarioKey identifies what an analysis depends on besides the run: the scenario, every
// target's figures (a changed chips file is a new key) and the profiles. The analyzer version
// is keyed separately.
func ScenarioKey(s analyzer.Scenario, targets []analyzer.Target, profiles []analyzer.ExecProfile) string {
	b, _ := json.Marshal(struct {
		S analyzer.Scenario
		T []analyzer.Target
		P []analyzer.ExecProfile
	}{s, targets, profiles})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// PhaseMetrics are one (target, phase, profile)'s headline numbers.
type PhaseMetrics struct {
	Target     string         `json:"target"`
	Phase      analyzer.Phase `json:"phase"`
	Profile    string         `json:"profile"`
	TEst       float64        `json:"T_est"`
	TRoofline  float64        `json:"T_roofline"`
	AIHBM      float64        `json:"AI_hbm"`
	MFU        float64        `json:"MFU_est"`
	TokensPerS float64        `json:"tokens_per_s"`
	Regime     string         `json:"regime"`
	Dominant   string         `json:"dominant_bytes"`
	BelowFloor bool           `json:"below_floor"`
	// What the time is made of, for the diff's "why": T_est by kernel family, the step's
	// bytes and FLOPs, and the target's peak and bandwidth.
	Terms        map[string]float64 `json:"terms_s,omitempty"`
	BytesWeights float64            `json:"bytes_weights"`
	BytesKV      float64            `json:"bytes_kv"`
	BytesAct     float64            `json:"bytes_activations"`
	FTheory      float64            `json:"F_theory"`
	Peak         float64            `json:"P_peak"`
	BWHBM        float64            `json:"BW_hbm"`
}

// RunMetrics is what diff and history compare, and what the cache keeps per run.
type RunMetrics struct {
	TotalParams   int64                       `json:"total_params"`
	Active        float64                     `json:"active_params"`
	KVBytesPerTok float64                     `json:"kv_bytes_per_token"`
	Params        map[analyzer.Category]int64 `json:"params_by_category"`
	Phases        []PhaseMetrics              `json:"phases"`
}

// Metrics condenses an analysis.
func Metrics(a analyzer.Analysis) RunMetrics {
	m := a.Model
	r := RunMetrics{TotalParams: m.TotalParams, Active: m.Active, Params: m.Params,
		KVBytesPerTok: float64(m.Fingerprint.CKV*m.Fingerprint.Layers) * a.Scenario.KVBytes}
	for _, res := range a.Results {
		t := res.Timing
		c := res.Step.Cost
		pm := PhaseMetrics{Target: res.Target, Phase: res.Step.Phase, Profile: res.Step.Profile,
			TEst: t.TEst, TRoofline: t.TRoofline, AIHBM: t.AIHBM, MFU: t.MFU, TokensPerS: t.TokensPerS, Regime: t.Regime,
			Dominant: analyzer.ByteShares(c).Dominant(), BelowFloor: t.BelowFloor,
			Terms: map[string]float64{"GEMMs": t.Breakdown.TGEMM, "attention": t.Breakdown.TAttention,
				"memory-bound kernels": t.Breakdown.TMemory, "exposed communication": t.Breakdown.TComm,
				"launch latency and overhead": t.Breakdown.TLatency},
			BytesWeights: c.BytesWeights, BytesKV: c.BytesKV, BytesAct: c.BytesActivations, FTheory: c.FTheory}
		for _, tg := range a.Targets {
			if tg.Label() == res.Target {
				pm.Peak, pm.BWHBM = tg.Peak, tg.BWHBM
			}
		}
		r.Phases = append(r.Phases, pm)
	}
	return r
}

// Find returns one phase's metrics.
func (r RunMetrics) Find(target string, ph analyzer.Phase, profile string) (PhaseMetrics, bool) {
	for _, p := range r.Phases {
		if p.Target == target && p.Phase == ph && p.Profile == profile {
			return p, true
		}
	}
	return PhaseMetrics{}, false
}
