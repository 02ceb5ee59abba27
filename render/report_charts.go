package render

import (
	"fmt"

	"github.com/mrep-dev/mrep/analyzer"
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
	out = append(out, NamedChart{"module_pie", chart.Pie(m.Name+": parameters by category", labels, values, CategoryColor), "Parameter category breakdown"})
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
		s.Note = "small dot: " + profiles[0].Name + ", large: " + profiles[len(profiles)-1].Name
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

// WeightHistograms picks the largest tensors with statistics for the distribution grid.
func WeightHistograms(r report.Data, n int) []chart.Histogram {
	var hs []chart.Histogram
	for _, t := range largestWithStats(r.Tensors, n) {
		hs = append(hs, chart.Histogram{Name: t.Name, Lo: t.Stats.Hist.Lo, Hi: t.Stats.Hist.Hi, Counts: t.Stats.Hist.Counts})
	}
	return hs
}
