package render

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	chart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"
)

// LogRange is a base-10 logarithmic axis. go-chart's own LogarithmicRange maps
// log10(value - Min) / log10(Max - Min), which places a point at AI = OI_knee to the right of
// the ridge (and everything near Min at the origin); this one maps
// (log10 v - log10 Min) / (log10 Max - log10 Min), so equal ratios get equal distances.
type LogRange struct {
	Min, Max   float64
	Domain     int
	Descending bool
}

// String implements chart.Range.
func (r LogRange) String() string {
	return fmt.Sprintf("LogRange [%g,%g] => %d", r.Min, r.Max, r.Domain)
}

// IsZero implements chart.Range.
func (r LogRange) IsZero() bool { return r.Min <= 0 || r.Max <= 0 }

// GetMin implements chart.Range.
func (r LogRange) GetMin() float64 { return r.Min }

// SetMin implements chart.Range.
func (r *LogRange) SetMin(v float64) { r.Min = v }

// GetMax implements chart.Range.
func (r LogRange) GetMax() float64 { return r.Max }

// SetMax implements chart.Range.
func (r *LogRange) SetMax(v float64) { r.Max = v }

// GetDelta implements chart.Range.
func (r LogRange) GetDelta() float64 { return r.Max - r.Min }

// GetDomain implements chart.Range.
func (r LogRange) GetDomain() int { return r.Domain }

// SetDomain implements chart.Range.
func (r *LogRange) SetDomain(d int) { r.Domain = d }

// IsDescending implements chart.Range.
func (r LogRange) IsDescending() bool { return r.Descending }

// Translate maps a value to pixels; values at or below zero sit at the axis origin.
func (r LogRange) Translate(v float64) int {
	if v <= 0 || r.Min <= 0 || r.Max <= r.Min {
		return 0
	}
	ratio := (math.Log10(v) - math.Log10(r.Min)) / (math.Log10(r.Max) - math.Log10(r.Min))
	px := int(math.Round(ratio * float64(r.Domain)))
	if r.Descending {
		return r.Domain - px
	}
	return px
}

// logTicks are the powers of ten in [min, max], labelled 0.1, 1, 10 … 1000, 10⁴.
func logTicks(min, max float64) []chart.Tick {
	var ticks []chart.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		v := math.Pow(10, e)
		if v < min*0.999 || v > max*1.001 {
			continue
		}
		ticks = append(ticks, chart.Tick{Value: v, Label: powerLabel(int(e))})
	}
	return ticks
}

// Palette is a colour-blind-safe categorical palette (Okabe-Ito), so charts read the same for
// everyone and stay byte-stable.
var Palette = []drawing.Color{
	drawing.ColorFromHex("0072B2"), drawing.ColorFromHex("D55E00"), drawing.ColorFromHex("009E73"),
	drawing.ColorFromHex("CC79A7"), drawing.ColorFromHex("E69F00"), drawing.ColorFromHex("56B4E9"),
	drawing.ColorFromHex("F0E442"), drawing.ColorFromHex("000000"), drawing.ColorFromHex("999999"),
	drawing.ColorFromHex("882255"),
}

func colorAt(i int) drawing.Color { return Palette[i%len(Palette)] }

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

// RooflineSpec describes a roofline chart.
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
func Roofline(s RooflineSpec) chart.Chart {
	xmin, xmax, ymin, ymax := s.Limits()
	var series []chart.Series
	var entries []legendEntry
	if len(s.Ceilings) > 0 {
		entries = append(entries, legendEntry{Label: s.Ceilings[0].Label + " HBM-bound side", Color: shadeHBM.WithAlpha(255), Fill: true},
			legendEntry{Label: s.Ceilings[0].Label + " compute-bound side", Color: shadeCompute.WithAlpha(255), Fill: true})
		k := s.Ceilings[0].Knee()
		series = append(series,
			chart.ContinuousSeries{Name: "HBM-bound side", Style: chart.Style{StrokeWidth: 0.01, StrokeColor: shadeHBM, FillColor: shadeHBM},
				XValues: []float64{xmin, k}, YValues: []float64{ymax, ymax}},
			chart.ContinuousSeries{Name: "compute-bound side", Style: chart.Style{StrokeWidth: 0.01, StrokeColor: shadeCompute, FillColor: shadeCompute},
				XValues: []float64{k, xmax}, YValues: []float64{ymax, ymax}})
	}
	var notes []chart.Value2
	for i, c := range s.Ceilings {
		col := drawing.ColorFromHex("333333")
		if i > 0 {
			col = colorAt(len(Palette) - 1 - i)
		}
		k := c.Knee()
		x0 := math.Max(xmin, ymin*1e12/c.BW)
		series = append(series,
			chart.ContinuousSeries{Name: fmt.Sprintf("%s roof (ridge %.0f FLOP/B)", c.Label, k),
				Style:   chart.Style{StrokeColor: col, StrokeWidth: 2, StrokeDashArray: dash(i)},
				XValues: []float64{x0, k, xmax}, YValues: []float64{c.BW * x0 / 1e12, c.Peak, c.Peak}},
			chart.ContinuousSeries{Name: c.Label + " ridge", Style: chart.Style{StrokeWidth: chart.Disabled, DotColor: col, DotWidth: 5},
				XValues: []float64{k}, YValues: []float64{c.Peak}})
		entries = append(entries, legendEntry{Label: fmt.Sprintf("%s roof, ridge %.0f FLOP/B", c.Label, k), Color: col, Dash: dash(i)})
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
		return colorAt(g)
	}
	hollow := false
	var tags []RoofPoint
	var rings []chart.Series
	for _, k := range order {
		pts := groups[k]
		g := k.group
		col := groupColor(g)
		name := ""
		if g < len(s.GroupNames) {
			name = s.GroupNames[g]
		}
		st := chart.Style{StrokeWidth: chart.Disabled, StrokeColor: col, DotColor: col, DotWidth: k.size}
		if name != "" && !named[g] {
			entries = append(entries, legendEntry{Label: name, Color: col, Dot: true})
			named[g] = true
		}
		if s.Connect {
			st.StrokeWidth = 1.5
		}
		var xs, ys []float64
		for _, p := range pts {
			x, y := clamp(p.AI, xmin, xmax), clamp(p.TF, ymin, ymax)
			xs, ys = append(xs, x), append(ys, y)
			if s.LabelPoints {
				notes = append(notes, chart.Value2{XValue: x, YValue: y, Label: p.Label})
			}
			if p.Hollow { // a ring over the dot: white inside, the group's colour around
				hollow = true
				rings = append(rings, chart.ContinuousSeries{Style: chart.Style{StrokeWidth: 1.8, StrokeColor: col, DotColor: drawing.ColorWhite, DotWidth: k.size},
					XValues: []float64{x}, YValues: []float64{y}})
			}
			if p.Tag {
				tags = append(tags, RoofPoint{Label: p.Label, AI: x, TF: y})
			}
		}
		series = append(series, chart.ContinuousSeries{Name: name, Style: st, XValues: xs, YValues: ys})
	}
	series = append(series, rings...) // rings over the dots they hollow
	if hollow {
		entries = append(entries, legendEntry{Label: "hollow: below the compulsory HBM traffic (⚠)"})
	}
	if s.Note != "" {
		entries = append(entries, legendEntry{Label: s.Note})
	}
	if len(notes) > 0 {
		series = append(series, chart.AnnotationSeries{Annotations: notes,
			Style: chart.Style{FontSize: 8, StrokeColor: drawing.ColorFromHex("bbbbbb"), FillColor: drawing.ColorWhite}})
	}
	c := chart.Chart{
		Title: s.Title, TitleStyle: chart.Style{FontSize: 13},
		Width: 1100, Height: 680,
		Background: chart.Style{Padding: chart.Box{Top: 50, Left: 20, Right: 20, Bottom: 20}},
		XAxis: chart.XAxis{Name: "AI_hbm (FLOP/byte, log)", Range: &LogRange{Min: xmin, Max: xmax}, Ticks: logTicks(xmin, xmax),
			GridMajorStyle: chart.Style{StrokeColor: drawing.ColorFromHex("e0e0e0"), StrokeWidth: 1}},
		YAxis: chart.YAxis{Name: "TF_est (TFLOP/s, log)", Range: &LogRange{Min: ymin, Max: ymax}, Ticks: logTicks(ymin, ymax),
			GridMajorStyle: chart.Style{StrokeColor: drawing.ColorFromHex("e0e0e0"), StrokeWidth: 1}},
		// no series uses the secondary axis; left visible, go-chart draws its empty range's
		// ticks at NaN positions (off-canvas in PNG, absurd coordinates in SVG)
		YAxisSecondary: chart.YAxis{Style: chart.Hidden()},
		Series:         series,
	}
	c.XAxis.GridLines = gridLines(c.XAxis.Ticks)
	c.YAxis.GridLines = gridLines(c.YAxis.Ticks)
	c.Background.Padding.Right = 310 // the legend lives right of the plot, off the data
	c.Elements = []chart.Renderable{legend(entries)}
	if len(tags) > 0 {
		c.Elements = append(c.Elements, pointTags(tags, xmin, xmax, ymin, ymax))
	}
	leftAxis(&c)
	return c
}

// pointTags writes each point's label (a sweep's B=8, S=4096) beside it.
func pointTags(pts []RoofPoint, xmin, xmax, ymin, ymax float64) chart.Renderable {
	return func(r chart.Renderer, cb chart.Box, defaults chart.Style) {
		xr := LogRange{Min: xmin, Max: xmax, Domain: cb.Width()}
		yr := LogRange{Min: ymin, Max: ymax, Domain: cb.Height()}
		r.SetFont(defaults.GetFont())
		r.SetFontSize(7.5)
		r.SetFontColor(drawing.ColorFromHex("333333"))
		// a tag that would overlap one already written is left out (dense sweeps crowd)
		var drawn []chart.Box
		for _, p := range pts {
			x, y := cb.Left+xr.Translate(p.AI)+6, cb.Bottom-yr.Translate(p.TF)+12
			tb := r.MeasureText(p.Label)
			box := chart.Box{Left: x, Right: x + tb.Width(), Top: y - tb.Height(), Bottom: y}
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

// legendEntry is one line of a chart's legend.
type legendEntry struct {
	Label string
	Color drawing.Color
	Dot   bool // a marker; otherwise a line (dashed when Dash)
	Dash  []float64
	Fill  bool // a shaded region (pale, as the shading it names)
	Solid bool // with Fill: a solid swatch (a slice or a bar segment)
}

// legend draws entries in a column to the right of the plot, so it never hides a point
// (go-chart's own legends sit on the canvas and list every series, shading included).
func legend(entries []legendEntry) chart.Renderable {
	return func(r chart.Renderer, cb chart.Box, defaults chart.Style) {
		if len(entries) == 0 {
			return
		}
		x := cb.Right + 16 // value axes are on the left: the right edge is free
		y := cb.Top + 4
		r.SetFont(defaults.GetFont())
		r.SetFontSize(9)
		r.SetFontColor(drawing.ColorFromHex("333333"))
		for _, e := range entries {
			switch {
			case e.Color.IsZero():
				// a note: text only
			case e.Fill:
				if e.Solid {
					r.SetFillColor(e.Color)
				} else {
					r.SetFillColor(e.Color.WithAlpha(90))
				}
				r.SetStrokeColor(e.Color)
				r.SetStrokeWidth(0.5)
				r.SetStrokeDashArray(nil)
				r.MoveTo(x, y-6)
				r.LineTo(x+22, y-6)
				r.LineTo(x+22, y+4)
				r.LineTo(x, y+4)
				r.Close()
				r.FillStroke()
			case e.Dot:
				r.SetFillColor(e.Color)
				r.SetStrokeColor(e.Color)
				r.SetStrokeWidth(1)
				r.SetStrokeDashArray(nil)
				r.Circle(4, x+11, y-1)
				r.FillStroke()
			default:
				r.SetStrokeColor(e.Color)
				r.SetStrokeWidth(2)
				r.SetStrokeDashArray(e.Dash)
				r.MoveTo(x, y-1)
				r.LineTo(x+22, y-1)
				r.Stroke()
				r.SetStrokeDashArray(nil)
			}
			r.Text(e.Label, x+30, y+3)
			y += 18
		}
	}
}

func gridLines(ticks []chart.Tick) []chart.GridLine {
	var out []chart.GridLine
	for _, t := range ticks {
		out = append(out, chart.GridLine{Value: t.Value})
	}
	return out
}

func dash(i int) []float64 {
	if i == 0 {
		return nil
	}
	return []float64{6, 3 + float64(i)}
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

// Pie is the parameter-category pie. Slices under 1.5% are merged into "others" so labels never
// collide; the legend lists exactly the slices drawn, in their colours (each category's colour
// in every chart), and names what "others" holds. The title is drawn above the pie's box, not
// over it.
func Pie(title string, labels []string, values []float64) chart.PieChart {
	var total float64
	for _, v := range values {
		total += v
	}
	var vs []chart.Value
	var entries []legendEntry
	var small float64
	var smallNames []string
	for i := range labels {
		col := CategoryColor(labels[i], i)
		if values[i]/total < 0.015 {
			small += values[i]
			smallNames = append(smallNames, fmt.Sprintf("%s %.2f%%", labels[i], 100*values[i]/total))
			continue
		}
		entries = append(entries, legendEntry{Label: fmt.Sprintf("%s %.2f%%", labels[i], 100*values[i]/total), Color: col, Fill: true, Solid: true})
		vs = append(vs, chart.Value{Label: fmt.Sprintf("%s %.1f%%", labels[i], 100*values[i]/total), Value: values[i],
			Style: chart.Style{FillColor: col, StrokeColor: drawing.ColorWhite, FontSize: 10, FontColor: textOn(col)}})
	}
	if small > 0 {
		col := categoryColors["others"]
		label := fmt.Sprintf("others %.2f%%", 100*small/total)
		entries = append(entries, legendEntry{Label: label + ":", Color: col, Fill: true, Solid: true})
		for _, n := range smallNames { // one per line: a long list would run off the image
			entries = append(entries, legendEntry{Label: "   " + n})
		}
		vs = append(vs, chart.Value{Label: fmt.Sprintf("others %.1f%%", 100*small/total), Value: small,
			Style: chart.Style{FillColor: col, StrokeColor: drawing.ColorWhite, FontSize: 10}})
	}
	return chart.PieChart{Width: 1000, Height: 700, Values: vs,
		Background: chart.Style{Padding: chart.Box{Top: 70, Left: 20, Right: 300, Bottom: 20}},
		Elements:   []chart.Renderable{legend(entries), titleAbove(title)}}
}

// titleAbove draws a chart's title centred above its canvas box (go-chart's pie draws its own
// title inside the box, over the slices).
func titleAbove(title string) chart.Renderable {
	return func(r chart.Renderer, cb chart.Box, defaults chart.Style) {
		r.SetFont(defaults.GetFont())
		r.SetFontSize(13)
		r.SetFontColor(drawing.ColorFromHex("333333"))
		tb := r.MeasureText(title)
		r.Text(title, cb.Left+(cb.Width()-tb.Width())/2, cb.Top-24)
	}
}

// StackBar is one bar of shares.
type StackBar struct {
	Name   string
	Labels []string
	Shares []float64 // fractions summing to 1
}

// Stacks draws shares as 100% stacked bars, each label in its category's colour (the colour
// it has in every chart), the share axis on the left.
func Stacks(title string, bars []StackBar, labelOrder []string) chart.StackedBarChart {
	colour := map[string]drawing.Color{}
	for i, l := range labelOrder {
		colour[l] = CategoryColor(l, i)
	}
	var out []chart.StackedBar
	for _, b := range bars {
		var vs []chart.Value
		for i, l := range b.Labels {
			if b.Shares[i] <= 0 {
				continue
			}
			label := ""
			if b.Shares[i] >= 0.04 {
				label = fmt.Sprintf("%s %.0f%%", l, 100*b.Shares[i])
			}
			vs = append(vs, chart.Value{Label: label, Value: b.Shares[i], Style: chart.Style{FillColor: colour[l], StrokeColor: drawing.ColorWhite, FontSize: 8, FontColor: textOn(colour[l])}})
		}
		out = append(out, chart.StackedBar{Name: b.Name, Width: 110, Values: vs})
	}
	var entries []legendEntry
	for _, l := range labelOrder {
		for _, b := range bars {
			if i := indexOf(b.Labels, l); i >= 0 && b.Shares[i] > 0 {
				entries = append(entries, legendEntry{Label: l, Color: colour[l], Fill: true, Solid: true})
				break
			}
		}
	}
	return chart.StackedBarChart{Title: title, TitleStyle: chart.Style{FontSize: 13}, Width: 1200, Height: 640, BarSpacing: 40, Bars: out,
		Background: chart.Style{Padding: chart.Box{Top: 50, Left: 60, Right: 200, Bottom: 20}},
		XAxis:      chart.Style{FontSize: 9}, YAxis: chart.Hidden(),
		Elements: []chart.Renderable{legend(entries), leftTicks("share", 0, 1, func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) })}}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// Histogram is one tensor's weight histogram for the grid.
type Histogram struct {
	Name   string
	Lo, Hi float64
	Counts []int64
}

// HistogramGrid renders up to cols x rows small histograms into one PNG.
func HistogramGrid(w io.Writer, hs []Histogram, cols int) error {
	if len(hs) == 0 {
		return fmt.Errorf("no histograms")
	}
	const cw, ch = 360, 240
	rows := (len(hs) + cols - 1) / cols
	grid := image.NewRGBA(image.Rect(0, 0, cols*cw, rows*ch))
	draw.Draw(grid, grid.Bounds(), &image.Uniform{color.White}, image.Point{}, draw.Src)
	for i, h := range hs {
		var vs []chart.Value
		for _, c := range h.Counts {
			vs = append(vs, chart.Value{Value: float64(c), Style: chart.Style{FillColor: colorAt(0), StrokeColor: colorAt(0)}})
		}
		var top float64
		for _, c := range h.Counts {
			top = math.Max(top, float64(c))
		}
		if top == 0 {
			top = 1
		}
		// counts from zero on a left axis; bins labelled by their value
		const barW, barS = 6, 2
		bc := chart.BarChart{Title: shorten(h.Name, 44), TitleStyle: chart.Style{FontSize: 8}, Width: cw, Height: ch, BarWidth: barW, BarSpacing: barS,
			Background: chart.Style{Padding: chart.Box{Top: 34, Left: 44, Right: 6, Bottom: 22}},
			XAxis:      chart.Hidden(),
			YAxis:      chart.YAxis{Style: chart.Hidden(), Range: &chart.ContinuousRange{Min: 0, Max: top * 1.05}},
			Elements: []chart.Renderable{leftTicks("count", 0, top*1.05, tickCount),
				valueAxis(h.Lo, h.Hi, len(h.Counts)*(barW+barS))}, Bars: vs}
		var buf bytes.Buffer
		if err := bc.Render(chart.PNG, &buf); err != nil {
			return fmt.Errorf("histogram %s: %w", h.Name, err)
		}
		img, err := png.Decode(&buf)
		if err != nil {
			return err
		}
		at := image.Pt((i%cols)*cw, (i/cols)*ch)
		draw.Draw(grid, image.Rectangle{Min: at, Max: at.Add(img.Bounds().Size())}, img, img.Bounds().Min, draw.Over)
	}
	return png.Encode(w, grid)
}

// valueAxis draws a histogram's value axis under its bars (width px from the canvas's left
// edge, as go-chart lays the bars out): lo, hi and zero when it lies between.
func valueAxis(lo, hi float64, width int) chart.Renderable {
	return func(r chart.Renderer, cb chart.Box, defaults chart.Style) {
		axisPen(r, defaults, 7)
		r.MoveTo(cb.Left, cb.Bottom)
		r.LineTo(cb.Left+width, cb.Bottom)
		r.Stroke()
		vals := []float64{lo, hi}
		if lo < 0 && hi > 0 {
			vals = append(vals, 0)
		}
		for _, v := range vals {
			x := cb.Left + int(math.Round((v-lo)/(hi-lo)*float64(width)))
			if hi <= lo {
				x = cb.Left
			}
			r.MoveTo(x, cb.Bottom)
			r.LineTo(x, cb.Bottom+4)
			r.Stroke()
			label := strconv.FormatFloat(v, 'g', 3, 64)
			tb := r.MeasureText(label)
			r.Text(label, x-tb.Width()/2, cb.Bottom+6+tb.Height())
		}
	}
}

// tickCount writes a count compactly: 950, 12k, 3.4M.
func tickCount(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return tickNumber(v)
}

// shorten keeps the last n-1 runes of s behind an ellipsis (never cutting a rune in half).
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

// Renderer is any go-chart chart.
type Renderer interface {
	Render(rp chart.RendererProvider, w io.Writer) error
}

// RenderPNG and RenderSVG write a chart.
func RenderPNG(c Renderer, w io.Writer) error { return c.Render(chart.PNG, w) }

// RenderSVG writes a chart as SVG. go-chart writes text into <text> elements verbatim, so a
// model named "<script>…" would plant markup: every string is XML-escaped on its way in.
func RenderSVG(c Renderer, w io.Writer) error { return c.Render(safeSVG, w) }

func safeSVG(width, height int) (chart.Renderer, error) {
	r, err := chart.SVG(width, height)
	if err != nil {
		return nil, err
	}
	return escapingRenderer{r}, nil
}

// escapingRenderer escapes text for XML; measuring still sees the text as drawn.
type escapingRenderer struct{ chart.Renderer }

func (e escapingRenderer) Text(body string, x, y int) { e.Renderer.Text(XMLText(body), x, y) }

// XMLText escapes s for XML character data: markup characters as entities, and characters
// XML 1.0 cannot carry at all (control characters, invalid UTF-8) as U+FFFD.
func XMLText(s string) string {
	var b strings.Builder
	if err := xml.EscapeText(&b, []byte(s)); err != nil {
		return "\uFFFD"
	}
	return b.String()
}
