package calib

import (
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/examples"
	"github.com/mrep-dev/mrep/layout"
)

// The fine-tuning stacks' memory against published peaks (calib/finetune.json): the shipped
// allocator share (fitted to torchtitan's peaks) refitted to these rows stays within 0.05 of it;
// leave-one-source-out (the share refitted without a source, its rows predicted) median |error|
// within 15%; and every run that ran fits or is tight, never "does not fit".
func TestFineTuneMemoryAgainstPublishedPeaks(t *testing.T) {
	rows := FineTuneSet()
	f, err := FitMemory(rows, chips.Default(), examples.Decode)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(f.AllocatorShare-layout.AllocatorShare) > 0.05 {
		t.Errorf("the fine-tune rows' allocator share %.3f is far from the shipped %.3f: the stacks' mechanisms are off", f.AllocatorShare, layout.AllocatorShare)
	}
	// a source is a publisher's repository (PEFT's docs and its MetaMathQA results are one)
	pub := func(r Row) string { return strings.Fields(r.Source)[0] }
	sources := map[string][]Row{}
	for _, r := range rows {
		sources[pub(r)] = append(sources[pub(r)], r)
	}
	var loso []float64
	for src := range sources {
		var rest []Row
		for _, r := range rows {
			if pub(r) != src {
				rest = append(rest, r)
			}
		}
		fit, err := FitMemory(rest, chips.Default(), examples.Decode)
		if err != nil {
			t.Fatal(err)
		}
		held, err := FitMemory(sources[src], chips.Default(), examples.Decode)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range held.Rows {
			pred := MemoryReading(r.Memory, r.Stat)/(1<<30) + (fit.AllocatorShare-layout.AllocatorShare)*r.Memory.Dynamic()/(1<<30)
			loso = append(loso, math.Abs(pred/r.Measured-1))
		}
	}
	sort.Float64s(loso)
	med := loso[len(loso)/2]
	var abs []float64
	for _, r := range f.Rows {
		abs = append(abs, math.Abs(r.RelErr))
		t.Logf("%-58s measured %5.1f  model %5.1f GiB  %+6.1f%%  (%s)", r.ID, r.Measured, r.Model, 100*r.RelErr, r.Dominant)
	}
	sort.Float64s(abs)
	t.Logf("%d rows from %d sources: allocator share refitted %.3f (shipped %.3f); |error| median %.1f%%; leave-one-source-out median %.1f%%, worst %.1f%%",
		len(rows), len(sources), f.AllocatorShare, layout.AllocatorShare, 100*abs[len(abs)/2], 100*med, 100*loso[len(loso)-1])
	if med > 0.15 || abs[len(abs)/2] > 0.15 {
		t.Errorf("median |error| %.3f, leave-one-source-out %.3f: want <= 0.15", abs[len(abs)/2], med)
	}
	ps, err := Prepare(rows, chips.Default(), examples.Decode)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if !p.Fits {
			t.Errorf("%s ran, but: %s", p.Row.ID, p.FitNote)
		}
	}
}

// The fine-tuning lanes' time against published SFT and LoRA runs (calib/finetune_time.json:
// NeMo 24.07, Megatron-Bridge 26.06, dgxc-benchmarking v25.04, NeMo AutoModel), none of them
// fitted: the pre-training lanes and the stacks' mechanisms alone. Issue 33's goal: median
// |error| <= 15% per lane (framework x chip family), every row predicted, none faster than its
// roofline, and no run that ran called "does not fit" but the one known below.
func TestFineTuneTimeAgainstPublishedRuns(t *testing.T) {
	rep, err := Validate(prepared(t, FineTuneTimeSet()), nil)
	if err != nil {
		t.Fatal(err)
	}
	// NeMo 1.0's Llama-2-70B SFT on TP4 PP4 (DP 1: nothing to shard the optimizer over) counts
	// 1.31x the H100's memory: Megatron's 18 bytes per parameter on 4.3 B parameters alone are
	// 72 GiB. NeMo 1.0 ran Apex's DistributedFusedAdam (16-bit parameter remainders instead of
	// fp32 masters), which mrep does not model, and that still leaves it over.
	misfit := map[string]bool{"FT-nemo-24.07-llama-2-70b-sft-h100x16-fp8": true}
	s := rep.Summary["training"]
	if s.Rows != len(FineTuneTimeSet()) {
		t.Errorf("%d of %d rows predicted", s.Rows, len(FineTuneTimeSet()))
	}
	for _, r := range rep.Rows {
		if r.Skipped != "" {
			t.Errorf("%s skipped: %s", r.ID, r.Skipped)
		}
		if r.FasterThanPhysics {
			t.Errorf("%s: predicted %g beyond the roofline %g", r.ID, r.Predicted, r.Roofline)
		}
		if !r.Fits != misfit[r.ID] {
			t.Errorf("%s: fits %v, want %v", r.ID, r.Fits, !misfit[r.ID])
		}
	}
	for _, l := range rep.Lanes {
		t.Logf("%-32s %2d rows: median ratio %.3f, median |err| %.1f%%, worst %.1f%%", l.Group, l.Rows, l.MedianRatio, 100*l.MedianAbsErr, 100*l.WorstAbsErr)
		if l.MedianAbsErr > 0.15 {
			t.Errorf("lane %s: median |err| %.1f%% over 15%%", l.Group, 100*l.MedianAbsErr)
		}
	}
	if s.MedianAbsErr > 0.15 || s.WorstAbsErr > 0.25 {
		t.Errorf("fine-tune step times: median |err| %.1f%%, worst %.1f%%: over 15%% / 25%%", 100*s.MedianAbsErr, 100*s.WorstAbsErr)
	}
}
