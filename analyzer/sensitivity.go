package analyzer

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Knob values of one sensitivity point.
type Knobs struct {
	Exec        string  `json:"exec"`
	KVBytes     float64 `json:"kv_dtype_bytes"`
	TopK        int64   `json:"top_k"` // 0 for dense models
	KVRankScale float64 `json:"kv_rank_scale"`
	HiddenScale float64 `json:"hidden_scale"`
	L           int64   `json:"L"`
}

// GridProfile is a named full-factorial grid over the knobs.
type GridProfile struct {
	Name        string    `json:"name"`
	KVBytes     []float64 `json:"kv_dtype_bytes"`
	TopK        []int64   `json:"top_k"` // used only for MoE models
	KVRankScale []float64 `json:"kv_rank_scale"`
	HiddenScale []float64 `json:"hidden_scale"`
	L           []int64   `json:"L"`
}

// GridProfiles are the named grids; medium_full_grid is the seed's 432-point grid for a MoE
// model with both exec profiles (2 x 2 x 3 x 3 x 3 x 4).
var GridProfiles = map[string]GridProfile{
	"small_grid": {Name: "small_grid", KVBytes: []float64{1, 2}, TopK: []int64{2, 8}, KVRankScale: []float64{1},
		HiddenScale: []float64{1}, L: []int64{2048, 8192}},
	"medium_full_grid": {Name: "medium_full_grid", KVBytes: []float64{1, 2}, TopK: []int64{2, 4, 8},
		KVRankScale: []float64{0.5, 1, 1.5}, HiddenScale: []float64{0.75, 1, 1.25}, L: []int64{2048, 4096, 8192, 16384}},
	"large_full_grid": {Name: "large_full_grid", KVBytes: []float64{0.5, 1, 2}, TopK: []int64{1, 2, 4, 8, 16},
		KVRankScale: []float64{0.25, 0.5, 1, 1.5, 2}, HiddenScale: []float64{0.5, 0.75, 1, 1.25, 1.5},
		L: []int64{1024, 2048, 4096, 8192, 16384, 32768, 131072}},
}

// withKnobs is the model with routing top-k, KV width and hidden size changed. hidden_scale
// multiplies d_model: every matrix reading or writing the residual stream scales linearly,
// and so do its activations; kv_rank_scale multiplies C_kv (the MLA latent rank, or the KV
// heads' width) and the weights that produce it.
func (m *Model) withKnobs(topK int64, kvScale, hidden float64) *Model {
	c := *m
	fp := m.Fingerprint
	if fp.MoE != nil && topK > 0 {
		moe := *fp.MoE
		moe.TopK = topK
		fp.MoE = &moe
	}
	fp.Hidden = int64(math.Round(float64(fp.Hidden) * hidden))
	fp.CKV = int64(math.Round(float64(fp.CKV) * kvScale))
	if fp.MLA != nil {
		mla := *fp.MLA
		mla.KVLoraRank = int64(math.Round(float64(mla.KVLoraRank) * kvScale))
		fp.MLA = &mla
	} else if fp.Transformer {
		fp.HeadDim = int64(math.Round(float64(fp.HeadDim) * kvScale))
	}
	c.Fingerprint = fp
	c.Ops = make([]Op, len(m.Ops))
	for i, op := range m.Ops {
		o := op
		switch o.Kind {
		case OpGEMM, OpExperts:
			o.Numel = int64(float64(o.Numel) * hidden)
			o.In = int64(float64(o.In) * hidden)
			o.Out = int64(float64(o.Out) * hidden)
		case OpEmbedding:
			o.Width = int64(float64(o.Width) * hidden)
			o.Numel = o.Rows * o.Width
		case OpElementwise:
			o.ElemsPerToken = int64(float64(o.ElemsPerToken) * hidden)
			o.FlopsPerToken = int64(float64(o.FlopsPerToken) * hidden)
			o.WeightElems = int64(float64(o.WeightElems) * hidden)
		}
		c.Ops[i] = o
	}
	return &c
}

// SensitivityPoint is one decode point of the grid.
type SensitivityPoint struct {
	Knobs  Knobs  `json:"knobs"`
	Timing Timing `json:"timing"`
}

// Sensitivity evaluates decode over the full factorial grid for every profile.
func Sensitivity(m *Model, s Scenario, t Target, profiles []ExecProfile, g GridProfile) ([]SensitivityPoint, error) {
	topKs := g.TopK
	if m.Fingerprint.MoE == nil {
		topKs = []int64{0}
	}
	var out []SensitivityPoint
	for _, p := range profiles {
		for _, kvb := range g.KVBytes {
			for _, k := range topKs {
				for _, kr := range g.KVRankScale {
					for _, hs := range g.HiddenScale {
						mm := m.withKnobs(k, kr, hs)
						for _, l := range g.L {
							sc := s
							sc.KVBytes, sc.KVLen = kvb, l
							st, err := mm.AnalyzeTotals(Decode, sc, p)
							if err != nil {
								return nil, fmt.Errorf("sensitivity: %w", err)
							}
							out = append(out, SensitivityPoint{
								Knobs:  Knobs{Exec: p.Name, KVBytes: kvb, TopK: k, KVRankScale: kr, HiddenScale: hs, L: l},
								Timing: Evaluate(st, t).Timing,
							})
						}
					}
				}
			}
		}
	}
	return out, nil
}

// KnobRank is one knob's leverage: the spread of median T_est across its values.
type KnobRank struct {
	Knob    string             `json:"knob"`
	Effect  float64            `json:"effect"` // (max median - min median) / min median
	Medians map[string]float64 `json:"medians"`
	Values  []string           `json:"values"` // in ascending order
}

// RankKnobs ranks knobs by effect size on T_est over the points of one profile.
func RankKnobs(points []SensitivityPoint, profile string) []KnobRank {
	type getter struct {
		name string
		val  func(Knobs) float64
	}
	knobs := []getter{
		{"top-k experts", func(k Knobs) float64 { return float64(k.TopK) }},
		{"hidden scale", func(k Knobs) float64 { return k.HiddenScale }},
		{"decode KV length (L)", func(k Knobs) float64 { return float64(k.L) }},
		{"KV rank scale", func(k Knobs) float64 { return k.KVRankScale }},
		{"KV dtype bytes", func(k Knobs) float64 { return k.KVBytes }},
	}
	var out []KnobRank
	for _, g := range knobs {
		groups := map[float64][]float64{}
		for _, p := range points {
			if p.Knobs.Exec != profile {
				continue
			}
			v := g.val(p.Knobs)
			groups[v] = append(groups[v], p.Timing.TEst)
		}
		if len(groups) < 2 {
			continue
		}
		r := KnobRank{Knob: g.name, Medians: map[string]float64{}}
		var vals []float64
		for v := range groups {
			vals = append(vals, v)
		}
		sort.Float64s(vals)
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range vals {
			med := median(groups[v])
			key := strconv.FormatFloat(v, 'g', -1, 64)
			r.Medians[key] = med
			r.Values = append(r.Values, key)
			lo, hi = math.Min(lo, med), math.Max(hi, med)
		}
		r.Effect = (hi - lo) / lo
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Effect > out[j].Effect })
	return out
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
