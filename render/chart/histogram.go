package chart

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"

	gochart "github.com/wcharczuk/go-chart/v2"
)

// Histogram is one cell of the grid: counts in equal bins over [Lo, Hi].
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
		var vs []gochart.Value
		for _, c := range h.Counts {
			vs = append(vs, gochart.Value{Value: float64(c), Style: gochart.Style{FillColor: ColorAt(0), StrokeColor: ColorAt(0)}})
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
		bc := gochart.BarChart{Title: shorten(h.Name, 44), TitleStyle: gochart.Style{FontSize: 8}, Width: cw, Height: ch, BarWidth: barW, BarSpacing: barS,
			Background: gochart.Style{Padding: gochart.Box{Top: 34, Left: 44, Right: 6, Bottom: 22}},
			XAxis:      gochart.Hidden(),
			YAxis:      gochart.YAxis{Style: gochart.Hidden(), Range: &gochart.ContinuousRange{Min: 0, Max: top * 1.05}},
			Elements: []gochart.Renderable{LeftTicks("count", 0, top*1.05, tickCount),
				valueAxis(h.Lo, h.Hi, len(h.Counts)*(barW+barS))}, Bars: vs}
		var buf bytes.Buffer
		if err := bc.Render(gochart.PNG, &buf); err != nil {
			return fmt.Errorf("histogram %s: %w", h.Name, err)
		}
		img, err := png.Decode(&buf)
		if err != nil {
			return fmt.Errorf("histogram %s: %w", h.Name, err)
		}
		at := image.Pt((i%cols)*cw, (i/cols)*ch)
		draw.Draw(grid, image.Rectangle{Min: at, Max: at.Add(img.Bounds().Size())}, img, img.Bounds().Min, draw.Over)
	}
	return png.Encode(w, grid)
}

// valueAxis draws a histogram's value axis under its bars (width px from the canvas's left
// edge, as go-chart lays the bars out): lo, hi and zero when it lies between.
func valueAxis(lo, hi float64, width int) gochart.Renderable {
	return func(r gochart.Renderer, cb gochart.Box, defaults gochart.Style) {
		axisPen(r, defaults, 7)
		r.MoveTo(cb.Left, cb.Bottom)
		r.LineTo(cb.Left+width, cb.Bottom)
		r.Stroke()
		vals := []float64{lo, hi} // the ends, and round values between
		if hi > lo {
			for _, v := range niceTicks(lo, hi, 4) {
				if v > lo+0.08*(hi-lo) && v < hi-0.08*(hi-lo) {
					vals = append(vals, v)
				}
			}
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
	return TickNumber(v)
}

// shorten keeps the last n-1 runes of s behind an ellipsis (never cutting a rune in half).
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}
