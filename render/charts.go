package render

import (
	"fmt"
	"io"
	"math"
	"sort"

	gochart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"

	"github.com/mrep-dev/mrep/render/chart"
)

// The report's charts follow render/chart's conventions and two of mrep's own: one colour per
// category in every chart, and points that stand below the compulsory-traffic floor drawn
// hollow.

// categoryColors fixes a colour per category, so attention is the same blue in the pie, the
// stacked shares and the category rooflines.
var categoryColors = map[string]drawing.Color{
	"attention":      chart.Palette[0],
	"dense_ffn":      chart.Palette[1],
	"routed_experts": chart.Palette[2],
	"embedding":      chart.Palette[3],
	"lm_head":        chart.Palette[4],
	"shared_experts": chart.Palette[5],
	"router":         chart.Palette[6],
	"optimizer":      chart.Palette[7],
	"other":          chart.Palette[8],
	"norm":           chart.Palette[9],
	"network":        drawing.ColorFromHex("6B8E23"),
	"others":         drawing.ColorFromHex("BBBBBB"),
}

// CategoryColor is the category's colour in every chart; unknown names get a palette colour
// by their position i.
func CategoryColor(name string, i int) drawing.Color {
	if c, ok := categoryColors[name]; ok {
		return c
	}
	return chart.ColorAt(i)
}

// Ceiling is one chip's roofline.
type Ceiling struct {
	Label string
	Peak  float64 // TFLOP/s
	BW    float64 // B/s
}

// Knee is the ridge intensity in FLOP/byte.
func (c Ceiling) Knee() float64 { return c.Peak * 1e12 / c.BW }

// RoofPoint is a model point at (AI_hbm, TF_est).
type RoofPoint struct {
	Label string
	AI    float64
	TF    float64
	Group int     // points of one group share a colour and are joined by a line when Connect
	Size  float64 // marker diameter; 0 = 6
	// Hollow: the point stands below the compulsory HBM traffic (the ⚠ results): drawn as a
	// ring, so it is never read as an achievable point.
	Hollow bool
	Tag    bool // write the point's Label beside it (a sweep's B or S)
}

// RooflineSpec describes a roofline gochart.
type RooflineSpec struct {
	Title       string
	Ceilings    []Ceiling // the first is primary: its regions are shaded
	Points      []RoofPoint
	GroupNames  []string
	GroupColors []drawing.Color // a colour per group (categories); default the palette in order
	Connect     bool            // join each group's points in order (sweeps)
	XMin, XMax  float64
	YMin, YMax  float64
	LabelPoints bool   // "all" label mode: annotate every point
	Note        string // a last legend line, e.g. what marker sizes mean
}

// Limits returns the axis limits the chart will use: requested ones, else powers of ten
// around the data and the ridges.
func (s RooflineSpec) Limits() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = s.XMin, s.XMax, s.YMin, s.YMax
	lo, hi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for _, p := range s.Points {
		if p.AI > 0 {
			lo, hi = math.Min(lo, p.AI), math.Max(hi, p.AI)
		}
		if p.TF > 0 {
			ylo, yhi = math.Min(ylo, p.TF), math.Max(yhi, p.TF)
		}
	}
	for _, c := range s.Ceilings {
		lo, hi = math.Min(lo, c.Knee()), math.Max(hi, c.Knee())
		yhi = math.Max(yhi, c.Peak)
		ylo = math.Min(ylo, c.Peak/100)
	}
	if xmin <= 0 {
		xmin = math.Pow(10, math.Floor(math.Log10(lo))-1)
	}
	if xmax <= 0 {
		xmax = math.Pow(10, math.Ceil(math.Log10(hi))+1)
	}
	if ymin <= 0 { // the decade holding the lowest point (or a hundredth of the lowest roof)
		ymin = math.Pow(10, math.Floor(math.Log10(ylo)))
	}
	if ymax <= 0 {
		ymax = math.Pow(10, math.Ceil(math.Log10(yhi*1.5)))
	}
	return
}

var (
	shadeHBM     = drawing.Color{R: 0, G: 114, B: 178, A: 28}
	shadeCompute = drawing.Color{R: 213, G: 94, B: 0, A: 28}
)

// Roofline builds a log-log roofline: a memory slope and compute ceiling per chip, a ridge
// marker on each, the primary chip's HBM-bound and compute-bound sides shaded, and the points.
func Roofline(s RooflineSpec) gochart.Chart {
	xmin, xmax, ymin, ymax := s.Limits()
	var series []gochart.Series
	var entries []chart.LegendEntry
	if len(s.Ceilings) > 0 {
		entries = append(entries, chart.LegendEntry{Label: s.Ceilings[0].Label + " HBM-bound side", Color: shadeHBM.WithAlpha(255), Fill: true},
			chart.LegendEntry{Label: s.Ceilings[0].Label + " compute-bound side", Color: shadeCompute.WithAlpha(255), Fill: true})
		k := s.Ceilings[0].Knee()
		series = append(series,
			gochart.ContinuousSeries{Name: "HBM-bound side", Style: gochart.Style{StrokeWidth: 0.01, StrokeColor: shadeHBM, FillColor: shadeHBM},
				XValues: []float64{xmin, k}, YValues: []float64{ymax, ymax}},
			gochart.ContinuousSeries{Name: "compute-bound side", Style: gochart.Style{StrokeWidth: 0.01, StrokeColor: shadeCompute, FillColor: shadeCompute},
				XValues: []float64{k, xmax}, YValues: []float64{ymax, ymax}})
	}
	var notes []gochart.Value2
	for i, c := range s.Ceilings {
		col := drawing.ColorFromHex("333333")
		if i > 0 {
			col = chart.ColorAt(len(chart.Palette) - 1 - i)
		}
		k := c.Knee()
		x0 := math.Max(xmin, ymin*1e12/c.BW)
		series = append(series,
			gochart.ContinuousSeries{Name: fmt.Sprintf("%s roof (ridge %.0f FLOP/B)", c.Label, k),
				Style:   gochart.Style{StrokeColor: col, StrokeWidth: 2, StrokeDashArray: chart.Dash(i)},
				XValues: []float64{x0, k, xmax}, YValues: []float64{c.BW * x0 / 1e12, c.Peak, c.Peak}},
			gochart.ContinuousSeries{Name: c.Label + " ridge", Style: gochart.Style{StrokeWidth: gochart.Disabled, DotColor: col, DotWidth: 5},
				XValues: []float64{k}, YValues: []float64{c.Peak}})
		entries = append(entries, chart.LegendEntry{Label: fmt.Sprintf("%s roof, ridge %.0f FLOP/B", c.Label, k), Color: col, Dash: chart.Dash(i)})
	}
	// Ridges are marked by a dot and named in the legend: a label box on the ceiling would hide
	// the compute-bound points that sit there.
	type key struct {
		group int
		size  float64
	}
	groups := map[key][]RoofPoint{}
	var order []key
	for _, p := range s.Points {
		if p.Size == 0 {
			p.Size = 6
		}
		k := key{p.Group, p.Size}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], p)
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].group != order[j].group {
			return order[i].group < order[j].group
		}
		return order[i].size < order[j].size
	})
	named := map[int]bool{}
	groupColor := func(g int) drawing.Color {
		if g < len(s.GroupColors) {
			return s.GroupColors[g]
		}
		return chart.ColorAt(g)
	}
	hollow := false
	var tags []RoofPoint
	var rings []gochart.Series
	for _, k := range order {
		pts := groups[k]
		g := k.group
		col := groupColor(g)
		name := ""
		if g < len(s.GroupNames) {
			name = s.GroupNames[g]
		}
		st := gochart.Style{StrokeWidth: gochart.Disabled, StrokeColor: col, DotColor: col, DotWidth: k.size}
		if name != "" && !named[g] {
			entries = append(entries, chart.LegendEntry{Label: name, Color: col, Dot: true})
			named[g] = true
		}
		if s.Connect {
			st.StrokeWidth = 1.5
		}
		var xs, ys []float64
		for _, p := range pts {
			x, y := chart.Clamp(p.AI, xmin, xmax), chart.Clamp(p.TF, ymin, ymax)
			xs, ys = append(xs, x), append(ys, y)
			if s.LabelPoints {
				notes = append(notes, gochart.Value2{XValue: x, YValue: y, Label: p.Label})
			}
			if p.Hollow { // a ring over the dot: white inside, the group's colour around
				hollow = true
				rings = append(rings, gochart.ContinuousSeries{Style: gochart.Style{StrokeWidth: 1.8, StrokeColor: col, DotColor: drawing.ColorWhite, DotWidth: k.size},
					XValues: []float64{x}, YValues: []float64{y}})
			}
			if p.Tag {
				tags = append(tags, RoofPoint{Label: p.Label, AI: x, TF: y})
			}
		}
		series = append(series, gochart.ContinuousSeries{Name: name, Style: st, XValues: xs, YValues: ys})
	}
	series = append(series, rings...) // rings over the dots they hollow
	if hollow {
		entries = append(entries, chart.LegendEntry{Label: "hollow: below the compulsory HBM traffic (⚠)"})
	}
	if s.Note != "" {
		entries = append(entries, chart.LegendEntry{Label: s.Note})
	}
	if len(notes) > 0 {
		series = append(series, gochart.AnnotationSeries{Annotations: notes,
			Style: gochart.Style{FontSize: 8, StrokeColor: drawing.ColorFromHex("bbbbbb"), FillColor: drawing.ColorWhite}})
	}
	c := gochart.Chart{
		Title: s.Title, TitleStyle: gochart.Style{FontSize: 13},
		Width: 1100, Height: 680,
		Background: gochart.Style{Padding: gochart.Box{Top: 50, Left: 20, Right: 20, Bottom: 20}},
		XAxis: gochart.XAxis{Name: "AI_hbm (FLOP/byte, log)", Range: &chart.LogRange{Min: xmin, Max: xmax}, Ticks: chart.LogTicks(xmin, xmax),
			GridMajorStyle: gochart.Style{StrokeColor: drawing.ColorFromHex("e0e0e0"), StrokeWidth: 1}},
		YAxis: gochart.YAxis{Name: "TF_est (TFLOP/s, log)", Range: &chart.LogRange{Min: ymin, Max: ymax}, Ticks: chart.LogTicks(ymin, ymax),
			GridMajorStyle: gochart.Style{StrokeColor: drawing.ColorFromHex("e0e0e0"), StrokeWidth: 1}},
		// no series uses the secondary axis; left visible, go-chart draws its empty range's
		// ticks at NaN positions (off-canvas in PNG, absurd coordinates in SVG)
		YAxisSecondary: gochart.YAxis{Style: gochart.Hidden()},
		Series:         series,
	}
	c.XAxis.GridLines = chart.GridLines(c.XAxis.Ticks)
	c.YAxis.GridLines = chart.GridLines(c.YAxis.Ticks)
	c.Background.Padding.Right = 310 // the legend lives right of the plot, off the data
	c.Elements = []gochart.Renderable{chart.Legend(entries)}
	if len(tags) > 0 {
		c.Elements = append(c.Elements, pointTags(tags, xmin, xmax, ymin, ymax))
	}
	chart.LeftAxis(&c)
	return c
}

// pointTags writes each point's label (a sweep's B=8, S=4096) beside it.
func pointTags(pts []RoofPoint, xmin, xmax, ymin, ymax float64) gochart.Renderable {
	return func(r gochart.Renderer, cb gochart.Box, defaults gochart.Style) {
		xr := chart.LogRange{Min: xmin, Max: xmax, Domain: cb.Width()}
		yr := chart.LogRange{Min: ymin, Max: ymax, Domain: cb.Height()}
		r.SetFont(defaults.GetFont())
		r.SetFontSize(7.5)
		r.SetFontColor(drawing.ColorFromHex("333333"))
		// a tag that would overlap one already written is left out (dense sweeps crowd)
		var drawn []gochart.Box
		for _, p := range pts {
			x, y := cb.Left+xr.Translate(p.AI)+6, cb.Bottom-yr.Translate(p.TF)+12
			tb := r.MeasureText(p.Label)
			box := gochart.Box{Left: x, Right: x + tb.Width(), Top: y - tb.Height(), Bottom: y}
			clear := true
			for _, d := range drawn {
				if box.Left < d.Right+4 && d.Left < box.Right+4 && box.Top < d.Bottom+2 && d.Top < box.Bottom+2 {
					clear = false
					break
				}
			}
			if clear {
				r.Text(p.Label, x, y)
				drawn = append(drawn, box)
			}
		}
	}
}

// RenderPNG writes a chart as PNG (render/chart does it; commands write every output through
// render).
func RenderPNG(c chart.Renderer, w io.Writer) error { return chart.RenderPNG(c, w) }

// RenderSVG writes a chart as SVG, every string XML-escaped.
func RenderSVG(c chart.Renderer, w io.Writer) error { return chart.RenderSVG(c, w) }
