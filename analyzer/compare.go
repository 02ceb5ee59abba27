package analyzer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/mrep-dev/mrep/internal/units"
	"math"
	"reflect"
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/model"
)

// ScenarioKey identifies what an analysis depends on besides the run: the scenario, every
// target's figures (a changed chips file is a new key) and the profiles. The analyzer version
// is keyed separately.
func ScenarioKey(s Scenario, targets []Target, profiles []ExecProfile) string {
	b, _ := json.Marshal(struct {
		S Scenario
		T []Target
		P []ExecProfile
	}{s, targets, profiles})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// PhaseMetrics are one (target, phase, profile)'s headline numbers.
type PhaseMetrics struct {
	Target     string  `json:"target"`
	Phase      Phase   `json:"phase"`
	Profile    string  `json:"profile"`
	TEst       float64 `json:"T_est"`
	TRoofline  float64 `json:"T_roofline"`
	AIHBM      float64 `json:"AI_hbm"`
	MFU        float64 `json:"MFU_est"`
	TokensPerS float64 `json:"tokens_per_s"`
	Regime     string  `json:"regime"`
	Dominant   string  `json:"dominant_bytes"`
	BelowFloor bool    `json:"below_floor"`
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
	TotalParams   int64              `json:"total_params"`
	Active        float64            `json:"active_params"`
	KVBytesPerTok float64            `json:"kv_bytes_per_token"`
	Params        map[Category]int64 `json:"params_by_category"`
	Phases        []PhaseMetrics     `json:"phases"`
}

// Metrics condenses an analysis.
func Metrics(a Analysis) RunMetrics {
	m := a.Model
	r := RunMetrics{TotalParams: m.TotalParams, Active: m.Active, Params: m.Params,
		KVBytesPerTok: float64(m.Fingerprint.CKV*m.Fingerprint.Layers) * a.Scenario.KVBytes}
	for _, res := range a.Results {
		t := res.Timing
		c := res.Step.Cost
		pm := PhaseMetrics{Target: res.Target, Phase: res.Step.Phase, Profile: res.Step.Profile,
			TEst: t.TEst, TRoofline: t.TRoofline, AIHBM: t.AIHBM, MFU: t.MFU, TokensPerS: t.TokensPerS, Regime: t.Regime,
			Dominant: ByteShares(c).Dominant(), BelowFloor: t.BelowFloor,
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
func (r RunMetrics) Find(target string, ph Phase, profile string) (PhaseMetrics, bool) {
	for _, p := range r.Phases {
		if p.Target == target && p.Phase == ph && p.Profile == profile {
			return p, true
		}
	}
	return PhaseMetrics{}, false
}

// ConfigChange is one config key that differs.
type ConfigChange struct {
	Key string `json:"key"`
	A   string `json:"a"`
	B   string `json:"b"`
}

// volatileKeys change between dumps of the same model without meaning anything.
var volatileKeys = map[string]bool{"transformers_version": true, "_name_or_path": true, "name_or_path": true}

// ConfigDiff lists changed, added and removed config keys (nested keys dotted), sorted.
func ConfigDiff(a, b map[string]any) []ConfigChange {
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", a, fa)
	flatten("", b, fb)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	var out []ConfigChange
	for k := range keys {
		if volatileKeys[k[strings.LastIndex(k, ".")+1:]] {
			continue
		}
		va, oka := fa[k]
		vb, okb := fb[k]
		if oka && okb && va == vb {
			continue
		}
		if !oka {
			va = "(absent)"
		}
		if !okb {
			vb = "(absent)"
		}
		out = append(out, ConfigChange{k, va, vb})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, vv := range x {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			flatten(key, vv, out)
		}
	default:
		b, _ := json.Marshal(x)
		out[prefix] = string(b)
	}
}

// CountDelta is a parameter count in A and B.
type CountDelta struct {
	Name string `json:"name"`
	A    int64  `json:"a"`
	B    int64  `json:"b"`
}

// ParamDeltas compares parameters by category and by module pattern (changed rows only for
// patterns).
func ParamDeltas(a, b *model.Dump, ma, mb *Model) (cats, patterns []CountDelta) {
	for _, c := range Categories {
		if ma.Params[c] != 0 || mb.Params[c] != 0 {
			cats = append(cats, CountDelta{string(c), ma.Params[c], mb.Params[c]})
		}
	}
	pa, pb := map[string]int64{}, map[string]int64{}
	var order []string
	for _, r := range Breakdown(a) {
		pa[r.Pattern] = r.TotalParams
		order = append(order, r.Pattern)
	}
	for _, r := range Breakdown(b) {
		if _, ok := pa[r.Pattern]; !ok {
			order = append(order, r.Pattern)
		}
		pb[r.Pattern] = r.TotalParams
	}
	for _, k := range order {
		if pa[k] != pb[k] {
			patterns = append(patterns, CountDelta{k, pa[k], pb[k]})
		}
	}
	return cats, patterns
}

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

// MetricNames lists what `mrep history --metric` accepts.
const MetricNames = "params, trainable_params, active_params, kv_bytes_per_token, step_time (measured by the training hook, beside the prediction), mfu_measured, T_est:<phase>[:<profile>], tokens_per_s:<phase>[:<profile>], AI_hbm:<phase>[:<profile>], MFU:<phase>[:<profile>], drift[:<pattern>], std:<pattern>, mean:<pattern>"

// ParseMetric validates a metric name; it returns the kind and its argument parts.
func ParseMetric(name string) (kind string, args []string, err error) {
	parts := strings.Split(name, ":")
	kind, args = parts[0], parts[1:]
	switch kind {
	case "params", "trainable_params", "active_params", "kv_bytes_per_token", "step_time", "mfu_measured":
		if len(args) == 0 {
			return kind, args, nil
		}
	case "T_est", "tokens_per_s", "AI_hbm", "MFU":
		if len(args) >= 1 && len(args) <= 2 {
			ph := Phase(args[0])
			if ph == Training || ph == Prefill || ph == Decode {
				return kind, args, nil
			}
		}
	case "drift":
		if len(args) <= 1 {
			return kind, args, nil
		}
	case "std", "mean":
		if len(args) == 1 {
			return kind, args, nil
		}
	}
	return "", nil, fmt.Errorf("metric %q: want one of %s", name, MetricNames)
}

// PhaseValue reads a phase metric (T_est in ms, MFU in %) from run metrics.
func PhaseValue(r RunMetrics, kind, target string, ph Phase, profile string) (float64, bool) {
	p, ok := r.Find(target, ph, profile)
	if !ok {
		return 0, false
	}
	switch kind {
	case "T_est":
		return p.TEst * 1e3, true
	case "tokens_per_s":
		return p.TokensPerS, true
	case "AI_hbm":
		return p.AIHBM, true
	case "MFU":
		return 100 * p.MFU, true // a percentage, as people read MFU
	}
	return 0, false
}

// TraceRow sets PyTorch's FlopCounterMode count of one module beside mrep's GEMM FLOPs.
type TraceRow struct {
	Module string  `json:"module"`
	Traced int64   `json:"flop_counter_mode"`
	Mrep   float64 `json:"mrep_F_tensorcore"`
	Ratio  float64 `json:"ratio"`
}

// TraceCheck costs a traced run's forward (prefill at the trace's B and S, every token's
// logits) and compares mrep's GEMM FLOPs per module with the trace, for modules at most depth
// dots deep. FlopCounterMode counts matmuls only, so the comparable figure is F_tensorcore;
// F_theory adds softmax and elementwise FLOPs on top.
func TraceCheck(d *model.Dump, depth int) ([]TraceRow, error) {
	if d.Trace == nil {
		return nil, nil
	}
	m := NewModel(d)
	s := DefaultScenario()
	s.Batch, s.Seq, s.AllLogits = d.Trace.Batch, d.Trace.Seq, true
	st, err := m.Analyze(Prefill, s, Naive)
	if err != nil {
		return nil, err
	}
	tree := ModuleTree(st.Modules)
	var out []TraceRow
	for _, tm := range d.Trace.Modules {
		if strings.Count(tm.Name, ".") > depth {
			continue
		}
		r := TraceRow{Module: tm.Name, Traced: tm.Flops, Mrep: tree[tm.Name].FTensorcore}
		if tm.Flops > 0 {
			r.Ratio = r.Mrep / float64(tm.Flops)
		}
		out = append(out, r)
	}
	return out, nil
}

// Why explains, for one phase, which terms moved T_est from a to b: the total change, the
// kernel family that carries most of it, and the causes beneath (bytes of weights and KV
// cache, FLOPs, the chip's peak and bandwidth). Empty when nothing moved.
func Why(a, b PhaseMetrics) string {
	if a.TEst <= 0 || b.TEst <= 0 {
		return ""
	}
	dt := b.TEst - a.TEst
	if math.Abs(dt) < 1e-3*a.TEst {
		return fmt.Sprintf("`%s` (%s): unchanged at %s.", a.Phase, a.Profile, fmtSec(a.TEst))
	}
	where := a.Target
	if a.Target != b.Target {
		where = a.Target + " → " + b.Target
	}
	var s strings.Builder
	fmt.Fprintf(&s, "`%s` on %s: %s → %s (%+.0f%%)", a.Phase, where, fmtSec(a.TEst), fmtSec(b.TEst), 100*dt/a.TEst)
	// the term that moved most, in the direction of the change
	names := make([]string, 0, len(a.Terms))
	for k := range a.Terms {
		names = append(names, k)
	}
	sort.Strings(names)
	top, topD := "", 0.0
	for _, k := range names {
		if d := b.Terms[k] - a.Terms[k]; d*dt > 0 && math.Abs(d) > math.Abs(topD) {
			top, topD = k, d
		}
	}
	if top != "" {
		fmt.Fprintf(&s, ", mostly %s (%s of the %s)", top, fmtSignedSec(topD), fmtSignedSec(dt))
	}
	var causes []string
	ratio := func(what string, x, y float64, unit func(float64) string) {
		if x > 0 && y > 0 && math.Abs(y/x-1) >= 0.02 {
			causes = append(causes, fmt.Sprintf("%s %s → %s (%+.0f%%)", what, unit(x), unit(y), 100*(y/x-1)))
		}
	}
	bytesU := func(v float64) string { return units.SI(v, "B") }
	ratio("weights streamed", a.BytesWeights, b.BytesWeights, bytesU)
	ratio("KV cache read", a.BytesKV, b.BytesKV, bytesU)
	ratio("activations", a.BytesAct, b.BytesAct, bytesU)
	ratio("FLOPs", a.FTheory, b.FTheory, func(v float64) string { return units.SI(v, "FLOP") })
	ratio("peak", a.Peak, b.Peak, func(v float64) string { return units.SI(v, "FLOP/s") })
	ratio("HBM bandwidth", a.BWHBM, b.BWHBM, func(v float64) string { return units.SI(v, "B/s") })
	if len(causes) > 0 {
		fmt.Fprintf(&s, ": %s", strings.Join(causes, "; "))
	}
	if a.Regime != b.Regime {
		fmt.Fprintf(&s, "; the regime changes from `%s` to `%s`", a.Regime, b.Regime)
	}
	return s.String() + "."
}

func fmtSec(v float64) string { return fmt.Sprintf("%.3g ms", v*1e3) }

func fmtSignedSec(v float64) string { return fmt.Sprintf("%+.3g ms", v*1e3) }
