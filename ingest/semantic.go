package ingest

import (
	"fmt"
	"math"
	"strings"
	"time"

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
	if t, err := time.Parse(time.RFC3339Nano, d.Run.CreatedAt); err != nil || t.Year() < 1970 {
		return &Problem{pointer("run", "created_at"), fmt.Sprintf("created_at %q is not a real UTC time (%v)", d.Run.CreatedAt, errOrEpoch(err))}
	}
	index := make(map[string]int, len(d.Modules))
	for i, m := range d.Modules {
		if _, dup := index[m.Name]; dup {
			return &Problem{pointer("modules", i, "name"), fmt.Sprintf("duplicate module name %q", m.Name)}
		}
		index[m.Name] = i
	}
	// Only tensors something is tied to need their qualified name remembered: building and
	// storing 500,000 names for a handful of ties was most of Check's time. A tensor is
	// remembered when its own name is a dotted suffix of some tied_to.
	targets := map[string]bool{}
	for _, m := range d.Modules {
		for _, p := range m.Params {
			if p.TiedTo != "" {
				addSuffixes(targets, p.TiedTo)
			}
		}
		for _, b := range m.Buffers {
			if b.TiedTo != "" {
				addSuffixes(targets, b.TiedTo)
			}
		}
	}
	tensors := make(map[string]tensorInfo, 2*len(targets))
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
			if !under(m.Name, *m.Parent) {
				return &Problem{pointer("modules", i, "name"), fmt.Sprintf("module %q is not named under its parent %q (want %q.<child>)", m.Name, *m.Parent, *m.Parent)}
			}
		}
		seen := tensorNames{}
		for j, p := range m.Params {
			at := func(field ...any) string { return pointer(append([]any{"modules", i, "params", j}, field...)...) }
			if pr := checkTensor(&p.Tensor, p.Lazy, "param", m.Name, &seen, tensors, targets, at); pr != nil {
				return pr
			}
			if p.TiedTo == "" {
				total += float64(p.Numel)
			}
			if p.ExpertAxis != nil && (p.Shape == nil || *p.ExpertAxis >= len(p.Shape)) {
				return &Problem{at("expert_axis"), fmt.Sprintf("expert_axis %d is not an axis of shape %v", *p.ExpertAxis, p.Shape)}
			}
			if p.ExpertAxis != nil && len(p.Shape) < 3 {
				return &Problem{at("expert_axis"), fmt.Sprintf("expert_axis on a %d-D tensor: experts are stacked along an extra axis of a matrix (3-D or more)", len(p.Shape))}
			}
			if p.Stats != nil {
				if pr := checkStats(p.Stats, p.Numel, func(f ...any) string { return at(append([]any{"stats"}, f...)...) }); pr != nil {
					return pr
				}
			}
		}
		for j, b := range m.Buffers {
			at := func(field ...any) string {
				return pointer(append([]any{"modules", i, "buffers", j}, field...)...)
			}
			if pr := checkTensor(&b.Tensor, false, "buffer", m.Name, &seen, tensors, targets, at); pr != nil {
				return pr
			}
		}
	}
	if total > MaxTotalParams {
		return &Problem{pointer("modules"), fmt.Sprintf("the dump claims %.3g parameters, beyond any real model", total)}
	}
	if d.Trace != nil {
		traced := make(map[string]struct{}, len(d.Trace.Modules))
		for k, tm := range d.Trace.Modules {
			if _, ok := index[tm.Name]; !ok {
				return &Problem{pointer("trace", "modules", k, "name"), fmt.Sprintf("traced module %q is not in the tree", tm.Name)}
			}
			if _, dup := traced[tm.Name]; dup {
				return &Problem{pointer("trace", "modules", k, "name"), fmt.Sprintf("module %q is traced twice", tm.Name)}
			}
			traced[tm.Name] = struct{}{}
			if tm.Flops > d.Trace.TotalFlops || (tm.Name == "" && tm.Flops != d.Trace.TotalFlops) {
				return &Problem{pointer("trace", "total_flops"), fmt.Sprintf("total_flops %d is inconsistent with module %q's %d (modules count inclusive of children; the root's equals the total)", d.Trace.TotalFlops, tm.Name, tm.Flops)}
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

// tensorNames is the set of one module's tensor names: a list while short (most modules hold
// one to three tensors, and a map per module was most of Check's allocations), a map beyond.
type tensorNames struct {
	few  []string
	many map[string]struct{}
}

// add records name and says whether it was there already.
func (s *tensorNames) add(name string) bool {
	if s.many == nil {
		for _, n := range s.few {
			if n == name {
				return true
			}
		}
		if len(s.few) < 16 {
			s.few = append(s.few, name)
			return false
		}
		s.many = make(map[string]struct{}, 32)
		for _, n := range s.few {
			s.many[n] = struct{}{}
		}
	}
	if _, dup := s.many[name]; dup {
		return true
	}
	s.many[name] = struct{}{}
	return false
}

// addSuffixes records every dotted suffix of a qualified name ("weight", "lm_head.weight"):
// the tensor's own name is one of them, whatever dots a hostile dump puts in it.
func addSuffixes(set map[string]bool, q string) {
	set[q] = true
	for i := 0; i < len(q); i++ {
		if q[i] == '.' {
			set[q[i+1:]] = true
		}
	}
}

type tensorInfo struct {
	kind  string
	shape []int64
	dtype string
}

// under says whether name is a direct child's name of parent ("a.b" under "a"; "a" under the root).
func under(name, parent string) bool {
	if parent == "" {
		return name != "" && !strings.Contains(name, ".")
	}
	rest, ok := strings.CutPrefix(name, parent+".")
	return ok && rest != "" && !strings.Contains(rest, ".")
}

func errOrEpoch(err error) string {
	if err != nil {
		return err.Error()
	}
	return "before 1970"
}

func checkTensor(t *model.Tensor, lazy bool, kind, module string, seen *tensorNames, all map[string]tensorInfo, targets map[string]bool, at func(...any) string) *Problem {
	if seen.add(t.Name) {
		return &Problem{at("name"), fmt.Sprintf("module %q has two tensors (parameters or buffers) named %q", module, t.Name)}
	}
	if _, ok := model.DTypeBytes(t.DType); !ok {
		return &Problem{at("dtype"), fmt.Sprintf("unknown dtype %q (want a torch dtype such as float32, bfloat16, float8_e4m3fn, int64)", t.DType)}
	}
	if t.Shape == nil {
		if !lazy {
			return &Problem{at("shape"), "shape is null but the tensor is not lazy"}
		}
		if t.Numel != 0 {
			return &Problem{at("numel"), fmt.Sprintf("a lazy tensor has no size yet, but numel is %d", t.Numel)}
		}
	} else if n, ok := product(t.Shape); !ok {
		return &Problem{at("shape"), fmt.Sprintf("the product of shape %v overflows (more than 2^53 elements)", t.Shape)}
	} else if n != t.Numel {
		return &Problem{at("numel"), fmt.Sprintf("numel %d is not the product of shape %v", t.Numel, t.Shape)}
	}
	if t.TiedTo != "" {
		first, ok := all[t.TiedTo]
		switch {
		case !ok:
			return &Problem{at("tied_to"), fmt.Sprintf("tied_to %q names no tensor listed before it", t.TiedTo)}
		case first.kind != kind:
			return &Problem{at("tied_to"), fmt.Sprintf("a %s tied to the %s %q: a tensor is tied only to one of its own kind", kind, first.kind, t.TiedTo)}
		case first.dtype != t.DType || !sameShape(first.shape, t.Shape):
			return &Problem{at("tied_to"), fmt.Sprintf("tied to %q of shape %v %s, but this is %v %s: tied tensors are one tensor", t.TiedTo, first.shape, first.dtype, t.Shape, t.DType)}
		}
	}
	if targets[t.Name] {
		all[model.QualifiedName(module, t.Name)] = tensorInfo{kind, t.Shape, t.DType}
	}
	return nil
}

func sameShape(a, b []int64) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// product multiplies dimensions, reporting overflow past 2^53 (the schema's integer bound). A
// zero dimension makes the tensor empty however large the others are.
func product(shape []int64) (int64, bool) {
	for _, d := range shape {
		if d == 0 {
			return 0, true
		}
	}
	n := int64(1)
	for _, d := range shape {
		if n > (1<<53)/d {
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
	if numel > 0 && s.Nonfinite == numel {
		return &Problem{at("nonfinite"), "every value is non-finite, yet mean, min and max are finite numbers"}
	}
	if s.Hist.Lo > s.Hist.Hi {
		return &Problem{at("hist", "lo"), fmt.Sprintf("histogram lo %g is above hi %g", s.Hist.Lo, s.Hist.Hi)}
	}
	if s.Hist.Lo < s.Min || s.Hist.Hi > s.Max {
		return &Problem{at("hist"), fmt.Sprintf("histogram range [%g, %g] reaches outside the values' [min %g, max %g]", s.Hist.Lo, s.Hist.Hi, s.Min, s.Max)}
	}
	finiteN := numel - s.Nonfinite
	switch {
	case s.Std == nil && finiteN > 1:
		return &Problem{at("std"), fmt.Sprintf("std is null, but %d finite values have one", finiteN)}
	case s.Std != nil && (math.IsNaN(*s.Std) || *s.Std < 0 || *s.Std > s.Max-s.Min+1e-12*math.Max(1, math.Abs(s.Max))):
		return &Problem{at("std"), fmt.Sprintf("std %g is impossible for values in [%g, %g]", *s.Std, s.Min, s.Max)}
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
	if int64(len(s.Sketch)) > numel {
		return &Problem{at("sketch"), fmt.Sprintf("a sketch of %d buckets for %d elements: a tensor of at most as many elements as buckets is its own sketch", len(s.Sketch), numel)}
	}
	return nil
}
