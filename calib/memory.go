package calib

import (
	"fmt"
	"math"
	"sort"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/layout"
)

// MemoryResult is one training row's measured peak memory beside the memory model's.
type MemoryResult struct {
	ID       string        `json:"id"`
	Source   string        `json:"source"`
	Layout   string        `json:"layout"`
	Measured float64       `json:"measured_gib"`
	Stat     string        `json:"stat"`          // what was measured: reserved or allocated
	Model    float64       `json:"predicted_gib"` // the same reading by the memory model
	RelErr   float64       `json:"rel_err"`
	LOOErr   float64       `json:"loo_rel_err"` // with the allocator share fitted without this row
	Fit      layout.Fit    `json:"fit"`         // the verdict at the chip's capacity
	Memory   layout.Memory `json:"memory"`
	Dominant string        `json:"dominant_term"` // the largest term
}

// MemoryFit is the allocator share fitted to measured peaks and the errors it leaves.
type MemoryFit struct {
	AllocatorShare float64        `json:"allocator_share"`
	Median, Worst  float64        `json:"-"`
	LOOMedian      float64        `json:"loo_median_abs_err"`
	LOOWorst       float64        `json:"loo_worst_abs_err"`
	LOOP90         float64        `json:"loo_p90_abs_err"`
	Rows           []MemoryResult `json:"rows"`
}

// FitMemory fits the caching allocator's share of the per-step memory (layout.AllocatorShare) to
// rows with a measured peak, by least squares on the relative error: the measured reading M is
// the allocated peak A plus share x the dynamic memory D, so share = Σ(D/M)(1 - A/M) / Σ(D/M)².
// Errors are reported in-sample and leave-one-row-out (the share refitted without the row).
func FitMemory(rows []Row, db *chips.DB, models Models) (MemoryFit, error) {
	type point struct {
		r    Row
		mem  layout.Memory
		chip chips.Chip
		a, d float64 // allocated (less the allocator term) and dynamic, GiB
	}
	var pts []point
	cache := map[string]*analyzer.Model{}
	for _, r := range rows {
		if r.MemoryGiB <= 0 || (r.Kind != KindTrainStep && r.Kind != KindTrainMemory) {
			continue
		}
		chip, err := db.Lookup(r.Chip)
		if err != nil {
			return MemoryFit{}, fmt.Errorf("row %s: %w", r.ID, err)
		}
		m, err := rowModel(cache, models, r)
		if err != nil {
			return MemoryFit{}, err
		}
		l := r.Layout()
		if err := l.Validate(m.Fingerprint); err != nil {
			return MemoryFit{}, fmt.Errorf("row %s: %w", r.ID, err)
		}
		mem := layout.TrainingMemory(m, l)
		a := mem.Allocated()
		if r.MemoryStat == "device" {
			a += mem.Runtime // nvidia-smi counts the CUDA context beside the allocator's pool
		}
		pts = append(pts, point{r: r, mem: mem, chip: chip, a: a / (1 << 30), d: mem.Dynamic() / (1 << 30)})
	}
	if len(pts) == 0 {
		return MemoryFit{}, fmt.Errorf("no training rows with a measured memory_gib")
	}
	fit := func(skip int) float64 {
		var num, den float64
		for i, p := range pts {
			if i == skip || p.r.MemoryStat == "allocated" {
				continue
			}
			x := p.d / p.r.MemoryGiB
			num += x * (1 - p.a/p.r.MemoryGiB)
			den += x * x
		}
		if den == 0 {
			return 0
		}
		return num / den
	}
	predict := func(p point, share float64) float64 {
		if p.r.MemoryStat == "allocated" {
			return p.a
		}
		return p.a + share*p.d
	}
	out := MemoryFit{AllocatorShare: fit(-1)}
	var errs, loo []float64
	for i, p := range pts {
		pred := predict(p, out.AllocatorShare)
		res := MemoryResult{ID: p.r.ID, Source: p.r.Source, Layout: describeLayout(p.r.Layout()), Measured: p.r.MemoryGiB,
			Stat: p.r.MemoryStat, Model: pred, RelErr: pred/p.r.MemoryGiB - 1, LOOErr: predict(p, fit(i))/p.r.MemoryGiB - 1,
			Memory: p.mem, Fit: layout.CheckTraining("training", p.mem, p.chip.MemoryBytes())}
		var big float64
		for _, t := range p.mem.Terms() {
			if t.Bytes > big {
				big, res.Dominant = t.Bytes, t.Name
			}
		}
		errs = append(errs, math.Abs(res.RelErr))
		loo = append(loo, math.Abs(res.LOOErr))
		out.Rows = append(out.Rows, res)
	}
	out.Median, out.Worst = quantile(errs, 0.5), quantile(errs, 1)
	out.LOOMedian, out.LOOWorst, out.LOOP90 = quantile(loo, 0.5), quantile(loo, 1), quantile(loo, 0.9)
	return out, nil
}

// MemoryReading is what a memory reading reports of the model's memory, in bytes: allocated
// (torch.cuda.max_memory_allocated), reserved (max_memory_reserved: the allocator's pool; the
// default) or device (nvidia-smi: the pool and the CUDA context beside it).
func MemoryReading(m layout.Memory, stat string) float64 {
	switch stat {
	case "allocated":
		return m.Allocated()
	case "device":
		return m.Total
	}
	return m.Reserved()
}

// quantile is the q-quantile of xs by the nearest rank (q = 1: the largest).
func quantile(xs []float64, q float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func describeLayout(l layout.Layout) string {
	s := fmt.Sprintf("TP%d PP%d", l.TP, l.PP)
	if l.VP > 1 {
		s += fmt.Sprintf(" VP%d", l.VP)
	}
	if l.CP > 1 {
		s += fmt.Sprintf(" CP%d", l.CP)
	}
	fw := l.Framework
	if fw == "" {
		fw = layout.Megatron
	}
	return s + fmt.Sprintf(" DP%d %s ZeRO-%d MBS %d seq %d recompute %s", l.DP, fw, l.Stage(), l.MBS, l.Seq, orNone(l.Recompute))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
