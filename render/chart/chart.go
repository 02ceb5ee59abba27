// Package chart holds the go-chart helpers mrep's charts are made of: a true log axis,
// a colour-blind-safe palette, legends beside the plot, value axes on the left with round
// ticks, pies, 100% stacked bars, a histogram grid, and PNG/SVG output with every string
// XML-escaped in SVG.
//
// It knows nothing of mrep: no model, phase, chip or category appears here, and it imports
// no mrep package. What a chart shows (a roofline's ceilings, a category's colour, a plan's
// layouts) is decided in render/, which builds its charts from these parts.
package chart

import (
	"fmt"
	"math"

	gochart "github.com/wcharczuk/go-chart/v2"
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

// String implements gochart.Range.
func (r LogRange) String() string {
	return fmt.Sprintf("LogRange [%g,%g] => %d", r.Min, r.Max, r.Domain)
}

// IsZero implements gochart.Range.
func (r LogRange) IsZero() bool { return r.Min <= 0 || r.Max <= 0 }

// GetMin implements gochart.Range.
func (r LogRange) GetMin() float64 { return r.Min }

// SetMin implements gochart.Range.
func (r *LogRange) SetMin(v float64) { r.Min = v }

// GetMax implements gochart.Range.
func (r LogRange) GetMax() float64 { return r.Max }

// SetMax implements gochart.Range.
func (r *LogRange) SetMax(v float64) { r.Max = v }

// GetDelta implements gochart.Range.
func (r LogRange) GetDelta() float64 { return r.Max - r.Min }

// GetDomain implements gochart.Range.
func (r LogRange) GetDomain() int { return r.Domain }

// SetDomain implements gochart.Range.
func (r *LogRange) SetDomain(d int) { r.Domain = d }

// IsDescending implements gochart.Range.
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

// LogTicks are the powers of ten in [min, max], labelled 0.1, 1, 10 … 1000, 10⁴.
func LogTicks(min, max float64) []gochart.Tick {
	var ticks []gochart.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		v := math.Pow(10, e)
		if v < min*0.999 || v > max*1.001 {
			continue
		}
		ticks = append(ticks, gochart.Tick{Value: v, Label: powerLabel(int(e))})
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

func ColorAt(i int) drawing.Color { return Palette[i%len(Palette)] }
