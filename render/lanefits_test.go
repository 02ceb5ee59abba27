package render

import (
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/calib"
	"github.com/mrep-dev/mrep/layout"
)

// calibrate --lanes lists each jointly fitted MoE figure once, with its value and fit set, below
// the chips' own fits; a fit set's text is escaped like every other name in the table.
func TestLaneFitsListPooledFiguresOnce(t *testing.T) {
	src := "fitted jointly to the 14 megatron MoE training rows on Blackwell chips (B200, GB200|x)"
	fits := []calib.LaneFit{
		{Lane: calib.LaneKey{Framework: "megatron", Chip: "B200"}, Rows: 4, Params: map[string]float64{"gemm_frac.fp8": 0.44, "grouped_gemm_frac": 0.4884},
			Pooled: map[string]string{"grouped_gemm_frac": src}},
		{Lane: calib.LaneKey{Framework: "megatron", Chip: "GB200"}, Rows: 4, Params: map[string]float64{"gemm_frac.fp8": 0.46, "grouped_gemm_frac": 0.4884},
			Pooled: map[string]string{"grouped_gemm_frac": src}},
		{Lane: calib.LaneKey{Framework: "fsdp", Chip: "A100-SXM"}, Rows: 7, Params: map[string]float64{"gemm_frac.bf16": 0.7}},
	}
	var b strings.Builder
	if err := WriteLaneFits(&b, fits, nil); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if n := strings.Count(out, "| `grouped_gemm_frac` | 0.4884 |"); n != 1 {
		t.Errorf("the pooled figure is listed %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, `GB200\|x`) {
		t.Errorf("the fit set's pipe is not escaped:\n%s", out)
	}
	if !strings.Contains(out, "Fitted jointly over the chips that share them") {
		t.Errorf("no pooled section:\n%s", out)
	}
	var none strings.Builder
	if err := WriteLaneFits(&none, fits[2:], nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(none.String(), "jointly") {
		t.Errorf("a pooled section without pooled figures:\n%s", none.String())
	}
}

// A training step the host bounds says so, with how much, its pace and the knobs that move it;
// one the host does not bound (or barely) says nothing of it.
func TestLayoutsNameTheHostBound(t *testing.T) {
	l := layout.Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, MBS: 1, GBS: 8, Seq: 4096}
	r := LayoutResult{Target: "GB200 bf16", Step: layout.Step{Layout: l, StepTime: 0.447, Microbatch: 0.444, Kernels: 0.412, HostBound: 0.291},
		Fit: layout.Fit{Fits: true}}
	var b strings.Builder
	if err := WriteLayouts(&b, []LayoutResult{r}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "of the kernels' 412.0 ms, 291.0 ms is the host issuing the MoE layers' kernels eagerly") || !strings.Contains(b.String(), "`--cuda-graph`") {
		t.Errorf("the host bound is not named:\n%s", b.String())
	}
	if strings.Contains(b.String(), "kernels per MoE layer") {
		t.Errorf("a pace quoted with none given:\n%s", b.String())
	}
	// with the pace the step was timed with, the sentence quotes it and the knobs that move it
	r.HostPaceUs, r.MoELaunches = 53.8, 156
	b.Reset()
	if err := WriteLayouts(&b, []LayoutResult{r}); err != nil {
		t.Fatal(err)
	}
	if want := "It issues 156 kernels per MoE layer and micro-batch at 53.8 µs each (the lane's host pace); a larger micro-batch (fewer micro-batches) or more expert parallelism (fewer local experts) shortens the host's share, and a full-iteration CUDA graph"; !strings.Contains(b.String(), want) {
		t.Errorf("the pace and its knobs are not named:\n%s", b.String())
	}
	// on AMD Instinct the stack's own remedy is Primus-Turbo's sync-free MoE
	r.HostRemedy = layout.HostRemedy("AMD")
	b.Reset()
	if err := WriteLayouts(&b, []LayoutResult{r}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "sync-free MoE") || strings.Contains(b.String(), "cuda-graph-impl") {
		t.Errorf("an Instinct target's remedy:\n%s", b.String())
	}
	// a sync-free step waits on nothing: its host's launches alone bound it, and the sync-free
	// remedy it already runs is not offered again
	sf := r
	sf.Step.Layout.SyncFreeMoE, sf.Step.Layout.GroupedGEMM, sf.Step.Layout.Dispatcher = 2, layout.GroupedTurbo, layout.DispatchDeepEP
	b.Reset()
	if err := WriteLayouts(&b, []LayoutResult{sf}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "(sync-free: no layer waits on the host") || strings.Contains(out, "copies its token counts") || strings.Contains(out, "--sync-free-moe 2") {
		t.Errorf("a sync-free step's host bound:\n%s", out)
	}
	r.Step.HostBound = 0.01
	b.Reset()
	if err := WriteLayouts(&b, []LayoutResult{r}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "host bounds") {
		t.Errorf("a 2%% host share is named:\n%s", b.String())
	}
}

// A step whose low-precision casts weigh says so, with their time and how the recipe casts;
// one whose casts are small says nothing of them.
func TestLayoutsNameTheCasts(t *testing.T) {
	l := layout.Layout{Framework: layout.FSDP, TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 1, GBS: 8, Seq: 4096, Precision: "fp8-cs"}
	r := LayoutResult{Target: "H100-SXM fp8", Step: layout.Step{Layout: l, StepTime: 1.056, Microbatch: 1.044, Kernels: 1.044, Casts: 0.7056},
		Fit: layout.Fit{Fits: true}}
	var b strings.Builder
	if err := WriteLayouts(&b, []LayoutResult{r}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "The fp8-cs casts take 705.6 ms of the kernels (67% of the step)") || !strings.Contains(b.String(), "--compile fuses them") {
		t.Errorf("the casts are not named:\n%s", b.String())
	}
	r.Step.Casts = 0.02
	b.Reset()
	if err := WriteLayouts(&b, []LayoutResult{r}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "casts take") {
		t.Errorf("a 2%% cast share is named:\n%s", b.String())
	}
}

// A legacy grouped GEMM under an FP8 recipe says its experts stay 16-bit and what the quantizing
// path's step would be; a 16-bit recipe or another grouped GEMM says nothing of it.
func TestLayoutsNameTheLegacyExperts(t *testing.T) {
	l := layout.Layout{Framework: layout.Megatron, TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 8, GBS: 512, Seq: 4096,
		Precision: "fp8-cs", GroupedGEMM: layout.GroupedLegacy}
	r := LayoutResult{Target: "MI355X fp8", Step: layout.Step{Layout: l, StepTime: 9.5, Microbatch: 1.18, Kernels: 9.4},
		Fit: layout.Fit{Fits: true}, QuantizedExpertsStep: 8.25}
	for _, c := range []struct {
		prec, gg string
		want     bool
	}{{"fp8-cs", layout.GroupedLegacy, true}, {"", layout.GroupedLegacy, false}, {"fp8-cs", layout.GroupedTE, false}} {
		r.Step.Layout.Precision, r.Step.Layout.GroupedGEMM = c.prec, c.gg
		var b strings.Builder
		if err := WriteLayouts(&b, []LayoutResult{r}); err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(b.String(), "The legacy grouped GEMM runs the routed experts' GEMMs in 16 bits under the fp8-cs recipe") &&
			strings.Contains(b.String(), "a step of 8.250 s")
		if got != c.want {
			t.Errorf("%q recipe, %q grouped GEMM: legacy sentence %v, want %v:\n%s", c.prec, c.gg, got, c.want, b.String())
		}
	}
}
