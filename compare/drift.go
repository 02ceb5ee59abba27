package compare

import (
	"math"
	"reflect"
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/model"
)

// Drift is one tensor's weight-statistic change between two runs.
type Drift struct {
	Name  string  `json:"name"`
	Kind  string  `json:"kind"` // attention, mlp, embedding, norm, bias, other (DriftKind)
	MeanA float64 `json:"mean_a"`
	MeanB float64 `json:"mean_b"`
	StdA  float64 `json:"std_a"`
	StdB  float64 `json:"std_b"`
	DMean float64 `json:"d_mean"`
	DStd  float64 `json:"d_std"`
	// RelChange is ||B - A|| / ||A||: from the two checkpoints' sketches (Method "sketch", exact
	// for a tensor that is its own sketch, "exact"), or for dumps without sketches the shift of
	// mean and std in units of A's std ("stats"). 0 with ZeroBaseline: ||A|| = 0 (a bias or
	// gate initialised to zero), where a relative change is not defined; AbsChange holds it.
	RelChange    float64 `json:"rel_change"`
	AbsChange    float64 `json:"abs_change"` // ||B - A|| (sketch methods), else |shift| in value units
	NormA        float64 `json:"norm_a"`     // ||A||, 0 when unknown (stats method)
	Method       string  `json:"method"`
	ZeroBaseline bool    `json:"zero_baseline,omitempty"`
}

// DriftKind classifies a parameter by its owning module's class when it says (LayerNorm,
// RMSNorm, BatchNorm, Embedding) and else by its qualified name: norms and biases are reported apart
// from the weight matrices (a norm's gain moves by tens of percent while matrices move by
// fractions of one, and would otherwise top every ranking).
func DriftKind(name, class string) string {
	switch c := strings.ToLower(class); {
	case strings.Contains(c, "norm"):
		return "norm"
	case strings.Contains(c, "embedding"):
		return "embedding"
	}
	parts := strings.Split(strings.ToLower(name), ".")
	mods := parts[:len(parts)-1]
	// long markers match inside a component (post_attention_layernorm), short ones only at its
	// start followed by nothing, "_" or a digit (fc, fc1, c_fc; but not "fcos"; wo, not "two")
	has := func(long []string, short ...string) bool {
		for _, p := range mods {
			for _, s := range long {
				if strings.Contains(p, s) {
					return true
				}
			}
			for _, s := range short {
				if rest, ok := strings.CutPrefix(p, s); ok && (rest == "" || rest[0] == '_' || rest[0] >= '0' && rest[0] <= '9') {
					return true
				}
			}
		}
		return false
	}
	switch {
	case has([]string{"norm"}, "ln", "ln_f", "ln_1", "ln_2", "bn"):
		return "norm"
	case parts[len(parts)-1] == "bias":
		return "bias"
	case has([]string{"embed", "lm_head"}, "wte", "wpe", "output", "head"):
		if !has([]string{"attn", "attention"}) {
			return "embedding"
		}
		return "attention"
	case has([]string{"attn", "attention", "q_proj", "k_proj", "v_proj", "o_proj"}, "qkv", "wq", "wk", "wv", "wo"):
		return "attention"
	case has([]string{"mlp", "ffn", "feed_forward", "experts", "gate_proj", "up_proj", "down_proj"}, "fc", "c_fc", "w1", "w2", "w3"):
		return "mlp"
	}
	return "other"
}

// sketchDistance is ||sb - sa||: a CountSketch is linear, so this estimates ||B - A|| (exactly,
// when the tensor is its own sketch).
func sketchDistance(sa, sb []float64) float64 {
	var ss float64
	for i := range sa {
		d := sb[i] - sa[i]
		ss += d * d
	}
	return math.Sqrt(ss)
}

// WeightDrift compares tensors present in both runs with the same size, largest relative
// change first; tensors with a zero baseline (absolute change only) after them.
func WeightDrift(a, b []model.TensorStat) []Drift {
	byName := map[string]model.TensorStat{}
	for _, s := range a {
		byName[s.Name] = s
	}
	var out []Drift
	for _, sb := range b {
		sa, ok := byName[sb.Name]
		if !ok || sa.Numel != sb.Numel {
			continue
		}
		d := Drift{Name: sb.Name, Kind: DriftKind(sb.Name, sb.Class), MeanA: sa.Mean, MeanB: sb.Mean, StdA: sa.Std, StdB: sb.Std,
			DMean: sb.Mean - sa.Mean, DStd: sb.Std - sa.Std}
		if len(sa.Sketch) > 0 && len(sa.Sketch) == len(sb.Sketch) && sa.Norm != nil {
			d.Method = "sketch"
			if int64(len(sa.Sketch)) == sa.Numel {
				d.Method = "exact"
			}
			d.AbsChange = sketchDistance(sa.Sketch, sb.Sketch)
			d.NormA = *sa.Norm
			if d.NormA > 0 {
				d.RelChange = d.AbsChange / d.NormA
			} else {
				d.ZeroBaseline = true
			}
		} else {
			d.Method = "stats"
			d.AbsChange = math.Hypot(d.DMean, d.DStd)
			switch {
			case sa.Std > 0:
				d.RelChange = d.AbsChange / sa.Std
			case sa.Mean != 0:
				d.RelChange = d.AbsChange / math.Abs(sa.Mean) // a constant tensor (a norm's ones)
			default:
				d.ZeroBaseline = true // all zeros: no scale to divide by
			}
		}
		out = append(out, d)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].ZeroBaseline != out[j].ZeroBaseline {
			return !out[i].ZeroBaseline
		}
		if out[i].ZeroBaseline {
			return out[i].AbsChange > out[j].AbsChange
		}
		return out[i].RelChange > out[j].RelChange
	})
	return out
}

// DriftSummary is the drift of a group of tensors (a kind, or a name pattern).
type DriftSummary struct {
	Group   string  `json:"group"`
	Tensors int     `json:"tensors"`
	Rel     float64 `json:"rel_change"` // see GroupDrift
	Max     float64 `json:"max_rel_change"`
	MaxName string  `json:"max_tensor"`
}

// GroupDrift is the relative change of a group taken as one vector: sqrt(sum ||B - A||^2) /
// sqrt(sum ||A||^2) when every tensor has sketches (so a few small tensors cannot dominate
// it), else the mean of the tensors' relative changes. Zero-baseline tensors count in the
// numerator of the first form only.
func GroupDrift(ds []Drift, keep func(Drift) bool) (rel float64, n int) {
	var num, den, sum float64
	sketched := true
	for _, d := range ds {
		if !keep(d) {
			continue
		}
		n++
		if d.Method == "stats" {
			sketched = false
		}
		num += d.AbsChange * d.AbsChange
		den += d.NormA * d.NormA
		if !d.ZeroBaseline {
			sum += d.RelChange
		}
	}
	if n == 0 {
		return 0, 0
	}
	if sketched && den > 0 {
		return math.Sqrt(num) / math.Sqrt(den), n
	}
	return sum / float64(n), n
}

// DriftByKind summarises drift per kind, weights first, norms and biases last.
func DriftByKind(ds []Drift) []DriftSummary {
	var out []DriftSummary
	for _, k := range []string{"attention", "mlp", "embedding", "other", "norm", "bias"} {
		rel, n := GroupDrift(ds, func(d Drift) bool { return d.Kind == k })
		if n == 0 {
			continue
		}
		s := DriftSummary{Group: k, Tensors: n, Rel: rel}
		for _, d := range ds {
			if d.Kind == k && !d.ZeroBaseline && d.RelChange > s.Max {
				s.Max, s.MaxName = d.RelChange, d.Name
			}
		}
		out = append(out, s)
	}
	return out
}

// SameArchitecture reports whether two dumps have the same module tree and tensor shapes:
// checkpoints of one run, where weight drift means something.
func SameArchitecture(a, b *model.Dump) bool {
	if len(a.Modules) != len(b.Modules) {
		return false
	}
	for i := range a.Modules {
		ma, mb := a.Modules[i], b.Modules[i]
		if ma.Name != mb.Name || len(ma.Params) != len(mb.Params) {
			return false
		}
		for j := range ma.Params {
			if ma.Params[j].Name != mb.Params[j].Name || !reflect.DeepEqual(ma.Params[j].Shape, mb.Params[j].Shape) {
				return false
			}
		}
	}
	return true
}

// PatternDrift is the drift of the tensors matching pattern as one vector (GroupDrift).
func PatternDrift(ds []Drift, pattern string) (float64, int) {
	return GroupDrift(ds, func(d Drift) bool { return MatchPattern(pattern, d.Name) })
}

// MatchPattern matches a dotted name against a pattern where * matches one component and a
// trailing component may be omitted ("layers.*.mlp" matches "model.layers.3.mlp.up_proj.weight"
// as a substring of components).
func MatchPattern(pattern, name string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	p := strings.Split(pattern, ".")
	n := strings.Split(name, ".")
	for start := 0; start+len(p) <= len(n); start++ {
		ok := true
		for i := range p {
			if p[i] != "*" && p[i] != n[start+i] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
