package ingest

import (
	"fmt"
	"math"

	"github.com/mrep-dev/mrep/model"
)

// MaxTotalParams is a sanity bound: no model mrep will meet holds more than 10^15 parameters,
// and a dump that claims so is corrupt.
const MaxTotalParams = 1e15

// Problem is a semantic defect at a JSON pointer.
type Problem struct {
	Pointer string
	Msg     string
}

// Check applies the rules the schema cannot state, in document order, and returns the first
// problem: unique module names, parents listed before children, one root, numel = product of
// shape, ties that resolve to an earlier tensor, statistics that are consistent, traced modules
// that exist. exporter/mrep_export/validate.py applies the same rules.
func Check(d *model.Dump) *Problem {
	index := make(map[string]int, len(d.Modules))
	for i, m := range d.Modules {
		if _, dup := index[m.Name]; dup {
			return &Problem{pointer("modules", i, "name"), fmt.Sprintf("duplicate module name %q", m.Name)}
		}
		index[m.Name] = i
	}
	tensors := make(map[string]struct{})
	var total float64
	for i, m := range d.Modules {
		switch {
		case m.Name == "":
			if m.Parent != nil {
				return &Problem{pointer("modules", i, "parent"), "the root module has no parent"}
			}
		case m.Parent == nil:
			return &Problem{pointer("modules", i, "parent"), fmt.Sprintf("module %q has no parent but is not the root", m.Name)}
		default:
			if j, ok := index[*m.Parent]; !ok || j >= i {
				return &Problem{pointer("modules", i, "parent"), fmt.Sprintf("parent %q is not a module listed before %q", *m.Parent, m.Name)}
			}
		}
		seen := make(map[string]struct{}, len(m.Params))
		for j, p := range m.Params {
			at := func(field ...any) string { return pointer(append([]any{"modules", i, "params", j}, field...)...) }
			if pr := checkTensor(&p.Tensor, p.Lazy, m.Name, seen, tensors, at); pr != nil {
				return pr
			}
			if p.TiedTo == "" {
				total += float64(p.Numel)
			}
			if p.ExpertAxis != nil && (p.Shape == nil || *p.ExpertAxis >= len(p.Shape)) {
				return &Problem{at("expert_axis"), fmt.Sprintf("expert_axis %d is not an axis of shape %v", *p.ExpertAxis, p.Shape)}
			}
			if p.Stats != nil {
				if pr := checkStats(p.Stats, p.Numel, func(f ...any) string { return at(append([]any{"stats"}, f...)...) }); pr != nil {
					return pr
				}
			}
		}
		seen = make(map[string]struct{}, len(m.Buffers))
		for j, b := range m.Buffers {
			at := func(field ...any) string {
				return pointer(append([]any{"modules", i, "buffers", j}, field...)...)
			}
			if pr := checkTensor(&b.Tensor, false, m.Name, seen, tensors, at); pr != nil {
				return pr
			}
		}
	}
	if total > MaxTotalParams {
		return &Problem{pointer("modules"), fmt.Sprintf("the dump claims %.3g parameters, beyond any real model", total)}
	}
	if d.Trace != nil {
		for k, tm := range d.Trace.Modules {
			if _, ok := index[tm.Name]; !ok {
				return &Problem{pointer("trace", "modules", k, "name"), fmt.Sprintf("traced module %q is not in the tree", tm.Name)}
			}
			var sum int64
			for _, n := range tm.Ops {
				sum += n
			}
			if sum != tm.Flops {
				return &Problem{pointer("trace", "modules", k, "flops"), "flops is not the sum of ops"}
			}
		}
	}
	return nil
}

func checkTensor(t *model.Tensor, lazy bool, module string, seen, all map[string]struct{}, at func(...any) string) *Problem {
	if _, dup := seen[t.Name]; dup {
		return &Problem{at("name"), fmt.Sprintf("duplicate tensor name %q in module %q", t.Name, module)}
	}
	seen[t.Name] = struct{}{}
	if t.Shape == nil {
		if !lazy {
			return &Problem{at("shape"), "shape is null but the tensor is not lazy"}
		}
	} else if n, ok := product(t.Shape); !ok || n != t.Numel {
		return &Problem{at("numel"), fmt.Sprintf("numel %d is not the product of shape %v", t.Numel, t.Shape)}
	}
	if t.TiedTo != "" {
		if _, ok := all[t.TiedTo]; !ok {
			return &Problem{at("tied_to"), fmt.Sprintf("tied_to %q names no tensor listed before it", t.TiedTo)}
		}
	}
	all[model.QualifiedName(module, t.Name)] = struct{}{}
	return nil
}

// product multiplies dimensions, reporting overflow past 2^53 (the schema's integer bound).
func product(shape []int64) (int64, bool) {
	n := int64(1)
	for _, d := range shape {
		if d != 0 && n > (1<<53)/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

func checkStats(s *model.Stats, numel int64, at func(...any) string) *Problem {
	for _, v := range []struct {
		at []any
		x  float64
	}{{[]any{"mean"}, s.Mean}, {[]any{"min"}, s.Min}, {[]any{"max"}, s.Max}, {[]any{"hist", "lo"}, s.Hist.Lo}, {[]any{"hist", "hi"}, s.Hist.Hi}} {
		if math.IsNaN(v.x) || math.IsInf(v.x, 0) {
			return &Problem{at(v.at...), "statistic is not finite"}
		}
	}
	if s.Min > s.Max {
		return &Problem{at("min"), fmt.Sprintf("min %g is above max %g", s.Min, s.Max)}
	}
	if s.Mean < s.Min || s.Mean > s.Max {
		return &Problem{at("mean"), fmt.Sprintf("mean %g is outside [min, max]", s.Mean)}
	}
	finite := numel - s.Nonfinite
	if finite < 0 {
		return &Problem{at("nonfinite"), fmt.Sprintf("nonfinite %d exceeds numel %d", s.Nonfinite, numel)}
	}
	var sum int64
	for _, c := range s.Hist.Counts {
		sum += c
	}
	if sum != finite {
		return &Problem{at("hist", "counts"), fmt.Sprintf("histogram counts sum to %d, expected %d", sum, finite)}
	}
	return nil
}
