package render

import (
	"fmt"
	"math"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/compare"
	"github.com/mrep-dev/mrep/render/chart"
	"github.com/mrep-dev/mrep/report"
)

// ChartOptions are the report's chart knobs.
type ChartOptions struct {
	XMin, XMax, YMin, YMax float64 // roofline limits; 0 = automatic
	LabelMode              string  // minimal (legend only) or all (every point annotated)
}

// NamedChart is a chart and the file stem it is written under.
type NamedChart struct {
	Name    string
	Chart   chart.Renderer
	Caption string
}

func ceilings(r report.Data) []Ceiling {
	var cs []Ceiling
	for _, t := range r.Analysis.Targets {
		cs = append(cs, Ceiling{Label: t.Label(), Peak: t.Peak / 1e12, BW: t.BWHBM})
	}
	return cs
}

func (o ChartOptions) spec(title string, cs []Ceiling) RooflineSpec {
	return RooflineSpec{Title: title, Ceilings: cs, XMin: o.XMin, XMax: o.XMax, YMin: o.YMin, YMax: o.YMax, LabelPoints: o.LabelMode == "all"}
}

// overviewPoints are the primary target's phase x profile points, one group each.
func overviewPoints(r report.Data) ([]RoofPoint, []string) {
	var pts []RoofPoint
	var names []string
	for _, ph := range analyzer.Phases {
		for _, p := range r.Analysis.Profiles {
			if res, ok := r.Analysis.Find(r.Primary.Label(), ph, p.Name); ok {
				pts = append(pts, RoofPoint{Label: fmt.Sprintf("%s/%s", ph, p.Name), AI: res.Timing.AIHBM, TF: res.Timing.TFEst, Group: len(names), Hollow: res.Timing.BelowFloor})
				names = append(names, fmt.Sprintf("%s / %s", ph, p.Name))
			}
		}
	}
	return pts, names
}

func (s RooflineSpec) withPoints(pts []RoofPoint, names []string) RooflineSpec {
	s.Points, s.GroupNames = pts, names
	return s
}

// ReportCharts builds every chart of the report from its data.
func ReportCharts(r report.Data, o ChartOptions) []NamedChart {
	var out []NamedChart
	m := r.Model
	var labels []string
	var values []float64
	for _, c := range analyzer.Categories {
		if n := m.Params[c]; n > 0 {
			labels = append(labels, string(c))
			values = append(values, float64(n))
		}
	}
	if len(values) > 0 { // a module tree without parameters has nothing to slice
		out = append(out, NamedChart{"module_pie", chart.Pie(m.Name+": parameters by category", labels, values, CategoryColor), "Parameter category breakdown"})
	}
	if NotATransformer(m.Fingerprint) {
		return out // rooflines and sweeps are of transformer phases
	}

	primary := r.Primary.Label()
	profiles := r.Analysis.Profiles
	sp := o.spec(m.Name+": training, prefill and decode on "+primary+" (points) against every target's roofline", ceilings(r)).withPoints(overviewPoints(r))
	out = append(out, NamedChart{"roofline", Roofline(sp), "Multi-chip roofline overview"})

	sweepChart := func(name, title, unit string, pts []analyzer.SweepPoint) NamedChart {
		s := o.spec(title, ceilings(r)[:1])
		s.Connect = true
		if len(profiles) > 1 {
			// the profiles share FLOPs and often bytes: their points can sit on each other
			s.Note = profiles[len(profiles)-1].Name + " hides " + profiles[0].Name + " where equal"
		}
		for pi, p := range profiles {
			s.GroupNames = append(s.GroupNames, p.Name+" ("+unit+" sweep)")
			for _, pt := range pts {
				res := pt.Results[p.Name]
				s.Points = append(s.Points, RoofPoint{Label: fmt.Sprintf("%s=%d", unit, pt.X), AI: res.Timing.AIHBM, TF: res.Timing.TFEst, Group: pi,
					Hollow: res.Timing.BelowFloor, Tag: pi == len(profiles)-1}) // the last profile's points carry their B or S
			}
		}
		return NamedChart{name, Roofline(s), title}
	}
	out = append(out,
		sweepChart("decode_batch_roofline", fmt.Sprintf("%s decode batch sweep on %s (L=%d)", m.Name, primary, r.Analysis.Scenario.KVLen), "B", r.DecodeSweep),
		sweepChart("prefill_seq_roofline", fmt.Sprintf("%s prefill sequence sweep on %s (B=%d)", m.Name, primary, r.Analysis.Scenario.Batch), "S", r.PrefillSweep))

	var cats []string
	for _, c := range analyzer.Categories {
		cats = append(cats, string(c))
	}
	cats = append(cats, "optimizer", "network")
	for _, p := range profiles {
		var bars []chart.StackBar
		for _, st := range r.Analysis.Steps {
			if st.Profile != p.Name {
				continue
			}
			keys := analyzer.SortedCategories(st.ByCat)
			f, b := chart.StackBar{Name: string(st.Phase) + " FLOPs"}, chart.StackBar{Name: string(st.Phase) + " bytes"}
			for _, k := range keys {
				c := st.ByCat[k]
				f.Labels, f.Shares = append(f.Labels, k), append(f.Shares, report.Share(c.FTheory, st.Cost.FTheory))
				b.Labels, b.Shares = append(b.Labels, k), append(b.Shares, report.Share(c.BytesHBM()+c.BytesNet, st.Cost.BytesHBM()+st.Cost.BytesNet))
			}
			bars = append(bars, f, b)
		}
		out = append(out, NamedChart{FileStem(p.Name) + "_mode_category_stacks", chart.Stacks(fmt.Sprintf("%s: category shares of F_theory and of bytes (%s)", m.Name, p.Name), bars, cats, CategoryColor),
			"Category shares, " + p.Name})
	}
	for _, ph := range analyzer.Phases {
		s := o.spec(fmt.Sprintf("%s %s by category on %s", m.Name, ph, primary), ceilings(r)[:1])
		s.Note = "small: " + profiles[0].Name + ", large: " + profiles[len(profiles)-1].Name // a small dot inside a large one: equal
		group := map[string]int{}
		for pi, p := range profiles {
			for _, cp := range r.Categories {
				if cp.Phase != ph || cp.Profile != p.Name {
					continue
				}
				k := cp.Category
				g, ok := group[k]
				if !ok {
					g = len(group)
					group[k] = g
					s.GroupNames = append(s.GroupNames, k)
				}
				size := 5.0
				if pi > 0 {
					size = 9
				}
				s.Points = append(s.Points, RoofPoint{Label: k + "/" + p.Name, AI: cp.AIHBM, TF: cp.TFEst, Group: g, Size: size})
				if len(s.GroupColors) <= g {
					s.GroupColors = append(s.GroupColors, CategoryColor(k, g))
				}
			}
		}
		out = append(out, NamedChart{string(ph) + "_category_roofline", Roofline(s), "Category roofline, " + string(ph)})
	}
	return out
}

// WeightHistograms picks the largest tensors with statistics for the distribution grid, each
// re-binned onto the value range its kind shares (attention, MLP, norm...), so two panels of
// one kind read on one axis; the panel title names the kind.
func WeightHistograms(r report.Data, n int) []chart.Histogram {
	ts := largestWithStats(r.Tensors, n)
	type span struct{ lo, hi float64 }
	kinds := map[string]span{}
	for _, t := range ts {
		if len(t.Stats.Hist.Counts) == 0 {
			continue
		}
		k := compare.DriftKind(t.Name, "")
		sp, ok := kinds[k]
		if !ok {
			sp = span{t.Stats.Hist.Lo, t.Stats.Hist.Hi}
		}
		kinds[k] = span{math.Min(sp.lo, t.Stats.Hist.Lo), math.Max(sp.hi, t.Stats.Hist.Hi)}
	}
	var hs []chart.Histogram
	for _, t := range ts {
		h := t.Stats.Hist
		if len(h.Counts) == 0 {
			continue
		}
		k := compare.DriftKind(t.Name, "")
		sp := kinds[k]
		hs = append(hs, chart.Histogram{Name: t.Name + " (" + k + ")", Lo: sp.lo, Hi: sp.hi, Counts: rebin(h.Counts, h.Lo, h.Hi, sp.lo, sp.hi)})
	}
	return hs
}

// rebin spreads counts over [lo, hi] in equal bins onto as many equal bins over [nlo, nhi]
// (a superset), each old bin's count shared by overlap (uniform within a bin).
func rebin(counts []int64, lo, hi, nlo, nhi float64) []int64 {
	n := len(counts)
	if n == 0 || !(hi > lo) || !(nhi > nlo) || lo == nlo && hi == nhi {
		return counts
	}
	out := make([]float64, n)
	ow, nw := (hi-lo)/float64(n), (nhi-nlo)/float64(n)
	for i, c := range counts {
		a, b := lo+float64(i)*ow, lo+float64(i+1)*ow
		for j := max(0, int((a-nlo)/nw)); j < n; j++ {
			x, y := nlo+float64(j)*nw, nlo+float64(j+1)*nw
			if x >= b {
				break
			}
			if ov := math.Min(b, y) - math.Max(a, x); ov > 0 {
				out[j] += float64(c) * ov / ow
			}
		}
	}
	res := make([]int64, n)
	for j, v := range out {
		res[j] = int64(math.Round(v))
	}
	return res
}
