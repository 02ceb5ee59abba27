package chart

import (
	"fmt"

	gochart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"
)

// Colors gives a label its colour; i is the label's position, for labels without a fixed
// colour. The caller decides, so one label keeps its colour across charts.
type Colors func(label string, i int) drawing.Color

// Pie is a pie of shares. Slices under 1.5% are merged into "others" (coloured as the label
// "others") so labels never collide; the legend lists exactly the slices drawn, in their
// colours, and names what "others" holds. The title is drawn above the pie's box, not over it.
func Pie(title string, labels []string, values []float64, color Colors) gochart.PieChart {
	var total float64
	for _, v := range values {
		total += v
	}
	var vs []gochart.Value
	var entries []LegendEntry
	var small float64
	var smallNames []string
	for i := range labels {
		col := color(labels[i], i)
		if values[i]/total < 0.015 {
			small += values[i]
			smallNames = append(smallNames, fmt.Sprintf("%s %.2f%%", labels[i], 100*values[i]/total))
			continue
		}
		entries = append(entries, LegendEntry{Label: fmt.Sprintf("%s %.2f%%", labels[i], 100*values[i]/total), Color: col, Fill: true, Solid: true})
		vs = append(vs, gochart.Value{Label: fmt.Sprintf("%s %.1f%%", labels[i], 100*values[i]/total), Value: values[i],
			Style: gochart.Style{FillColor: col, StrokeColor: drawing.ColorWhite, FontSize: 10, FontColor: textOn(col)}})
	}
	if small > 0 {
		col := color("others", len(labels))
		label := fmt.Sprintf("others %.2f%%", 100*small/total)
		entries = append(entries, LegendEntry{Label: label + ":", Color: col, Fill: true, Solid: true})
		for _, n := range smallNames { // one per line: a long list would run off the image
			entries = append(entries, LegendEntry{Label: "   " + n})
		}
		vs = append(vs, gochart.Value{Label: fmt.Sprintf("others %.1f%%", 100*small/total), Value: small,
			Style: gochart.Style{FillColor: col, StrokeColor: drawing.ColorWhite, FontSize: 10}})
	}
	return gochart.PieChart{Width: 1000, Height: 700, Values: vs,
		Background: gochart.Style{Padding: gochart.Box{Top: 70, Left: 20, Right: 300, Bottom: 20}},
		Elements:   []gochart.Renderable{Legend(entries), titleAbove(title)}}
}

// titleAbove draws a chart's title centred above its canvas box (go-chart's pie draws its own
// title inside the box, over the slices).
func titleAbove(title string) gochart.Renderable {
	return func(r gochart.Renderer, cb gochart.Box, defaults gochart.Style) {
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

// Stacks draws shares as 100% stacked bars, each label in its colour, the share axis on the
// left.
func Stacks(title string, bars []StackBar, labelOrder []string, color Colors) gochart.StackedBarChart {
	colour := map[string]drawing.Color{}
	for i, l := range labelOrder {
		colour[l] = color(l, i)
	}
	var out []gochart.StackedBar
	for _, b := range bars {
		var vs []gochart.Value
		for i, l := range b.Labels {
			if b.Shares[i] <= 0 {
				continue
			}
			label := ""
			if b.Shares[i] >= 0.04 {
				label = fmt.Sprintf("%s %.0f%%", l, 100*b.Shares[i])
			}
			vs = append(vs, gochart.Value{Label: label, Value: b.Shares[i], Style: gochart.Style{FillColor: colour[l], StrokeColor: drawing.ColorWhite, FontSize: 8, FontColor: textOn(colour[l])}})
		}
		out = append(out, gochart.StackedBar{Name: b.Name, Width: 110, Values: vs})
	}
	var entries []LegendEntry
	for _, l := range labelOrder {
		for _, b := range bars {
			if i := indexOf(b.Labels, l); i >= 0 && b.Shares[i] > 0 {
				entries = append(entries, LegendEntry{Label: l, Color: colour[l], Fill: true, Solid: true})
				break
			}
		}
	}
	return gochart.StackedBarChart{Title: title, TitleStyle: gochart.Style{FontSize: 13}, Width: 1200, Height: 640, BarSpacing: 40, Bars: out,
		Background: gochart.Style{Padding: gochart.Box{Top: 50, Left: 60, Right: 200, Bottom: 20}},
		XAxis:      gochart.Style{FontSize: 9}, YAxis: gochart.Hidden(),
		Elements: []gochart.Renderable{Legend(entries), LeftTicks("share", 0, 1, func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) })}}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}
