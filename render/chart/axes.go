package chart

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mrep-dev/mrep/internal/units"
	gochart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"
)

// Chart conventions every chart follows (what readers of plots expect): the value axis on the
// left, its name written horizontally above it; log ticks written 0.01 … 1000, then 10⁴;
// legends beside the plot, never over the data.

// textOn is black or white, whichever reads on fill.
func textOn(fill drawing.Color) drawing.Color {
	if 0.299*float64(fill.R)+0.587*float64(fill.G)+0.114*float64(fill.B) < 110 {
		return drawing.ColorWhite
	}
	return drawing.ColorBlack
}

var superscript = strings.NewReplacer("-", "⁻", "0", "⁰", "1", "¹", "2", "²", "3", "³", "4", "⁴", "5", "⁵", "6", "⁶", "7", "⁷", "8", "⁸", "9", "⁹")

// powerLabel writes 10^e as people read it: 0.01, 0.1, 1, 10, 100, 1000, then 10⁴.
func powerLabel(e int) string {
	if e >= -2 && e <= 3 {
		return strconv.FormatFloat(math.Pow(10, float64(e)), 'f', max(0, -e), 64)
	}
	return "10" + superscript.Replace(strconv.Itoa(e))
}

// LeftAxis moves a chart's value axis to the left (go-chart draws the primary one on the
// right): every series plots against the secondary axis, which takes the primary's range,
// ticks and grid; the axis name is written horizontally above the axis instead of rotated.
func LeftAxis(c *gochart.Chart) {
	name := c.YAxis.Name
	c.YAxisSecondary = c.YAxis
	c.YAxisSecondary.Name = ""
	// no series is left on the primary axis: hidden, with a range of its own (go-chart
	// refuses an axis whose range it cannot infer)
	// (and the same ticks: go-chart v2.1.2 sizes a ticked secondary axis from the primary's ticks)
	c.YAxis = gochart.YAxis{Style: gochart.Hidden(), Range: &gochart.ContinuousRange{Min: 0, Max: 1}, Ticks: c.YAxisSecondary.Ticks}
	for i, s := range c.Series {
		switch x := s.(type) {
		case gochart.ContinuousSeries:
			x.YAxis = gochart.YAxisSecondary
			c.Series[i] = x
		case gochart.AnnotationSeries:
			x.YAxis = gochart.YAxisSecondary
			c.Series[i] = x
		}
	}
	if name != "" {
		c.Elements = append(c.Elements, axisName(name))
	}
}

// axisName writes a value axis's name horizontally, above the axis's top-left corner.
func axisName(name string) gochart.Renderable {
	return func(r gochart.Renderer, cb gochart.Box, defaults gochart.Style) {
		r.SetFont(defaults.GetFont())
		r.SetFontSize(9)
		r.SetFontColor(drawing.ColorFromHex("333333"))
		r.Text(name, cb.Left-40, cb.Top-10)
	}
}

// LeftTicks draws a linear value axis on the left of a bar chart's canvas: go-chart's bar
// charts put theirs on the right. Values map as the bars do: y = bottom - (v-min)/(max-min) x height.
func LeftTicks(name string, min, max float64, format func(float64) string) gochart.Renderable {
	return func(r gochart.Renderer, cb gochart.Box, defaults gochart.Style) {
		axisPen(r, defaults, 8)
		r.MoveTo(cb.Left, cb.Top)
		r.LineTo(cb.Left, cb.Bottom)
		r.Stroke()
		for _, v := range niceTicks(min, max, 6) {
			y := cb.Bottom - int(math.Round((v-min)/(max-min)*float64(cb.Height())))
			r.MoveTo(cb.Left-4, y)
			r.LineTo(cb.Left, y)
			r.Stroke()
			label := format(v)
			tb := r.MeasureText(label)
			r.Text(label, cb.Left-8-tb.Width(), y+tb.Height()/2)
		}
		if name != "" {
			r.SetFontSize(9)
			r.Text(name, cb.Left-40, cb.Top-10)
		}
	}
}

// axisPen sets the font and stroke of an axis drawn by hand (the grey of go-chart's own).
func axisPen(r gochart.Renderer, defaults gochart.Style, fontSize float64) {
	r.SetFont(defaults.GetFont())
	r.SetFontSize(fontSize)
	r.SetFontColor(drawing.ColorFromHex("333333"))
	r.SetStrokeColor(drawing.ColorFromHex("333333"))
	r.SetStrokeWidth(1)
	r.SetStrokeDashArray(nil)
}

// niceTicks are about n round values (1, 2 or 5 times a power of ten apart) in [min, max].
func niceTicks(min, max float64, n int) []float64 {
	if max <= min {
		return []float64{min}
	}
	raw := (max - min) / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step := p
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	var out []float64
	for v := math.Ceil(min/step) * step; v <= max*(1+1e-9); v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

// TickNumber writes a tick value plainly (no exponent): 0, 0.25, 1.5, 40, 1,200.
func TickNumber(v float64) string {
	if v == 0 {
		return "0"
	}
	if math.Abs(v) >= 1e4 {
		return units.Comma(int64(math.Round(v)))
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if len(s) > 8 {
		s = fmt.Sprintf("%.3g", v)
	}
	return s
}

// niceRange is [min, max] widened to round ticks (1, 2 or 5 times a power of ten apart).
func niceRange(min, max float64) (lo, hi float64, ticks []gochart.Tick) {
	if max <= min {
		max = min + 1
	}
	vals := niceTicks(min, max, 6)
	step := 1.0
	if len(vals) > 1 {
		step = vals[1] - vals[0]
	}
	if vals[0] > min+1e-12*math.Abs(min) {
		vals = append([]float64{vals[0] - step}, vals...)
	}
	if top := vals[len(vals)-1]; top < max*(1-1e-9) {
		vals = append(vals, top+step)
	}
	for _, v := range vals {
		ticks = append(ticks, gochart.Tick{Value: v, Label: TickNumber(v)})
	}
	return vals[0], vals[len(vals)-1], ticks
}

// NiceAxis is a linear value axis over [min, max] with round ticks, written plainly.
func NiceAxis(name string, min, max float64) gochart.YAxis {
	lo, hi, ts := niceRange(min, max)
	return gochart.YAxis{Name: name, Range: &gochart.ContinuousRange{Min: lo, Max: hi}, Ticks: ts,
		GridMajorStyle: gochart.Style{StrokeColor: drawing.ColorFromHex("e8e8e8"), StrokeWidth: 1}, GridLines: GridLines(ts)}
}

// NiceXAxis is NiceAxis for the horizontal axis.
func NiceXAxis(name string, min, max float64) gochart.XAxis {
	lo, hi, ts := niceRange(min, max)
	return gochart.XAxis{Name: name, Range: &gochart.ContinuousRange{Min: lo, Max: hi}, Ticks: ts}
}
