package calib

import (
	"math"
	"testing"

	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/examples"
	"github.com/mrep-dev/mrep/layout"
)

// The memory model against torchtitan's measured peaks (every row of its Llama 3.1 tables):
// median |error| within 10%, the worst within 20%, leave-one-row-out too; the shipped allocator
// share is the fit and the shipped uncertainty band is the leave-one-out 90th percentile.
func TestMemoryModelAgainstMeasuredPeaks(t *testing.T) {
	rows := MemorySet()
	if len(rows) != 18 {
		t.Fatalf("torchtitan's six tables have 18 rows, the set has %d", len(rows))
	}
	f, err := FitMemory(rows, chips.Default(), examples.Decode)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Rows {
		t.Logf("%-34s measured %5.1f  model %5.1f GiB  %+5.1f%% (leave-one-out %+5.1f%%)  largest term: %s", r.ID, r.Measured, r.Model, 100*r.RelErr, 100*r.LOOErr, r.Dominant)
	}
	t.Logf("allocator share %.3f; |error| median %.1f%%, worst %.1f%%; leave-one-out median %.1f%%, p90 %.1f%%, worst %.1f%%",
		f.AllocatorShare, 100*f.Median, 100*f.Worst, 100*f.LOOMedian, 100*f.LOOP90, 100*f.LOOWorst)
	if f.Median > 0.10 || f.Worst > 0.20 || f.LOOMedian > 0.10 || f.LOOWorst > 0.20 {
		t.Errorf("median %.3f, worst %.3f, leave-one-out median %.3f, worst %.3f: want <= 0.10 and <= 0.20", f.Median, f.Worst, f.LOOMedian, f.LOOWorst)
	}
	if math.Abs(f.AllocatorShare-layout.AllocatorShare) > 0.005 {
		t.Errorf("layout.AllocatorShare %.3f is not the fit %.3f: update it", layout.AllocatorShare, f.AllocatorShare)
	}
	if math.Abs(f.LOOP90-layout.MemoryUncertainty) > 0.005 {
		t.Errorf("layout.MemoryUncertainty %.3f is not the leave-one-out p90 %.3f: update it", layout.MemoryUncertainty, f.LOOP90)
	}
}

// Every published run in the calibration sets ran, so under the configuration that matches
// its measured speed the memory model must say fits or tight, never does not fit.
func TestPublishedRunsFit(t *testing.T) {
	rows := append(Default(), MemorySet()...)
	ps, err := Prepare(rows, chips.Default(), examples.Decode)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range ps {
		if p.Skip != nil || p.Row.Kind != KindTrainStep {
			continue
		}
		n++
		if !p.Fits {
			t.Errorf("%s (%s) ran, but: %s", p.Row.ID, p.Row.Source, p.FitNote)
		}
	}
	if n < 30 {
		t.Errorf("only %d training rows checked", n)
	}
}
