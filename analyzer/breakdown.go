// Package analyzer turns a dump into numbers: parameter summaries, pattern-grouped module
// breakdowns and (elsewhere) the FLOP/byte/time model. Pure: no I/O.
package analyzer

import (
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/model"
)

// DTypeMemory is the memory of the parameters stored in one dtype.
type DTypeMemory struct {
	DType   string `json:"dtype"`
	Tensors int    `json:"tensors"`
	Params  int64  `json:"params"`
	Bytes   int64  `json:"bytes"`
}

// ParamSummary is the seed's SUMMARY block: counts with tied tensors once.
type ParamSummary struct {
	Total      int64         `json:"total_params"`
	Trainable  int64         `json:"trainable_params"`
	Frozen     int64         `json:"frozen_params"`
	Bytes      int64         `json:"bytes"`
	Tensors    int           `json:"tensors"`
	Tied       int           `json:"tied_tensors"`
	Lazy       int           `json:"lazy_tensors"`
	Modules    int           `json:"modules"`
	ByDType    []DTypeMemory `json:"by_dtype"`
	HasStats   bool          `json:"has_stats"`
	MetaDevice bool          `json:"meta_device"` // every parameter is on the meta device: no values
}

// Summarize counts a dump's parameters.
func Summarize(d *model.Dump) ParamSummary {
	s := ParamSummary{Modules: len(d.Modules), MetaDevice: true}
	by := map[string]*DTypeMemory{}
	for _, m := range d.Modules {
		for _, p := range m.Params {
			if p.TiedTo != "" {
				s.Tied++
				continue
			}
			s.Tensors++
			s.Total += p.Numel
			if p.RequiresGrad {
				s.Trainable += p.Numel
			}
			if p.Lazy {
				s.Lazy++
			}
			if p.Stats != nil {
				s.HasStats = true
			}
			if p.Device != "meta" {
				s.MetaDevice = false
			}
			e := by[p.DType]
			if e == nil {
				e = &DTypeMemory{DType: p.DType}
				by[p.DType] = e
			}
			e.Tensors++
			e.Params += p.Numel
			if b, ok := model.DTypeBytes(p.DType); ok {
				e.Bytes += int64(b * float64(p.Numel))
			}
		}
	}
	s.Frozen = s.Total - s.Trainable
	for _, e := range by {
		s.ByDType = append(s.ByDType, *e)
		s.Bytes += e.Bytes
	}
	sort.Slice(s.ByDType, func(i, j int) bool {
		if s.ByDType[i].Bytes != s.ByDType[j].Bytes {
			return s.ByDType[i].Bytes > s.ByDType[j].Bytes
		}
		return s.ByDType[i].DType < s.ByDType[j].DType
	})
	return s
}

// Pattern replaces every all-digit component of a dotted name with `*`, so the 61 copies of
// `model.layers.N.self_attn.q_a_proj` group as `model.layers.*.self_attn.q_a_proj`.
func Pattern(name string) string {
	if name == "" {
		return "(root)"
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		if isDigits(p) {
			parts[i] = "*"
		}
	}
	return strings.Join(parts, ".")
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// PatternRow is one line of the pattern-grouped module table.
type PatternRow struct {
	Pattern           string  `json:"pattern"`
	Class             string  `json:"class"`
	Instances         int     `json:"instances"`
	ParamsPerInstance int64   `json:"params_per_instance"` // the first instance's; Uniform says whether all agree
	Uniform           bool    `json:"uniform"`
	TotalParams       int64   `json:"total_params"`
	Percent           float64 `json:"percent"`
	Bytes             int64   `json:"bytes"`
	Example           string  `json:"example"`
	Experts           int64   `json:"experts,omitempty"` // experts held fused per instance (expert_axis size)
}

// Breakdown groups the modules that own parameters by name pattern, largest total first.
// Tied tensors count once, at their first occurrence; modules owning only tied tensors vanish.
func Breakdown(d *model.Dump) []PatternRow {
	total := int64(0)
	rows := map[string]*PatternRow{}
	var order []string
	for _, m := range d.Modules {
		var n, bytes, experts int64
		owns := false
		for _, p := range m.Params {
			if p.TiedTo != "" {
				continue
			}
			owns = true
			n += p.Numel
			if b, ok := model.DTypeBytes(p.DType); ok {
				bytes += int64(b * float64(p.Numel))
			}
			if p.ExpertAxis != nil && p.Shape != nil {
				experts = p.Shape[*p.ExpertAxis]
			}
		}
		if !owns {
			continue
		}
		total += n
		key := Pattern(m.Name)
		r := rows[key]
		if r == nil {
			r = &PatternRow{Pattern: key, Class: m.Class, ParamsPerInstance: n, Uniform: true, Example: m.Name, Experts: experts}
			rows[key] = r
			order = append(order, key)
		}
		r.Instances++
		r.TotalParams += n
		r.Bytes += bytes
		if n != r.ParamsPerInstance {
			r.Uniform = false
		}
	}
	out := make([]PatternRow, 0, len(order))
	for _, k := range order {
		r := rows[k]
		if total > 0 {
			r.Percent = 100 * float64(r.TotalParams) / float64(total)
		}
		out = append(out, *r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].TotalParams > out[j].TotalParams })
	return out
}

// TensorRow is one parameter of the layer details table.
type TensorRow struct {
	Name         string       `json:"name"`
	Shape        []int64      `json:"shape"`
	DType        string       `json:"dtype"`
	Params       int64        `json:"params"`
	Bytes        int64        `json:"bytes"`
	RequiresGrad bool         `json:"requires_grad"`
	TiedTo       string       `json:"tied_to,omitempty"`
	Stats        *model.Stats `json:"stats,omitempty"`
}

// Tensors lists every parameter in dump order.
func Tensors(d *model.Dump) []TensorRow {
	var out []TensorRow
	for _, m := range d.Modules {
		for _, p := range m.Params {
			b, _ := model.DTypeBytes(p.DType)
			out = append(out, TensorRow{
				Name: model.QualifiedName(m.Name, p.Name), Shape: p.Shape, DType: p.DType, Params: p.Numel,
				Bytes: int64(b * float64(p.Numel)), RequiresGrad: p.RequiresGrad, TiedTo: p.TiedTo, Stats: p.Stats,
			})
		}
	}
	return out
}
