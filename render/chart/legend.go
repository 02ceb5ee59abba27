package chart

import (
	"math"

	gochart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"
)

// LegendEntry is one line of a chart's legend.
type LegendEntry struct {
	Label string
	Color drawing.Color
	Dot   bool // a marker; otherwise a line (dashed when Dash)
	Dash  []float64
	Fill  bool // a shaded region (pale, as the shading it names)
	Solid bool // with Fill: a solid swatch (a slice or a bar segment)
}

// legend draws entries in a column to the right of the plot, so it never hides a point
// (go-chart's own legends sit on the canvas and list every series, shading included).
func Legend(entries []LegendEntry) gochart.Renderable {
	return func(r gochart.Renderer, cb gochart.Box, defaults gochart.Style) {
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

func GridLines(ticks []gochart.Tick) []gochart.GridLine {
	var out []gochart.GridLine
	for _, t := range ticks {
		out = append(out, gochart.GridLine{Value: t.Value})
	}
	return out
}

func Dash(i int) []float64 {
	if i == 0 {
		return nil
	}
	return []float64{6, 3 + float64(i)}
}

func Clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }
