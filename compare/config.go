package compare

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/model"
)

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
func ParamDeltas(a, b *model.Dump, ma, mb *analyzer.Model) (cats, patterns []CountDelta) {
	for _, c := range analyzer.Categories {
		if ma.Params[c] != 0 || mb.Params[c] != 0 {
			cats = append(cats, CountDelta{string(c), ma.Params[c], mb.Params[c]})
		}
	}
	pa, pb := map[string]int64{}, map[string]int64{}
	var order []string
	for _, r := range analyzer.Breakdown(a) {
		pa[r.Pattern] = r.TotalParams
		order = append(order, r.Pattern)
	}
	for _, r := range analyzer.Breakdown(b) {
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
