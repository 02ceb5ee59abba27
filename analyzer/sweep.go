package analyzer

import (
	"fmt"
	"math"
)

// SweepPoint is one point of a one-knob sweep under both profiles.
type SweepPoint struct {
	X       int64             `json:"x"`
	Results map[string]Result `json:"results"` // by profile name
}

// SweepDecodeBatch varies B in decode with L fixed.
func SweepDecodeBatch(m *Model, s Scenario, t Target, profiles []ExecProfile, batches []int64) ([]SweepPoint, error) {
	return sweep(m, Decode, s, t, profiles, batches, func(s *Scenario, x int64) { s.Batch = x })
}

// SweepPrefillSeq varies S in prefill with B fixed.
func SweepPrefillSeq(m *Model, s Scenario, t Target, profiles []ExecProfile, seqs []int64) ([]SweepPoint, error) {
	return sweep(m, Prefill, s, t, profiles, seqs, func(s *Scenario, x int64) { s.Seq = x })
}

func sweep(m *Model, ph Phase, s Scenario, t Target, profiles []ExecProfile, xs []int64, set func(*Scenario, int64)) ([]SweepPoint, error) {
	var out []SweepPoint
	for _, x := range xs {
		sc := s
		set(&sc, x)
		pt := SweepPoint{X: x, Results: map[string]Result{}}
		for _, p := range profiles {
			st, err := m.AnalyzeTotals(ph, sc, p)
			if err != nil {
				return nil, fmt.Errorf("sweep %s at %d: %w", ph, x, err)
			}
			pt.Results[p.Name] = Evaluate(st, t)
		}
		out = append(out, pt)
	}
	return out, nil
}

// BCrit is the batch at which decode AI_hbm first reaches OI_knee, interpolated linearly in
// log-log space between the sweep points around the crossing; ok is false when no sampled
// batch reaches it.
func BCrit(points []SweepPoint, profile string, knee float64) (float64, bool) {
	for i, pt := range points {
		ai := pt.Results[profile].Timing.AIHBM
		if ai < knee {
			continue
		}
		if i == 0 {
			return float64(pt.X), true
		}
		prev := points[i-1]
		a0, a1 := math.Log(prev.Results[profile].Timing.AIHBM), math.Log(ai)
		x0, x1 := math.Log(float64(prev.X)), math.Log(float64(pt.X))
		if a1 == a0 {
			return float64(pt.X), true
		}
		return math.Exp(x0 + (math.Log(knee)-a0)*(x1-x0)/(a1-a0)), true
	}
	return 0, false
}

// ExplorationRow answers: with DP = EP and TP = 1, can decode at KV length L become compute
// bound, and at what per-GPU batch?
type ExplorationRow struct {
	EP       int64    `json:"ep"`
	L        int64    `json:"kv_len"`
	OIInfHBM float64  `json:"OI_inf_hbm"` // AI_hbm as B -> infinity: weights amortized, KV reads remain
	OINet    *float64 `json:"OI_net"`     // FLOPs per network byte as B -> infinity; nil: no network traffic
	MinB     int64    `json:"min_B_g"`    // 0: none up to the search bound
	Limiter  string   `json:"limiter"`
}

// ExploreDecode searches the smallest power-of-two per-GPU batch with T_comp >= alpha *
// max(T_hbm, T_net), for each EP and L.
func ExploreDecode(m *Model, s Scenario, t Target, p ExecProfile, eps, lens []int64, alpha float64, maxB int64) ([]ExplorationRow, error) {
	var out []ExplorationRow
	for _, ep := range eps {
		for _, l := range lens {
			sc := s
			sc.EP, sc.TP, sc.KVLen = ep, 1, l
			row := ExplorationRow{EP: ep, L: l}
			// marginal intensities between two huge batches: the asymptote of the ratio
			big := func(b int64) (Step, error) {
				sc2 := sc
				sc2.Batch = b
				return m.AnalyzeTotals(Decode, sc2, p)
			}
			s1, err := big(1 << 20)
			if err != nil {
				return nil, err
			}
			s2, err := big(1 << 21)
			if err != nil {
				return nil, err
			}
			df := s2.Cost.FTheory - s1.Cost.FTheory
			row.OIInfHBM = df / (s2.Cost.BytesHBM() - s1.Cost.BytesHBM())
			if dn := s2.Cost.BytesNet - s1.Cost.BytesNet; dn > 0 {
				v := df / dn
				row.OINet = &v
			}
			var last Timing
			for b := int64(1); b <= maxB; b *= 2 {
				sc2 := sc
				sc2.Batch = b
				st, err := m.AnalyzeTotals(Decode, sc2, p)
				if err != nil {
					return nil, err
				}
				tm := Evaluate(st, t).Timing
				last = tm
				if tm.TComp >= alpha*math.Max(tm.THBM, tm.TNet) {
					row.MinB = b
					break
				}
			}
			switch {
			case row.MinB > 0 && last.TNet > last.THBM:
				row.Limiter = "NET"
			case row.MinB > 0:
				row.Limiter = "HBM"
			case row.OIInfHBM < t.Knee:
				row.Limiter = "HBM (KV)"
			case row.OINet != nil && *row.OINet < t.OINet:
				row.Limiter = "NET"
			default:
				row.Limiter = "HBM/NET"
			}
			out = append(out, row)
		}
	}
	return out, nil
}

// EnvelopeRow is the communication envelope of one phase.
type EnvelopeRow struct {
	Phase      Phase   `json:"phase"`
	IntraBytes float64 `json:"intra_device_dispatch"` // token copies moved to experts and back, on or off chip
	InterBytes float64 `json:"inter_device_dispatch"`
	Time       float64 `json:"interconnect_time"`
}

// Envelope estimates routed-MoE dispatch and combine traffic per phase.
func Envelope(m *Model, s Scenario, t Target) []EnvelopeRow {
	var out []EnvelopeRow
	if m.Fingerprint.MoE == nil {
		return out
	}
	for _, ph := range Phases {
		sh := shapeOf(ph, s)
		per := m.moeLayers * 2 * sh.tokens * float64(m.Fingerprint.MoE.TopK) * float64(m.Fingerprint.Hidden) * s.ActBytes
		if ph == Training {
			per *= 2
		}
		inter := per * float64(s.EP-1) / float64(s.EP)
		r := EnvelopeRow{Phase: ph, IntraBytes: per, InterBytes: inter}
		if t.BWNet > 0 {
			r.Time = inter / t.BWNet
		}
		out = append(out, r)
	}
	return out
}
