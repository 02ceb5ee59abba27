package ingest

import (
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/mrep-dev/mrep/model"
)

// The module tree is most of a large dump (200,000 modules, 500,000 tensors): validating it
// through the generic JSON Schema validator took 11 s and decoding it a second time into Go
// structs 2 s. Modules are therefore checked here against #/$defs/module of the schema,
// rule for rule, and converted from the already decoded JSON in the same walk; the rest of
// the document still goes through the schema validator. TestModuleRulesAgreeWithTheSchema
// checks both give the same verdict at the same place on every fixture and many mutations.

var identPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// isIdent is identPattern.MatchString without the regexp engine: it runs twice per tensor.
func isIdent(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

const maxSafeInt = 1<<53 - 1

type modWalker struct {
	path []any
}

func (w *modWalker) at(parts ...any) string {
	return pointer(append(append([]any{}, w.path...), parts...)...)
}

func schemaProblem(ptr, msg string) *Problem { return &Problem{ptr, "schema: " + msg} }

// obj checks v is an object with the required keys and no others.
func (w *modWalker) obj(v any, required []string, allowed map[string]bool) (map[string]any, *Problem) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, schemaProblem(w.at(), fmt.Sprintf("expected object, but got %s", jsonType(v)))
	}
	for _, r := range required {
		if _, ok := m[r]; !ok {
			return nil, schemaProblem(w.at(), fmt.Sprintf("missing properties: '%s'", r))
		}
	}
	for k := range m {
		if !allowed[k] {
			return nil, schemaProblem(w.at(), fmt.Sprintf("additionalProperties '%s' not allowed", k))
		}
	}
	return m, nil
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, ok := integral(x); ok {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

// integral says whether a number literal is an integer as JSON Schema counts it (32 and 32.0
// both are) and its value when it fits int64.
func integral(n json.Number) (int64, bool) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, true
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || !r.IsInt() {
		return 0, false
	}
	if r.Num().IsInt64() {
		return r.Num().Int64(), true
	}
	return 0, true // integral but beyond int64: the range check fails it
}

func (w *modWalker) str(m map[string]any, key string, minLen, maxLen int, pattern *regexp.Regexp) (string, *Problem) {
	v := m[key]
	s, ok := v.(string)
	if !ok {
		return "", schemaProblem(w.at(key), fmt.Sprintf("expected string, but got %s", jsonType(v)))
	}
	n := utf8.RuneCountInString(s)
	if n < minLen {
		return "", schemaProblem(w.at(key), fmt.Sprintf("length must be >= %d, but got %d", minLen, n))
	}
	if n > maxLen {
		return "", schemaProblem(w.at(key), fmt.Sprintf("length must be <= %d, but got %d", maxLen, n))
	}
	if pattern != nil && !(pattern == identPattern && isIdent(s) || pattern != identPattern && pattern.MatchString(s)) {
		return "", schemaProblem(w.at(key), fmt.Sprintf("does not match pattern '%s'", pattern.String()))
	}
	return s, nil
}

func (w *modWalker) count(v any, max int64, parts ...any) (int64, *Problem) {
	ptr := func() string { return w.at(parts...) }
	n, ok := v.(json.Number)
	if !ok {
		return 0, schemaProblem(ptr(), fmt.Sprintf("expected integer, but got %s", jsonType(v)))
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		// a fraction, an exponent or beyond int64
		r, ok := new(big.Rat).SetString(string(n))
		switch {
		case !ok || !r.IsInt():
			return 0, schemaProblem(ptr(), "expected integer, but got number")
		case r.Sign() < 0:
			return 0, schemaProblem(ptr(), fmt.Sprintf("must be >= 0 but found %s", n))
		case r.Cmp(new(big.Rat).SetInt64(max)) > 0:
			return 0, schemaProblem(ptr(), fmt.Sprintf("must be <= %d but found %s", max, n))
		}
		// 16384.0: JSON Schema calls it an integer; a dump writes integers as integers
		return 0, &Problem{ptr(), fmt.Sprintf("expected an integer, got the number %s", n)}
	}
	if i < 0 {
		return 0, schemaProblem(ptr(), fmt.Sprintf("must be >= 0 but found %s", n))
	}
	if i > max {
		return 0, schemaProblem(ptr(), fmt.Sprintf("must be <= %d but found %s", max, n))
	}
	return i, nil
}

func (w *modWalker) num(v any, parts ...any) (float64, *Problem) {
	ptr := func() string { return w.at(parts...) }
	n, ok := v.(json.Number)
	if !ok {
		return 0, schemaProblem(ptr(), fmt.Sprintf("expected number, but got %s", jsonType(v)))
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return 0, &Problem{ptr(), fmt.Sprintf("the number %s is out of range", n)}
	}
	return f, nil
}

func (w *modWalker) boolean(m map[string]any, key string) (bool, *Problem) {
	b, ok := m[key].(bool)
	if !ok {
		return false, schemaProblem(w.at(key), fmt.Sprintf("expected boolean, but got %s", jsonType(m[key])))
	}
	return b, nil
}

func (w *modWalker) array(v any, minItems, maxItems int, parts ...any) ([]any, *Problem) {
	ptr := func() string { return w.at(parts...) }
	a, ok := v.([]any)
	if !ok {
		return nil, schemaProblem(ptr(), fmt.Sprintf("expected array, but got %s", jsonType(v)))
	}
	if len(a) < minItems {
		return nil, schemaProblem(ptr(), fmt.Sprintf("minimum %d items required, but found %d items", minItems, len(a)))
	}
	if len(a) > maxItems {
		return nil, schemaProblem(ptr(), fmt.Sprintf("maximum %d items required, but found %d items", maxItems, len(a)))
	}
	return a, nil
}

var (
	moduleKeys = map[string]bool{"name": true, "class": true, "py_module": true, "parent": true, "params": true, "buffers": true}
	moduleReq  = []string{"name", "class", "py_module", "parent", "params", "buffers"}
	paramKeys  = map[string]bool{"name": true, "shape": true, "dtype": true, "numel": true, "device": true, "tied_to": true,
		"requires_grad": true, "lazy": true, "expert_axis": true, "stats": true}
	paramReq   = []string{"name", "shape", "dtype", "numel", "device", "requires_grad"}
	bufferKeys = map[string]bool{"name": true, "shape": true, "dtype": true, "numel": true, "device": true, "tied_to": true, "persistent": true}
	bufferReq  = []string{"name", "shape", "dtype", "numel", "device", "persistent"}
	statsKeys  = map[string]bool{"mean": true, "std": true, "min": true, "max": true, "nonfinite": true, "hist": true, "norm": true, "sketch": true}
	statsReq   = []string{"mean", "std", "min", "max", "nonfinite", "hist"}
	histKeys   = map[string]bool{"lo": true, "hi": true, "counts": true}
	histReq    = []string{"lo", "hi", "counts"}
)

// decodeModules validates every item of "modules" against the schema's module definition and
// converts it; the first problem wins, with the pointer the schema validator would give.
func decodeModules(items []any) ([]model.Module, *Problem) {
	out := make([]model.Module, len(items))
	w := &modWalker{}
	for i, it := range items {
		w.path = []any{"modules", i}
		if p := w.module(it, &out[i]); p != nil {
			return nil, p
		}
	}
	return out, nil
}

func (w *modWalker) module(v any, m *model.Module) *Problem {
	o, p := w.obj(v, moduleReq, moduleKeys)
	if p != nil {
		return p
	}
	if m.Name, p = w.str(o, "name", 0, 4096, nil); p != nil {
		return p
	}
	if m.Class, p = w.str(o, "class", 1, 1024, nil); p != nil {
		return p
	}
	if m.PyModule, p = w.str(o, "py_module", 0, 1024, nil); p != nil {
		return p
	}
	if o["parent"] != nil {
		s, p := w.str(o, "parent", 0, 4096, nil)
		if p != nil {
			return schemaProblem(w.at("parent"), fmt.Sprintf("expected string or null, but got %s", jsonType(o["parent"])))
		}
		m.Parent = &s
	}
	params, p := w.array(o["params"], 0, 100000, "params")
	if p != nil {
		return p
	}
	buffers, p := w.array(o["buffers"], 0, 100000, "buffers")
	if p != nil {
		return p
	}
	base := len(w.path)
	m.Params = make([]model.Param, len(params))
	for j, pv := range params {
		w.path = append(w.path[:base], "params", j)
		if p := w.param(pv, &m.Params[j]); p != nil {
			return p
		}
	}
	m.Buffers = make([]model.Buffer, len(buffers))
	for j, bv := range buffers {
		w.path = append(w.path[:base], "buffers", j)
		if p := w.buffer(bv, &m.Buffers[j]); p != nil {
			return p
		}
	}
	w.path = w.path[:base]
	return nil
}

func (w *modWalker) tensor(o map[string]any, t *model.Tensor) *Problem {
	var p *Problem
	if t.Name, p = w.str(o, "name", 1, 1024, nil); p != nil {
		return p
	}
	if sv := o["shape"]; sv != nil {
		dims, p := w.array(sv, 0, 16, "shape")
		if p != nil {
			if _, isArr := sv.([]any); !isArr {
				return schemaProblem(w.at("shape"), fmt.Sprintf("expected array or null, but got %s", jsonType(sv)))
			}
			return p
		}
		t.Shape = make([]int64, len(dims))
		for k, d := range dims {
			if t.Shape[k], p = w.count(d, maxSafeInt, "shape", k); p != nil {
				return p
			}
		}
	}
	if t.DType, p = w.str(o, "dtype", 0, 64, identPattern); p != nil {
		return p
	}
	if t.Numel, p = w.count(o["numel"], maxSafeInt, "numel"); p != nil {
		return p
	}
	if t.Device, p = w.str(o, "device", 0, 64, identPattern); p != nil {
		return p
	}
	if _, ok := o["tied_to"]; ok {
		if t.TiedTo, p = w.str(o, "tied_to", 1, 1024, nil); p != nil {
			return p
		}
	}
	return nil
}

func (w *modWalker) param(v any, pm *model.Param) *Problem {
	o, p := w.obj(v, paramReq, paramKeys)
	if p != nil {
		return p
	}
	if p := w.tensor(o, &pm.Tensor); p != nil {
		return p
	}
	if pm.RequiresGrad, p = w.boolean(o, "requires_grad"); p != nil {
		return p
	}
	if _, ok := o["lazy"]; ok {
		if pm.Lazy, p = w.boolean(o, "lazy"); p != nil {
			return p
		}
	}
	if ev, ok := o["expert_axis"]; ok {
		ax, p := w.count(ev, 15, "expert_axis")
		if p != nil {
			return p
		}
		a := int(ax)
		pm.ExpertAxis = &a
	}
	if sv, ok := o["stats"]; ok {
		base := len(w.path)
		w.path = append(w.path, "stats")
		s, p := w.stats(sv)
		w.path = w.path[:base]
		if p != nil {
			return p
		}
		pm.Stats = s
	}
	return nil
}

func (w *modWalker) buffer(v any, b *model.Buffer) *Problem {
	o, p := w.obj(v, bufferReq, bufferKeys)
	if p != nil {
		return p
	}
	if p := w.tensor(o, &b.Tensor); p != nil {
		return p
	}
	b.Persistent, p = w.boolean(o, "persistent")
	return p
}

func (w *modWalker) stats(v any) (*model.Stats, *Problem) {
	o, p := w.obj(v, statsReq, statsKeys)
	if p != nil {
		return nil, p
	}
	s := &model.Stats{}
	if s.Mean, p = w.num(o["mean"], "mean"); p != nil {
		return nil, p
	}
	if o["std"] != nil {
		sd, p := w.num(o["std"], "std")
		if p != nil {
			return nil, schemaProblem(w.at("std"), fmt.Sprintf("expected number or null, but got %s", jsonType(o["std"])))
		}
		if sd < 0 {
			return nil, schemaProblem(w.at("std"), fmt.Sprintf("must be >= 0 but found %s", o["std"]))
		}
		s.Std = &sd
	}
	if s.Min, p = w.num(o["min"], "min"); p != nil {
		return nil, p
	}
	if s.Max, p = w.num(o["max"], "max"); p != nil {
		return nil, p
	}
	if s.Nonfinite, p = w.count(o["nonfinite"], maxSafeInt, "nonfinite"); p != nil {
		return nil, p
	}
	if nv, ok := o["norm"]; ok {
		n, p := w.num(nv, "norm")
		if p != nil {
			return nil, p
		}
		if n < 0 {
			return nil, schemaProblem(w.at("norm"), fmt.Sprintf("must be >= 0 but found %s", nv))
		}
		s.Norm = &n
	}
	if sv, ok := o["sketch"]; ok {
		items, p := w.array(sv, 1, 4096, "sketch")
		if p != nil {
			return nil, p
		}
		s.Sketch = make([]float64, len(items))
		for k, it := range items {
			if s.Sketch[k], p = w.num(it, "sketch", k); p != nil {
				return nil, p
			}
		}
	}
	base := len(w.path)
	w.path = append(w.path, "hist")
	defer func() { w.path = w.path[:base] }()
	h, p := w.obj(o["hist"], histReq, histKeys)
	if p != nil {
		return nil, p
	}
	if s.Hist.Lo, p = w.num(h["lo"], "lo"); p != nil {
		return nil, p
	}
	if s.Hist.Hi, p = w.num(h["hi"], "hi"); p != nil {
		return nil, p
	}
	counts, p := w.array(h["counts"], 1, 1024, "counts")
	if p != nil {
		return nil, p
	}
	s.Hist.Counts = make([]int64, len(counts))
	for k, c := range counts {
		if s.Hist.Counts[k], p = w.count(c, maxSafeInt, "counts", k); p != nil {
			return nil, p
		}
	}
	return s, nil
}
