package calib

import (
	"bytes"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/examples"
	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/mrep-dev/mrep/internal/testutil/bundled"
	"github.com/mrep-dev/mrep/layout"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/timing"
)

func prepared(t testing.TB, rows []Row) []Prepared {
	t.Helper()
	ps, err := Prepare(rows, chips.Default(), bundled.Resolve)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// statedMisfits are the published training runs whose stated layout the memory model says
// cannot run (issue 20's note): Llama-3.1-405B TP4 PP16 VP4 on GB200 (213 GiB counted against
// 186: the first stage's 8 layers x 19.75 micro-batches in flight, Megatron's own theoretical
// count) and GPT-OSS-120B on H100 at the table's MBS 4 (the release's preset says MBS 1). Each is
// predicted under the fastest setting its framework offers that fits (issue 34); a fix that
// makes one fit as stated fails this test until it is taken off. DeepSeek-V3 BF16 on 256 GB200
// came off when the routed experts' outputs stopped being counted as kept for the backward
// (Megatron weights the activation, and its combine keeps nothing).
var statedMisfits = map[string]bool{
	"MB25.11-LLAMA3.1_405B-gb200-256gpu-fp8-cs": true, "MB25.11-GPT_OSS_120B-h100-64gpu-bf16": true,
}

// The issue's thresholds, on the rows mrep can express (TTFT and static-batch throughput):
// median |err| <= 10%, worst <= 30% per phase, and no prediction beyond the roofline.
func TestShippedCalibrationSetMeetsThresholds(t *testing.T) {
	rep, err := Validate(prepared(t, Default()), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range []string{"ttft", "static_throughput"} {
		s, ok := rep.Summary[ph]
		if !ok || s.Rows < 4 {
			t.Fatalf("%s: %d rows predicted, want the 4 published ones", ph, s.Rows)
		}
		if s.MedianAbsErr > 0.10 || s.WorstAbsErr > 0.30 {
			t.Errorf("%s: median |err| %.1f%%, worst %.1f%%: over 10%% / 30%%", ph, 100*s.MedianAbsErr, 100*s.WorstAbsErr)
		}
	}
	for _, r := range rep.Rows {
		if r.Skipped != "" {
			if !strings.Contains(r.Skipped, "not expressible yet") {
				t.Errorf("%s skipped without the reason: %s", r.ID, r.Skipped)
			}
			continue
		}
		if r.FasterThanPhysics {
			t.Errorf("%s: predicted %g beyond the roofline %g", r.ID, r.Predicted, r.Roofline)
		}
		if !r.Fits {
			t.Errorf("%s: the measured run must fit in memory, as stated or under a setting its framework offers", r.ID)
		}
		if (r.FitsWith != nil) != statedMisfits[r.ID] {
			t.Errorf("%s: predicted under %+v; stated layout known not to fit: %v", r.ID, r.FitsWith, statedMisfits[r.ID])
		}
	}
	// every dense training lane on its fit set: median |err| <= 15%, MoE lanes <= 35% (issue
	// 20's note: the MoE lanes miss its 10%; Hopper's MoE lane fits three rows whose host pace
	// sits at its physical bound, MaxMoELaunchUs, where it used to sit at 100 us and absorb
	// GPT-OSS-120B's miss: 31.7% since); the dense lanes on Hopper (the
	// NeMo 70B rows, Megatron-Bridge's H100 table, torchtitan's FSDP benchmarks) within the
	// issue's 10% median and 25% worst
	for _, l := range rep.Lanes {
		if bound := map[bool]float64{false: 0.15, true: 0.35}[strings.Contains(l.Group, "MoE")]; l.MedianAbsErr > bound {
			t.Errorf("lane %s: median |err| %.1f%% over %.0f%%", l.Group, 100*l.MedianAbsErr, 100*bound)
		}
		// fsdp's worst is torchtitan's 8B CP2 row at 65k tokens, 27% slow while CP1 and CP4
		// are within 12%: issue 20's note
		worst := map[bool]float64{false: 0.25, true: 0.30}[strings.HasPrefix(l.Group, "fsdp")]
		if strings.Contains(l.Group, "dense Hopper") && (l.MedianAbsErr > 0.10 || l.WorstAbsErr > worst) {
			t.Errorf("lane %s: median %.1f%%, worst %.1f%%: over 10%% / %.0f%%", l.Group, 100*l.MedianAbsErr, 100*l.WorstAbsErr, 100*worst)
		}
	}
	if len(rep.Lanes) < 7 {
		t.Errorf("%d lanes, want megatron dense and MoE on Hopper, Blackwell and Blackwell Ultra and fsdp on Hopper", len(rep.Lanes))
	}
	// TensorRT-LLM max-throughput serving (offline, in-flight batching), held out of every fit
	// (no shipped figure was fitted to these rows): issue 12's median |err| <= 15%, worst <= 35%
	if s := rep.Summary["serving"]; s.Rows != 20 || s.MedianAbsErr > 0.15 || s.WorstAbsErr > 0.35 {
		t.Errorf("serving: %+v", s)
	}
	// the NeMo Llama-3.1-70B rows (TP4 PP4 CP2 VP5) grow with DP as measured
	prev := map[string]float64{}
	for _, r := range rep.Rows {
		if !strings.HasPrefix(r.ID, "T-") {
			continue
		}
		prec := strings.Split(r.ID, "-")[2]
		if r.Predicted < prev[prec] {
			t.Errorf("%s: %g is shorter than the smaller DP's %g (weak scaling)", r.ID, r.Predicted, prev[prec])
		}
		prev[prec] = r.Predicted
	}
}

// The fit on part of the rows predicts the rest: leave-one-out over the shipped rows stays
// within the issue's worst-case bound of 30%... for all but the most latency-bound row, which
// alone pins the launch cost; and fitting moves the parameters toward the shipped ones.
func TestCalibrateRecoversTheShippedFit(t *testing.T) {
	var rows []Row
	for _, r := range Default() {
		if strings.HasPrefix(r.ID, "P-") { // the rows the shipped figures were fitted to
			rows = append(rows, r)
		}
	}
	ps := prepared(t, rows)
	// start from a deliberately wrong chip: GEMMs at full peak, no launch cost
	for i := range ps {
		e := ps[i].Chip.Efficiency
		e.GEMMFrac = map[string]float64{"bf16": 1, "fp8": 1}
		e.HostLaunchUs, e.StepOverheadUs = 0, 0
		ps[i].Chip.Efficiency = e
	}
	fits, err := Calibrate(ps, DefaultFit, "test rows")
	if err != nil {
		t.Fatal(err)
	}
	if len(fits) != 1 || fits[0].Chip != "H100-SXM" {
		t.Fatalf("fits: %+v", fits)
	}
	f := fits[0]
	shipped, _ := chips.Default().Lookup("H100-SXM")
	if got, want := f.Params["gemm_frac.fp8"], shipped.Efficiency.GEMMFrac["fp8"]; math.Abs(got-want) > 0.03 {
		t.Errorf("gemm_frac.fp8 fitted %.3f, shipped %.3f", got, want)
	}
	for _, ph := range []string{"ttft", "static_throughput"} {
		b, a := f.Before.Summary[ph], f.After.Summary[ph]
		if a.MedianAbsErr >= b.MedianAbsErr {
			t.Errorf("%s: fit did not improve the median error (%.3f -> %.3f)", ph, b.MedianAbsErr, a.MedianAbsErr)
		}
	}
	if len(f.LeaveOneOut) != 8 {
		t.Fatalf("leave-one-out rows: %d", len(f.LeaveOneOut))
	}
	var errs []float64
	for _, r := range f.LeaveOneOut {
		errs = append(errs, math.Abs(r.Err()))
	}
	if m := medianOf(errs); m > 0.15 {
		t.Errorf("leave-one-out median |err| %.1f%%: the fit does not generalise", 100*m)
	}
	if !strings.Contains(f.Efficiency.Sources["gemm_frac"], "fitted by mrep calibrate") {
		t.Errorf("fitted figures must say where they come from: %q", f.Efficiency.Sources["gemm_frac"])
	}
}

func medianOf(x []float64) float64 {
	y := append([]float64(nil), x...)
	for i := range y {
		for j := i + 1; j < len(y); j++ {
			if y[j] < y[i] {
				y[i], y[j] = y[j], y[i]
			}
		}
	}
	return median(y)
}

func TestBadRowsNameFileLineAndProblem(t *testing.T) {
	head := "id,kind,model,chip,dtype,tp,batch,isl,measured,unit\n"
	cases := []struct{ name, text, want string }{
		{"neg.csv", head + "a,ttft,Llama-2-7b,H100-SXM,fp8,1,1,128,-7,s\n", "neg.csv: line 2 (id \"a\"): measured must be a positive number"},
		{"zero.csv", head + "a,ttft,Llama-2-7b,H100-SXM,fp8,1,1,128,0,s\n", "line 2"},
		{"unit.csv", head + "a,ttft,Llama-2-7b,H100-SXM,fp8,1,1,128,0.007,tok/s\n", "unit \"tok/s\": a ttft row is measured in \"s\""},
		{"kind.csv", head + "a,latency,Llama-2-7b,H100-SXM,fp8,1,1,128,0.007,s\n", "kind \"latency\""},
		{"col.csv", "id,speed\n", "line 1: unknown column \"speed\""},
		{"num.csv", head + "a,ttft,Llama-2-7b,H100-SXM,fp8,x,1,128,0.007,s\n", "line 2: tp \"x\" is not an integer"},
		{"dup.json", `[{"id":"a","kind":"ttft","model":"m","chip":"c","dtype":"fp8","isl":1,"measured":1,"unit":"s"},{"id":"a","kind":"ttft","model":"m","chip":"c","dtype":"fp8","isl":1,"measured":1,"unit":"s"}]`, "/rows/1: duplicate id"},
		{"field.json", `[{"id":"a","speed":1}]`, "unknown field"},
		{"kvf.json", `[{"id":"a","kind":"serving","model":"m","chip":"c","dtype":"fp8","isl":1,"osl":1,"kv_fraction":1.5,"measured":1}]`, "/rows/0 (id \"a\"): kv_fraction 1.5"},
		{"conc.json", `[{"id":"a","kind":"serving","model":"m","chip":"c","dtype":"fp8","isl":1,"osl":1,"concurrency":-8,"measured":1}]`, "sizes must be >= 0"},
		{"pd.json", `[{"id":"a","kind":"serving","model":"m","chip":"c","dtype":"fp8","isl":1,"osl":1,"prefill_replicas":2,"measured":1}]`, "a bench_serve row with a closed loop"},
		{"pd.csv", "id,kind,model,chip,dtype,isl,osl,prefill_tp,measured,unit\na,serving,m,c,fp8,1,1,4,1,tok/s\n", "pd.csv: line 2 (id \"a\"): a disaggregated run needs prefill_replicas"},
		{"pdbig.json", `[{"id":"a","kind":"bench_serve","model":"m","chip":"c","dtype":"fp8","isl":1,"osl":2,"concurrency":1,"metric":"tpot","stat":"mean","prefill_replicas":9223372036854775807,"measured":1,"unit":"s"}]`, "at most 1048576"},
		{"spec.json", `[{"id":"a","kind":"serving","engine":"tgi","model":"m","chip":"c","dtype":"fp8","isl":1,"osl":1,"spec_tokens":3,"measured":1}]`, "spec_tokens 3 needs spec_accept"},
		{"acc.csv", "id,kind,model,chip,dtype,isl,osl,spec_tokens,spec_accept,measured,unit\na,serving,m,c,fp8,1,1,3,1.2,1,tok/s\n", "acc.csv: line 2 (id \"a\"): spec_accept 1.2"},
		{"preset.json", `[{"id":"a","kind":"train_throughput","model":"m","chip":"c","dtype":"fp8","gpus":8,"seq":8,"gbs":8,"measured":1,"unit":"tok/s/gpu","preset":{"name":"P","source":"f @v1","pp":-2}}]`, "/rows/0 (id \"a\"): preset P: degrees and micro-batch must be 0"},
		{"preset0.json", `[{"id":"a","kind":"train_throughput","model":"m","chip":"c","dtype":"fp8","gpus":8,"seq":8,"gbs":8,"measured":1,"unit":"tok/s/gpu","preset":{"name":"P","source":"f @v1"}}]`, "preset P sets no layout field"},
		{"presetsrc.json", `[{"id":"a","kind":"train_throughput","model":"m","chip":"c","dtype":"fp8","gpus":8,"seq":8,"gbs":8,"measured":1,"unit":"tok/s/gpu","preset":{"name":"P","pp":2}}]`, "preset source"},
		{"preset.csv", "id,kind,model,chip,dtype,gpus,seq,gbs,measured,unit,preset\na,train_throughput,m,c,fp8,8,8,8,1,tok/s/gpu,PP4\n", "preset.csv: line 2: preset: want a JSON object in the cell"},
		{"presetserve.json", `[{"id":"a","kind":"serving","model":"m","chip":"c","dtype":"fp8","isl":1,"osl":1,"measured":1,"preset":{"name":"P","source":"f","tp":2}}]`, "on a training row"},
	}
	for _, c := range cases {
		_, err := Parse(c.name, strings.NewReader(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
	// rows as people write them: milliseconds, kind aliases, a path or a prefix for the model
	rows, err := Parse("ms.csv", strings.NewReader(head+"a,time_to_first_token,examples/dumps/Llama-2-7b.json.gz,H100-SXM,fp8,1,1,128,7,ms\n"+
		"b,TTFT,llama-2-70,H100-SXM,fp8,4,1,128,26,ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Kind != KindTTFT || rows[0].Unit != "s" || rows[0].Measured != 0.007 || rows[1].Kind != KindTTFT {
		t.Errorf("normalized rows: %+v", rows)
	}
	for _, n := range []string{rows[0].Model, rows[1].Model, "LLAMA-2-7B"} {
		if _, ok := examples.Resolve(n); !ok {
			t.Errorf("model %q does not resolve", n)
		}
	}
	if b, ok := examples.Resolve("Llama-3.1-8B"); !ok || b != "Llama-3.1-8B" {
		t.Errorf("exact name must win over prefixes (Llama-3.1-8B-mha): %q", b)
	}
	if _, ok := examples.Resolve("Llama"); ok {
		t.Error("an ambiguous prefix must not resolve")
	}
	rows, err = Parse("ok.csv", strings.NewReader(head+"a,ttft,NoSuchModel,H100-SXM,fp8,1,1,128,0.007,s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(rows, chips.Default(), bundled.Resolve); err == nil || !strings.Contains(err.Error(), `row a: model "NoSuchModel"`) {
		t.Errorf("unknown model: %v", err)
	}
	rows[0].Model, rows[0].Chip = "Llama-2-7b", "H900"
	if _, err := Prepare(rows, chips.Default(), bundled.Resolve); err == nil || !strings.Contains(err.Error(), "row a") || !strings.Contains(err.Error(), "unknown chip") {
		t.Errorf("unknown chip: %v", err)
	}
	// a setting the row's run could not have had is refused, not ignored: FP8 attention on a
	// 16-bit run
	rows, err = Parse("fa.json", strings.NewReader(`[{"id":"f","kind":"train_throughput","model":"Llama-3.1-8B","chip":"GB200","dtype":"bf16","gpus":8,"seq":4096,"gbs":64,"mbs":1,"fp8_attention":true,"measured":1000,"unit":"tok/s/gpu"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(rows, chips.Default(), bundled.Resolve); err == nil || !strings.Contains(err.Error(), "row f") || !strings.Contains(err.Error(), "recipe fp8-cs, fp8-ds or mxfp8 (the run is megatron, bf16)") {
		t.Errorf("fp8 attention on a bf16 row: %v", err)
	}
}

// A static-batch run integrates decode over the growing KV length: the midpoint rule over
// DecodeSamples segments equals summing every step for a run short enough to count whole.
func TestStaticBatchIntegration(t *testing.T) {
	row := Row{ID: "s", Kind: KindStatic, Model: "Llama-2-7b", Chip: "H100-SXM", DType: "fp8", TP: 1, Batch: 64, ISL: 512, OSL: 9, Measured: 1, Unit: "tok/s/gpu"}
	ps := prepared(t, []Row{row})
	if n := len(ps[0].steps); n != 1+8 {
		t.Fatalf("steps: %d, want a prefill and one decode step per output token after the first", n)
	}
	for i, ws := range ps[0].steps[1:] {
		if ws.w != 1 || ws.step.Scenario.KVLen != 512+int64(i)+1 {
			t.Errorf("decode step %d: weight %g at L=%d", i, ws.w, ws.step.Scenario.KVLen)
		}
	}
	row.OSL = 1001
	ps = prepared(t, []Row{row})
	var total float64
	for _, ws := range ps[0].steps[1:] {
		total += ws.w
	}
	if total != 1000 || len(ps[0].steps) != 1+DecodeSamples {
		t.Errorf("1000 decode steps integrated as weight %g over %d samples", total, len(ps[0].steps)-1)
	}
}

// The shipped FP8 GEMM fraction is a fit to the rows that are not serving; refitting it on
// those rows alone from a wrong start lands on the shipped figure, and that fit predicts the
// held-out serving rows within issue 12's thresholds: a fit on part of the set predicts the rest.
func TestFitOnPartPredictsServing(t *testing.T) {
	var fitRows, heldOut []Row
	measuredRows, err := Parse("measured.json", bytes.NewReader(measured))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range measuredRows {
		if r.Kind == KindServing {
			heldOut = append(heldOut, r)
		} else {
			fitRows = append(fitRows, r)
		}
	}
	ps := prepared(t, fitRows)
	for i := range ps {
		e := ps[i].Chip.Efficiency
		e.GEMMFrac = map[string]float64{"bf16": e.GEMMFrac["bf16"], "fp8": 1}
		ps[i].Chip.Efficiency = e
	}
	fits, err := Calibrate(ps, []string{"gemm_frac.fp8"}, "rows that are not serving")
	if err != nil {
		t.Fatal(err)
	}
	got := fits[0].Params["gemm_frac.fp8"]
	shipped, _ := chips.Default().Lookup("H100-SXM")
	// the shipped 0.51 was fitted with the NeMo training rows in the set; those are now timed by
	// the megatron lane's own GEMM fraction, so the chip's figure rests on the TensorRT-LLM rows,
	// which alone give 0.49 (chips.json's source says so)
	if math.Abs(got-shipped.Efficiency.GEMMFrac["fp8"]) > 0.025 {
		t.Errorf("refit %.3f, shipped %.3f", got, shipped.Efficiency.GEMMFrac["fp8"])
	}
	hs := prepared(t, heldOut)
	for i := range hs {
		e := hs[i].Chip.Efficiency
		e.GEMMFrac = map[string]float64{"bf16": e.GEMMFrac["bf16"], "fp8": got}
		hs[i].Chip.Efficiency = e
	}
	rep, err := Validate(hs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary["serving"]; s.Rows != 20 || s.MedianAbsErr > 0.15 || s.WorstAbsErr > 0.35 {
		t.Errorf("held-out serving rows: %+v", s)
	}
}

// The out-of-sample serving set (other chips, models, MoE and TP sizes, published by NVIDIA
// and never fitted to but for the L40S link fraction and the grouped-GEMM fraction, each on a
// stated part) stays predicted at median |err| <= 15% with nothing beyond the roofline, every
// serving group within 20% median (MoE groups within 25%: Mixtral at TP8 over NVLink and
// DeepSeek-R1 on B200 stay ~1.2x fast; 8-stage pipelines, 1.3-1.4x fast, are reported).
func TestExtendedSetGeneralises(t *testing.T) {
	rows := Extended()
	if len(rows) < 300 {
		t.Fatalf("%d extended rows", len(rows))
	}
	rep, err := Validate(prepared(t, rows), nil)
	if err != nil {
		t.Fatal(err)
	}
	serving := 0
	for _, r := range rows {
		if r.Kind == KindServing {
			serving++
		}
	}
	if s := rep.Summary["serving"]; s.Rows != serving || s.MedianAbsErr > 0.15 {
		t.Errorf("extended serving: %+v", s)
	}
	for _, r := range rep.Rows {
		if r.FasterThanPhysics {
			t.Errorf("%s: predicted %g beyond the roofline %g", r.ID, r.Predicted, r.Roofline)
		}
	}
	dense := 0
	for _, g := range rep.Groups {
		if g.Phase != "serving" || strings.Contains(g.Group, "PP8") {
			continue // the 2023 static and TTFT rows and 8-stage pipelines are reported, not bounded (see the README)
		}
		if ambiguousMoELayout[g.Group] {
			continue
		}
		bound := 0.20
		if moeModel(g.Group) {
			bound = 0.25 // Mixtral at TP8 over NVLink and DeepSeek-R1 on B200 stay ~1.2x fast (see the README)
		} else {
			dense++
		}
		if g.MedianAbsErr > bound {
			t.Errorf("%s: median |err| %.1f%%, median ratio %.3f", g.Group, 100*g.MedianAbsErr, g.MedianRatio)
		}
	}
	if dense < 15 {
		t.Errorf("%d dense groups", dense)
	}
}

// The grouped-GEMM fraction is fitted on part of the MoE rows and predicts the rest: refitting
// it to the 18 Mixtral rows on H100 at TP2 and TP4 lands on the shipped figure, and the other
// 99 Mixtral rows (other chips, TP1 and TP8) are then predicted at median |err| <= 10%
// (19% with dense-GEMM efficiency).
func TestGroupedGEMMFitPredictsTheOtherMoERows(t *testing.T) {
	var fitRows, heldOut []Row
	for _, r := range Extended() {
		switch {
		case !strings.Contains(r.Model, "Mixtral"):
		case r.Chip == "H100-SXM" && (r.TP == 2 || r.TP == 4):
			fitRows = append(fitRows, r)
		default:
			heldOut = append(heldOut, r)
		}
	}
	if len(fitRows) != 18 || len(heldOut) != 99 {
		t.Fatalf("%d rows to fit, %d held out", len(fitRows), len(heldOut))
	}
	ps := prepared(t, fitRows)
	for i := range ps {
		ps[i].Chip.Efficiency.GroupedGEMMFrac = 1
	}
	fits, err := Calibrate(ps, []string{"grouped_gemm_frac"}, "Mixtral on H100 at TP2 and TP4")
	if err != nil {
		t.Fatal(err)
	}
	got := fits[0].Params["grouped_gemm_frac"]
	shipped, _ := chips.Default().Lookup("H100-SXM")
	if math.Abs(got-shipped.Efficiency.GroupedGEMMFrac) > 0.01 {
		t.Errorf("refit %.3f, shipped %.3f", got, shipped.Efficiency.GroupedGEMMFrac)
	}
	rep, err := Validate(prepared(t, heldOut), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary["serving"]; s.Rows != 99 || s.MedianAbsErr > 0.10 {
		t.Errorf("held-out Mixtral rows: %+v", s)
	}
}

// Blackwell's FP4 GEMM fraction is fitted on the B200's Llama-3.3-70B TP1 rows alone and
// predicts the 405B TP4 rows on B200 and every GB200 row (the same GPU) within 11% median
// (10.5% since a long prompt's later chunks attend over its cached chunks and the B200 lane's
// step overhead refitted to 0 with them, issue 32; 9.8% before).
func TestBlackwellFP4FitPredictsTheRest(t *testing.T) {
	var fitRows, heldOut []Row
	for _, r := range Extended() {
		switch {
		case r.DType != "fp4" || r.EP > 1 || !strings.Contains(r.Chip, "B200") || moeModel(r.Model): // B200 and GB200 dense FP4 rows
		case r.Chip == "B200" && r.TP == 1:
			fitRows = append(fitRows, r)
		default:
			heldOut = append(heldOut, r)
		}
	}
	if len(fitRows) != 10 || len(heldOut) != 30 {
		t.Fatalf("%d rows to fit, %d held out", len(fitRows), len(heldOut))
	}
	ps := prepared(t, fitRows)
	for i := range ps { // start from the H100 figure the B200 carried before
		e := ps[i].Chip.Efficiency
		e.GEMMFrac = map[string]float64{"bf16": e.GEMMFrac["bf16"], "fp4": 0.51}
		ps[i].Chip.Efficiency = e
	}
	fits, err := Calibrate(ps, []string{"gemm_frac.fp4"}, "B200 70B TP1")
	if err != nil {
		t.Fatal(err)
	}
	got := fits[0].Params["gemm_frac.fp4"]
	shipped, _ := chips.Default().Lookup("B200")
	if math.Abs(got-shipped.Efficiency.GEMMFrac["fp4"]) > 0.01 {
		t.Errorf("refit %.3f, shipped %.3f", got, shipped.Efficiency.GEMMFrac["fp4"])
	}
	rep, err := Validate(prepared(t, heldOut), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary["serving"]; s.Rows != 30 || s.MedianAbsErr > 0.11 {
		t.Errorf("held-out Blackwell FP4 rows: %+v", s)
	}
}

// The pipeline hand-off is fitted on the two-stage RTX PRO 6000 rows alone and moves the
// held-out four-stage rows within 15% median (from 22% with no hand-off cost).
func TestPipelineHandOffFitPredictsFourStages(t *testing.T) {
	var fitRows, heldOut []Row
	for _, r := range Extended() {
		switch {
		case r.Chip != "RTX-PRO-6000" || r.Model != "Llama-3.1-70B-Instruct":
		case r.PP == 2:
			fitRows = append(fitRows, r)
		case r.PP == 4:
			heldOut = append(heldOut, r)
		}
	}
	if len(fitRows) != 10 || len(heldOut) != 10 {
		t.Fatalf("%d rows to fit, %d held out", len(fitRows), len(heldOut))
	}
	ps := prepared(t, fitRows)
	for i := range ps {
		ps[i].Chip.Efficiency.PPStepUs = 0
	}
	fits, err := Calibrate(ps, []string{"pp_step_us"}, "RTX PRO 6000, two stages")
	if err != nil {
		t.Fatal(err)
	}
	got := fits[0].Params["pp_step_us"]
	shipped, _ := chips.Default().Lookup("RTX-PRO-6000")
	if math.Abs(got-shipped.Efficiency.PPStepUs) > 0.05*shipped.Efficiency.PPStepUs {
		t.Errorf("refit %.0f us, shipped %.0f us", got, shipped.Efficiency.PPStepUs)
	}
	rep, err := Validate(prepared(t, heldOut), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary["serving"]; s.Rows != 10 || s.MedianAbsErr > 0.15 {
		t.Errorf("held-out four-stage rows: %+v", s)
	}
}

// The held-out training rows (Megatron-Bridge's other releases, the current page's 26.08 among
// them, and AMD's Primus runs beyond the moe_package README) parse, every one is predicted, and
// none was fitted to: their error is the out-of-sample check the note reports.
func TestHeldOutTrainingRows(t *testing.T) {
	rows := HeldOutTraining()
	if len(rows) != 164+4 {
		t.Errorf("%d held-out rows, want the 164 Megatron-Bridge rows transcribed and AMD's 4", len(rows))
	}
	current := 0
	for _, r := range rows {
		if strings.Contains(r.Source, "docs/performance-summary.md @") && strings.Contains(r.Source, "26.08 NeMo") {
			current++
		}
	}
	if current != 8 {
		t.Errorf("%d rows from the current page's 26.08 tables, want its 8 with a bundled model", current)
	}
	rep, err := Validate(prepared(t, rows), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summary["training"]
	if s.Rows+s.KnownIssue != len(rows) || s.KnownIssue != 3 || s.NotExpressible != 0 {
		t.Errorf("held out: %+v, want every row predicted, the three the source says hit a defect of their stack apart", s)
	}
	if s.MedianAbsErr > 0.25 {
		t.Errorf("held-out median |err| %.1f%% over 25%%", 100*s.MedianAbsErr)
	}
	for _, r := range rows {
		if strings.Contains(r.Source, "25.11 NeMo") {
			t.Errorf("%s: a fitted release in the held-out set", r.ID)
		}
	}
}

// AMD's published vLLM runs on MI300X (amd_vllm.json) are MI300X's serving fit set: every row
// parses and is predicted, the fitted figures are physical, and the fit holds the waves to a
// 20% median and the batch latencies to 12%.
func TestAMDvLLMRows(t *testing.T) {
	rows := AMDvLLM()
	if len(rows) != 605 {
		t.Errorf("%d AMD rows, want the 605 transcribed", len(rows))
	}
	rep, err := Validate(prepared(t, rows), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary["wave_throughput"]; s.Rows != 176 || s.MedianAbsErr > 0.20 {
		t.Errorf("waves: %+v", s)
	}
	if s := rep.Summary["batch_latency"]; s.Rows != 429 || s.MedianAbsErr > 0.12 {
		t.Errorf("batch latency: %+v", s)
	}
	chip, _ := chips.Default().Lookup("MI300X")
	e := chip.Efficiency.Lane("vllm") // AMD's figures are vLLM's on MI300X
	if !(e.GEMMFrac["fp8"] > 0 && e.GEMMFrac["fp8"] <= 1 && e.HBMFrac > 0 && e.HBMFrac <= 1 && e.ScaleUpLatencyUs >= 0 && e.SeqOverheadUs >= 0) {
		t.Errorf("MI300X figures not physical: %+v", e)
	}
	if !strings.Contains(e.Sources["hbm_frac"], "amd_vllm.json") {
		t.Errorf("MI300X hbm_frac source %q names no fit set", e.Sources["hbm_frac"])
	}
}

// MI300X decode at batch 1, by hand: Llama-3.1-405B FP8 at TP8 streams its weights per GPU at
// the fitted achievable bandwidth and runs two all-reduces per layer at the fitted latency, plus
// the fitted step overhead; the time model's decode step is that and the rest of the step's
// kernels (about 1,300 launches at 3 µs, the KV cache, norms, the LM head's share), never less
// and within 30% more.
func TestMI300XDecodeBatchOneByHand(t *testing.T) {
	chip, _ := chips.Default().Lookup("MI300X")
	rows := []Row{{ID: "b1", Kind: KindDecodeStep, Model: "Llama-3.1-405B", Chip: "MI300X", DType: "fp8", KVDType: "fp8",
		GPUs: 8, TP: 8, Batch: 1, ISL: 1024, Engine: "vllm", Measured: 1, Unit: "s"}}
	p := prepared(t, rows)[0]
	got, _, err := p.Predict(chip.Efficiency)
	if err != nil {
		t.Fatal(err)
	}
	e := chip.Efficiency.Lane("vllm")
	d, err := bundled.Resolve("Llama-3.1-405B")
	if err != nil {
		t.Fatal(err)
	}
	m := analyzer.NewModel(d)
	weights := m.ParamsPerGPU(8, 1, 1, 8) * 1 // FP8: a byte per weight
	hand := weights/(chip.HBMBytesPerSec()*e.HBMFrac) + 2*126*e.ScaleUpLatencyUs*1e-6 + e.StepOverheadUs*1e-6
	if got < hand || got > 1.3*hand {
		t.Errorf("decode step %.2f ms, by hand %.2f ms (weights %.1f GB at %.0f GB/s, 252 all-reduces at %.1f µs, step %.0f µs)",
			got*1e3, hand*1e3, weights/1e9, chip.HBMBytesPerSec()*e.HBMFrac/1e9, e.ScaleUpLatencyUs, e.StepOverheadUs)
	}
}

// moeModel: the bundled mixture-of-experts models among the rows.
func moeModel(name string) bool {
	for _, m := range []string{"Mixtral", "DeepSeek", "Scout", "Qwen3-30B-A3B", "Qwen3-235B-A22B", "gpt-oss"} {
		if strings.Contains(name, m) {
			return true
		}
	}
	return false
}

// ambiguousMoELayout: perf-overview @00f37686's MoE tables at TP > 1 whose layout the document
// leaves open (its MoE command enables attention DP but states no EP size; read as experts split
// by TP). They are reported by validate and in the README, not bounded: on B200 the TP8 reading
// is 1.4x slow, on PCIe RTX PRO 6000 TP4/TP8 up to 2x slow, both as attention DP would explain.
var ambiguousMoELayout = map[string]bool{
	"Qwen3-235B-A22B on B200, TP8":             true,
	"Qwen3-235B-A22B on RTX-PRO-6000, TP2 PP4": true,
	"Qwen3-30B-A3B on RTX-PRO-6000, TP4":       true,
	"Qwen3-30B-A3B on RTX-PRO-6000, TP8":       true,
}

// MoE on Blackwell in TensorRT-LLM (issue 21): the trtllm lane of B200 (grouped GEMM fraction,
// step and per-sequence overhead) refits to the shipped figures from its fit set (the MoE rows at
// TP1 or explicit attention DP), and each model's rows predicted by a fit to the other models'
// rows stay within the bounds the README states.
func TestBlackwellMoELaneLeaveOneModelOut(t *testing.T) {
	rows, err := Where(Extended(), []string{"chip=B200", "model=Llama-4-Scout-17B-16E-Instruct", "Qwen3-30B-A3B", "DeepSeek-V3", "tp=1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 22 {
		t.Fatalf("%d rows in the fit set, want 22 (10 Scout, 10 Qwen3-30B-A3B, 2 DeepSeek-R1 FP4)", len(rows))
	}
	ps := prepared(t, rows)
	for i := range ps {
		ps[i].Chip.Efficiency.Lanes = nil // "before" is the chip's own figures, without the lane
	}
	// the refit to the shipped figures always; each model held out (three more refits, ~40 s
	// on 2 cores) under MREP_STRESS
	o := CalibrateOptions{AbsLoss: true, MaxLeaveOneOut: 1}
	if testutil.Stress() {
		group, _ := GroupBy("model")
		o = CalibrateOptions{AbsLoss: true, LeaveOut: group, LeaveOutName: "model"}
	}
	fits, err := CalibrateWith(ps, []string{"grouped_gemm_frac", "step_overhead_us", "seq_overhead_us"}, "B200 MoE", o)
	if err != nil {
		t.Fatal(err)
	}
	f := fits[0]
	lane := chips.Default().LanesOf("B200")["trtllm"]
	for k, want := range map[string]float64{"grouped_gemm_frac": lane.GroupedGEMMFrac, "step_overhead_us": lane.StepOverheadUs, "seq_overhead_us": lane.SeqOverheadUs} {
		if got := f.Params[k]; math.Abs(got-want) > 0.02*math.Max(want, 1) {
			t.Errorf("%s refits to %.4g, shipped %.4g", k, got, want)
		}
	}
	var before, after, loo []float64
	for i := range f.After.Rows {
		before = append(before, math.Abs(f.Before.Rows[i].Err()))
		after = append(after, math.Abs(f.After.Rows[i].Err()))
	}
	for _, r := range f.LeaveOneOut {
		loo = append(loo, math.Abs(r.Err()))
	}
	if !testutil.Stress() {
		sort.Float64s(before)
		sort.Float64s(after)
		if mb, ma := median(before), median(after); !(ma < mb) || ma > 0.10 {
			t.Errorf("median |err| before %.3f, after %.3f", mb, ma)
		}
		return
	}
	if len(loo) != 22 {
		t.Fatalf("%d rows held out, want every row", len(loo))
	}
	sort.Float64s(before)
	sort.Float64s(after)
	sort.Float64s(loo)
	mb, ma, ml := median(before), median(after), median(loo)
	t.Logf("B200 MoE rows: median |err| %.1f%% with the chip's figures, %.1f%% fitted, %.1f%% with each model left out", 100*mb, 100*ma, 100*ml)
	if !(ma < mb) || ma > 0.10 || ml > 0.25 {
		t.Errorf("median |err| before %.3f, after %.3f, leave one model out %.3f", mb, ma, ml)
	}
}

// The engines' own serving benchmarks (bench_serve.json): every row predicts through the
// step-by-step scheduler. SGLang's lane is fitted to the runs at 1 and 16 users; the runs at 64
// and 100 users are held out, and their median TTFT and TPOT stay within the bounds the README
// states. A single-user TTFT is, by hand, the prompt's prefill step plus the lane's request
// overhead.
func TestBenchServeRows(t *testing.T) {
	rows := BenchServe()
	if len(rows) != 118 {
		t.Fatalf("%d bench_serve rows, want the 118 transcribed", len(rows))
	}
	held, err := Where(rows, []string{"engine=sglang", "concurrency=64", "100", "stat=median"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Validate(prepared(t, held), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range []string{"bench_ttft", "bench_tpot"} {
		s := rep.Summary[ph]
		t.Logf("held-out SGLang runs at 64 and 100 users, %s: %d rows, median |err| %.1f%%, worst %.1f%%", ph, s.Rows, 100*s.MedianAbsErr, 100*s.WorstAbsErr)
		if s.Rows != 9 || s.MedianAbsErr > 0.25 || s.WorstAbsErr > 0.60 {
			t.Errorf("%s: %+v", ph, s)
		}
	}
	for _, r := range rep.Rows {
		if r.FasterThanPhysics {
			t.Errorf("%s: %g beyond the roofline %g", r.ID, r.Predicted, r.Roofline)
		}
	}
	// by hand: one user, one 610-token prompt at a time on B200
	one := Row{ID: "one", Kind: KindBenchServe, Engine: "sglang", Model: "Qwen3-235B-A22B", Chip: "B200", DType: "bf16",
		GPUs: 8, TP: 8, ISL: 610, OSL: 100, Concurrency: 1, Requests: 1, Metric: "ttft", Stat: "mean", Measured: 1, Unit: "s"}
	p := prepared(t, []Row{one})[0]
	chip, _ := chips.Default().Lookup("B200")
	got, _, err := p.Predict(chip.Efficiency)
	if err != nil {
		t.Fatal(err)
	}
	lane := chip.Efficiency.Lane("sglang")
	if !(lane.RequestOverheadUs > 0) || !strings.Contains(lane.Sources["request_overhead_us"], "bench_serve.json") {
		t.Fatalf("B200's sglang lane has no fitted request overhead: %+v", lane)
	}
	d, err := bundled.Resolve("Qwen3-235B-A22B")
	if err != nil {
		t.Fatal(err)
	}
	m := analyzer.NewModel(d)
	s, _ := one.Scenario()
	s.Batch, s.Seq = 1, 610
	lc := chip
	lc.Efficiency = lane
	tm, _ := timing.New(lc, "bf16")
	tg, _ := analyzer.NewTarget(lc, "bf16", tm)
	st, err := m.Analyze(analyzer.Prefill, s, analyzer.Achievable)
	if err != nil {
		t.Fatal(err)
	}
	want := lane.RequestOverheadUs*1e-6 + analyzer.Evaluate(st, tg).Timing.TEst + lane.SeqOverheadUs*1e-6
	if math.Abs(got-want) > 0.01*want {
		t.Errorf("single-user TTFT %.4g s, want %.4g s: the request overhead, one prefill step of 610 tokens and one sequence's host time", got, want)
	}
}

// A run with speculative decoding is predicted as it ran: MTP's drafts accepted at the row's
// rate raise a closed loop's output throughput and lower its TPOT, by less than the tokens a
// step emits (each step verifies the drafts, and drafting costs a layer per token).
func TestSpeculativeDecodingRows(t *testing.T) {
	base := Row{ID: "plain", Kind: KindBenchServe, Engine: "sglang", Model: "DeepSeek-V3", Chip: "B200", DType: "fp8",
		GPUs: 8, TP: 8, ISL: 1000, OSL: 1000, Concurrency: 16, Requests: 64, Metric: "tpot", Stat: "median", Measured: 0.01, Unit: "s"}
	spec := base
	spec.ID, spec.SpecTokens, spec.SpecAccept = "mtp", 3, 0.7
	ps := prepared(t, []Row{base, spec})
	chip, _ := chips.Default().Lookup("B200")
	var tpot [2]float64
	for i, p := range ps {
		v, _, err := p.Predict(chip.Efficiency)
		if err != nil {
			t.Fatal(err)
		}
		tpot[i] = v
	}
	perStep := (1 - math.Pow(0.7, 4)) / (1 - 0.7) // 2.53 tokens a step
	t.Logf("median TPOT: %.4g s plain, %.4g s with MTP", tpot[0], tpot[1])
	if !(tpot[1] < tpot[0]/1.3 && tpot[1] > tpot[0]/perStep) {
		t.Errorf("median TPOT %.4g s with MTP (3 drafts at 0.7) vs %.4g s without: want faster by more than 1.3x and less than the %.2f tokens a step emits", tpot[1], tpot[0], perStep)
	}
}

// A disaggregated run is predicted as it ran: 16 users of DeepSeek-V3 on B200 with one TP8
// prefill replica and one TP8 decode replica (16 GPUs) decode with decode-only steps, so their
// TPOT is below the same users' on one aggregated TP8 replica, whose steps also carry prompt
// chunks; their TTFT carries the KV cache's transfer.
func TestDisaggregatedRows(t *testing.T) {
	agg := Row{ID: "agg", Kind: KindBenchServe, Engine: "sglang", Model: "DeepSeek-V3", Chip: "B200", DType: "fp8",
		GPUs: 8, TP: 8, ISL: 4000, OSL: 500, Concurrency: 16, Requests: 64, Metric: "tpot", Stat: "mean", Measured: 0.01, Unit: "s"}
	pd := agg
	pd.ID, pd.GPUs, pd.PrefillTP, pd.PrefillReplicas, pd.DecodeReplicas = "pd", 16, 8, 1, 1
	pdTTFT := pd
	pdTTFT.ID, pdTTFT.Metric = "pd-ttft", "ttft"
	ps := prepared(t, []Row{agg, pd, pdTTFT})
	chip, _ := chips.Default().Lookup("B200")
	var v [3]float64
	for i, p := range ps {
		var err error
		if v[i], _, err = p.Predict(chip.Efficiency); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("TPOT aggregated %.4g s, disaggregated %.4g s; disaggregated TTFT %.4g s", v[0], v[1], v[2])
	if !(v[1] < v[0]) || !(v[2] > 0) {
		t.Errorf("disaggregated TPOT %.4g s, aggregated %.4g s; TTFT %.4g s", v[1], v[0], v[2])
	}
	// the prefill pool on H200s: slower prompts (a third less compute than a B200) and the KV
	// cache over the scale-out network, so a longer TTFT; the decode pool's TPOT is its own
	h200 := pdTTFT
	h200.ID, h200.PrefillChip = "pd-h200-ttft", "H200"
	h200TPOT := pd
	h200TPOT.ID, h200TPOT.PrefillChip = "pd-h200-tpot", "H200"
	var w [2]float64
	for i, p := range prepared(t, []Row{h200, h200TPOT}) {
		var err error
		if w[i], _, err = p.Predict(chip.Efficiency); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("prefill on H200s: TTFT %.4g s, TPOT %.4g s", w[0], w[1])
	if !(w[0] > v[2]) || math.Abs(w[1]/v[1]-1) > 0.02 {
		t.Errorf("prefill on H200s: TTFT %.4g s (on B200s %.4g s), TPOT %.4g s (%.4g s)", w[0], v[2], w[1], v[1])
	}
	bad := pd
	bad.PrefillChip = "H900"
	if _, err := Prepare([]Row{bad}, chips.Default(), bundled.Resolve); err == nil || !strings.Contains(err.Error(), "prefill_chip") {
		t.Errorf("an unknown prefill chip: %v", err)
	}
}

// A hook's measurement faster than the roofline of its own configuration is called impossible
// beside the figures (the hook's clock, tokens or world size is off), and a possible one is not.
func TestCompareNamesAnImpossibleMeasurement(t *testing.T) {
	d, err := bundled.Resolve("Llama-3.2-1B-Instruct")
	if err != nil {
		t.Fatal(err)
	}
	tokens, seq := int64(8*4096), int64(4096)
	for _, c := range []struct {
		step       float64
		impossible bool
	}{{1e-6, true}, {2.0, false}} {
		d.Measurement = &model.Measurement{StepTimeS: c.step, StepsTimed: 10, TokensPerStep: &tokens, SeqLen: &seq,
			WorldSize: 8, Device: "NVIDIA H100 80GB HBM3", Precision: "bf16"}
		got := Compare("x", d, chips.Default(), "")
		if got.Roofline <= 0 {
			t.Fatalf("no roofline: %+v", got)
		}
		if strings.Contains(got.Note, "impossible") != c.impossible {
			t.Errorf("step %g s (roofline %.3g s): note %q", c.step, got.Roofline, got.Note)
		}
	}
}

// The FSDP lanes rest on four sources (torchtitan's Dec-2024 and June-2025 benchmarks and its
// 2024 performance page, IBM's fms-fsdp README): each held out in turn is predicted by lanes
// fitted without it. Issue 34's goal for held-out lanes is a 10% median; torchtitan's Dec-2024
// file, whose long-context CP rows no other source covers, is held to 30%. A refit per source
// (about half a minute on 2 cores): behind MREP_STRESS.
func TestFSDPLeaveOneSourceOut(t *testing.T) {
	if !testutil.Stress() {
		t.Skip("four FSDP lane refits: MREP_STRESS=1")
	}
	var rows []Row
	for _, r := range Default() {
		if r.Training() && r.Kind != KindTrainMemory && r.Layout().Framework == "fsdp" {
			rows = append(rows, r)
		}
	}
	loo, err := LeaveOneSourceOut(prepared(t, rows))
	if err != nil {
		t.Fatal(err)
	}
	if len(loo) != 4 {
		t.Fatalf("%d FSDP sources, want 4: %+v", len(loo), loo)
	}
	for _, s := range loo {
		t.Logf("%-40s %2d rows held out: median %.1f%%, worst %.1f%% (in sample %.1f%%)", s.Source, s.Rows, 100*s.MedianAbsErr, 100*s.WorstAbsErr, 100*s.InSample)
		bound := 0.10
		if s.Source == "torchtitan llama3_h100_202412" {
			bound = 0.30
		}
		if s.MedianAbsErr > bound {
			t.Errorf("%s held out: median |err| %.1f%% over %.0f%%", s.Source, 100*s.MedianAbsErr, 100*bound)
		}
	}
}

// A row whose stated layout cannot run and that cites its release's preset is predicted under
// the fastest of the preset's layout and the savers that fit: the shipped 26.02.01 Llama 3 70B
// MXFP8 row on GB300 (the table's PP4 MBS 2 needs 476 GiB of 279; its preset, PP4 VP5 MBS 1,
// fits and is faster than any recompute of the table's layout). A row that fits as stated
// keeps its layout whatever it cites.
func TestMisfitsTryTheirReleasePreset(t *testing.T) {
	var misfit Row
	for _, r := range HeldOutTraining() {
		if r.ID == "MB26.02.01-LLAMA3_70B-gb300-64gpu-mxfp8" {
			misfit = r
		}
	}
	if misfit.Preset == nil || misfit.Preset.VP != 5 || misfit.Preset.MBS != 1 || !strings.Contains(misfit.Preset.Source, "v0.3.1") {
		t.Fatalf("the row cites %+v, want v0.3.1's LLAMA3_70B_PRETRAIN_CONFIG_GB300_FP8_MX_V2 (VP5, MBS 1)", misfit.Preset)
	}
	fits := misfit
	fits.ID, fits.MBS, fits.Recompute = "fits", 1, "full"
	noPreset := misfit
	noPreset.ID, noPreset.Preset = "bare", nil
	rep, err := Validate(prepared(t, []Row{misfit, fits, noPreset}), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, kept, bare := rep.Rows[0], rep.Rows[1], rep.Rows[2]
	if got.FitsWith == nil || !strings.Contains(got.FitsWith.Setting, misfit.Preset.Name) || !strings.Contains(got.FitsWith.Setting, "--vp 5 --mbs 1") {
		t.Fatalf("predicted under %+v, want the release's preset", got.FitsWith)
	}
	if bare.FitsWith == nil || strings.Contains(bare.FitsWith.Setting, "preset") || !(got.Predicted > bare.Predicted) {
		t.Errorf("without the citation: %+v (%g); with it %g, want a saver and the preset faster", bare.FitsWith, bare.Predicted, got.Predicted)
	}
	// the preset's layout timed directly agrees with the refit
	direct := misfit
	direct.ID, direct.VP, direct.MBS, direct.Preset = "direct", 5, 1, nil
	rep2, err := Validate(prepared(t, []Row{direct}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := rep2.Rows[0]; d.FitsWith != nil || math.Abs(d.Predicted/got.Predicted-1) > 1e-9 {
		t.Errorf("PP4 VP5 MBS 1 as stated: %+v, under the preset %g", d, got.Predicted)
	}
	if kept.FitsWith != nil || !kept.Fits || !strings.Contains(kept.UnusedPreset, misfit.Preset.Name) || !strings.Contains(kept.UnusedPreset, "@v0.3.1") {
		t.Errorf("a row that fits as stated moved, or hides the preset it cites: %+v", kept)
	}
	if got.UnusedPreset != "" || bare.UnusedPreset != "" {
		t.Errorf("a preset used, or none cited, is no unused one: %q, %q", got.UnusedPreset, bare.UnusedPreset)
	}
}

// A training row that does not fit in memory as stated is predicted again under the fastest
// setting its framework offers that fits (issue 34: a time that holds only under a layout the
// memory model refuses is no prediction). Megatron-FSDP Llama-3.1-70B, TP1, two 8k sequences
// per micro-batch on 64 GB200 does not fit without recompute or offload; a row that fits gets
// no such setting.
func TestRowsThatDoNotFitArePredictedUnderAFittingSetting(t *testing.T) {
	base := Row{ID: "nofit", Kind: KindTrainTokens, Source: "test", Model: "Llama-3.1-70B-Instruct", Chip: "GB200", DType: "fp8",
		GPUs: 64, TP: 1, PP: 1, CP: 1, Seq: 8192, GBS: 256, MBS: 2, Framework: "megatron", Recipe: "fp8-cs", ZeRO: 3,
		FP8ParamGather: true, BF16Grads: true, Measured: 4000, Unit: "tok/s/gpu"}
	fits := base
	fits.ID, fits.MBS, fits.Recompute = "fits", 1, "full"
	rep, err := Validate(prepared(t, []Row{base, fits}), nil)
	if err != nil {
		t.Fatal(err)
	}
	nofit, ok := rep.Rows[0], rep.Rows[1]
	if !nofit.Fits || nofit.FitsWith == nil || !(nofit.AsStated > 0) {
		t.Fatalf("the stated layout should not fit, and the row be predicted under a setting that does: %+v", nofit)
	}
	if f := nofit.FitsWith; f.Predicted != nofit.Predicted || !strings.Contains(f.Setting, "offloaded") && !strings.Contains(f.Setting, "recompute") {
		t.Errorf("setting that fits: %+v, the row's prediction %g", f, nofit.Predicted)
	}
	if !ok.Fits || ok.FitsWith != nil || ok.AsStated != 0 {
		t.Errorf("a row that fits as stated: %+v", ok)
	}
	// a row that names a mechanism mrep lacks stays as stated, flagged
	lacks := base
	lacks.Lacks = "a test's unmodelled optimizer"
	rep, err = Validate(prepared(t, []Row{lacks}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Rows[0]; r.Fits || r.FitsWith != nil || r.Lacks == "" {
		t.Errorf("a row that lacks a mechanism: %+v", r)
	}
}

// The 26.06.01 table marks its GPT-OSS runs with a footnote naming a regression of the
// release's stack (cudnn-frontend issue 256) that the next container fixes, and the releases'
// known issues say the 26.02 container lacks DeepEP, which the 26.02 preset of Qwen3-30B-A3B on
// H100 (the only one of that release) asks for: those rows carry the statement, are predicted
// and shown, and count in no error; the rest count as before.
func TestKnownIssueRowsCountInNoError(t *testing.T) {
	var known, other []Row
	for _, r := range HeldOutTraining() {
		if r.KnownIssue != "" {
			known = append(known, r)
		} else if strings.HasPrefix(r.ID, "MB26.06.01-") || strings.HasPrefix(r.ID, "MB26.02-") {
			other = append(other, r)
		}
	}
	if len(known) != 3 {
		t.Fatalf("%d held-out rows with a known issue, want the 26.06.01 table's two GPT-OSS rows and 26.02's DeepEP run", len(known))
	}
	for _, r := range known {
		regression := strings.HasPrefix(r.ID, "MB26.06.01-GPT_OSS") && strings.Contains(r.KnownIssue, "cudnn-frontend/issues/256") && strings.Contains(r.KnownIssue, "regression")
		deepEP := r.ID == "MB26.02-Qwen3_30B_a3B-h100-16gpu-fp8" && strings.Contains(r.KnownIssue, "DeepEP is not supported") && strings.Contains(r.Note, "DeepEP")
		if !regression && !deepEP {
			t.Errorf("%s: known issue %q", r.ID, r.KnownIssue)
		}
	}
	rep, err := Validate(prepared(t, append(append([]Row{}, known...), other...)), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summary["training"]
	if s.Rows != len(other) || s.KnownIssue != len(known) {
		t.Errorf("summary %+v: want %d rows counted and %d known issues", s, len(other), len(known))
	}
	n := 0
	for _, res := range rep.Rows {
		if res.KnownIssue != "" {
			n++
			if res.Predicted <= 0 || res.Ratio <= 0 {
				t.Errorf("%s: known-issue row not predicted: %+v", res.ID, res)
			}
		}
	}
	if n != len(known) {
		t.Errorf("%d results carry a known issue, want %d", n, len(known))
	}
	// the GB300 row is off by far more than any counted Blackwell Ultra MoE row: it is not in
	// the lane's errors
	for _, l := range rep.Lanes {
		if l.Group != "megatron MoE Blackwell Ultra" {
			continue
		}
		for _, res := range rep.Rows {
			if res.KnownIssue != "" && res.Chip == "GB300" && math.Abs(res.Err()) <= l.WorstAbsErr {
				t.Errorf("%s (%+.1f%%) is within the lane's worst counted error %.1f%%", res.ID, 100*res.Err(), 100*l.WorstAbsErr)
			}
		}
	}
}

// The precisions' relative speed, held out: every held-out release publishes Llama 3 runs of
// one model and chip in FP8 current scaling and in MXFP8, and current scaling ran 1-14% faster.
// Block-scaled MXFP8 GEMMs at 0.951 of tensor-scaled FP8's rate (chips' mxfp8_gemm_share, from
// Transformer Engine's measured GEMMs, not fitted to these) predict those ratios within 5%
// median, and better than the same rate for both, under which mrep has MXFP8 the faster.
func TestHeldOutRecipePairs(t *testing.T) {
	ps := prepared(t, HeldOutTraining())
	pairErr := func(override map[string]chips.Efficiency) (float64, int) {
		rep, err := Validate(ps, override)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]Result{}
		for _, r := range rep.Rows {
			byID[r.ID] = r
		}
		var errs []float64
		for id, cs := range byID {
			mx, ok := byID[strings.TrimSuffix(id, "-fp8")+"-mxfp8"]
			if !strings.HasSuffix(id, "-fp8") || !ok || cs.Predicted <= 0 || mx.Predicted <= 0 {
				continue
			}
			measured, predicted := cs.Measured/mx.Measured, cs.Predicted/mx.Predicted
			errs = append(errs, math.Abs(math.Log(predicted/measured)))
		}
		sort.Float64s(errs)
		return median(errs), len(errs)
	}
	with, n := pairErr(nil)
	if n < 15 {
		t.Fatalf("%d held-out FP8 / MXFP8 pairs, want the 18 Llama 3 ones", n)
	}
	same := map[string]chips.Efficiency{}
	for _, p := range ps {
		if e := p.Chip.Efficiency; e.MXFP8GEMMShare > 0 {
			e.MXFP8GEMMShare = 0
			same[p.Chip.Name] = e
		}
	}
	without, _ := pairErr(same)
	if with > 0.05 || !(with < without) {
		t.Errorf("FP8 current scaling over MXFP8, %d held-out pairs: median |log error| %.3f with the share, %.3f without", n, with, without)
	} else {
		t.Logf("FP8 current scaling over MXFP8, %d held-out pairs: median |log error| %.3f with the share, %.3f without", n, with, without)
	}
}

// AMD's Primus runs of Qwen3-30B-A3B on 8 MI355X (amd_heldout_training.json) check the Instinct
// lane, fitted to the moe_package README's DeepSeek-V2 runs alone, on another source, model and
// stack: Turbo's DeepEP under even routing, its one-launch grouped GEMM, FP8 tensorwise, the
// unfused SwiGLU. No fit reads them; each is predicted within the issue's 25% as its
// configuration states it, FP8 runs faster than BF16, as measured, and the FP8 run's measured
// memory (max-rank ROCm memory, 277 GB) is the memory model's within 5%.
func TestAMDHeldOutTrainingRows(t *testing.T) {
	rows := embedded("amd_heldout_training.json", amdHeldoutTrainingRows)
	if len(rows) != 4 {
		t.Fatalf("%d AMD held-out rows, want the 4 transcribed", len(rows))
	}
	fitted := map[string]bool{}
	for _, r := range Default() {
		fitted[SourceOf(r)] = true
		for _, h := range rows {
			if r.ID == h.ID {
				t.Errorf("%s: in the fit set too", r.ID)
			}
		}
	}
	for _, r := range rows {
		if fitted[SourceOf(r)] {
			t.Errorf("%s: its source %q is a fit source", r.ID, SourceOf(r))
		}
	}
	rep, err := Validate(prepared(t, rows), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, r := range rep.Rows {
		got[r.ID] = r
		if !r.Fits {
			t.Errorf("%s: does not fit in memory as stated", r.ID)
		}
		switch {
		case strings.HasPrefix(r.Model, "DeepSeek-V3"):
			// The Instinct lane's grouped-GEMM share (0.23, fitted on DeepSeek-V2-Lite's small
			// experts, where it stands for the MoE layer's uncounted costs) times DeepSeek-V3's
			// experts, 16-bit under the legacy GroupedMLP, too slowly (the README's Instinct
			// paragraph): a known gap, held here so that a change to it shows.
			if !(r.Ratio < 1 && r.Ratio > 0.5) {
				t.Errorf("%s: predicted %.0f against %.0f measured (%+.1f%%), want below it and within 50%%", r.ID, r.Predicted, r.Measured, 100*(r.Ratio-1))
			}
		case math.Abs(r.Ratio-1) > 0.25:
			t.Errorf("%s: predicted %.0f against %.0f measured (%+.1f%%), want within 25%%", r.ID, r.Predicted, r.Measured, 100*(r.Ratio-1))
		}
	}
	// memory: the FP8 Qwen3 run's max-rank ROCm figure (277 GB) within 5%; DeepSeek-V3's PP1 at
	// "88% of HBM" (read to the percent; mrep splits the 61 layers its own way, not Megatron's
	// default layout with PP15's short stage) within 8%
	tol := map[string]float64{"PRIMUS-Qwen3-30B-A3B-mi355x-8gpu-fp8-tensorwise": 0.05, "PRIMUS-DeepSeekV3-mi355x-256gpu-fp8": 0.08}
	checked := 0
	for _, p := range prepared(t, rows) {
		if p.Row.MemoryGiB == 0 || p.train == nil {
			continue
		}
		checked++
		got := layout.TrainingMemory(p.train.m, p.train.l).Total / (1 << 30)
		t.Logf("%s: memory %.1f GiB against %.1f measured", p.Row.ID, got, p.Row.MemoryGiB)
		if math.Abs(got/p.Row.MemoryGiB-1) > tol[p.Row.ID] {
			t.Errorf("%s: memory %.1f GiB against %.1f measured, want within %.0f%%", p.Row.ID, got, p.Row.MemoryGiB, 100*tol[p.Row.ID])
		}
	}
	if checked != len(tol) {
		t.Errorf("%d rows with a measured memory, want %d", checked, len(tol))
	}
	bf16, fp8 := got["PRIMUS-Qwen3-30B-A3B-mi355x-8gpu-bf16"], got["PRIMUS-Qwen3-30B-A3B-mi355x-8gpu-fp8-tensorwise"]
	if !(fp8.Measured > bf16.Measured && fp8.Predicted > bf16.Predicted) {
		t.Errorf("FP8 %.0f / %.0f, BF16 %.0f / %.0f (measured / predicted): want FP8 faster in both", fp8.Measured, fp8.Predicted, bf16.Measured, bf16.Predicted)
	}
	// Weak scaling: 4x the nodes and the batch keep 128 micro-batches per rank, so only the
	// data-parallel traffic grows, and Megatron's overlapped reduce-scatter and all-gather hide
	// it: the measured per-GPU rate falls 2.3%; the prediction must fall as little (within 3
	// points), where an exposed gradient exchange would cost far more.
	small, large := got["PRIMUS-DeepSeekV3-mi355x-256gpu-fp8"], got["PRIMUS-DeepSeekV3-mi355x-1024gpu-fp8"]
	meas, pred := large.Measured/small.Measured, large.Predicted/small.Predicted
	if math.Abs(pred-meas) > 0.03 || pred > 1 {
		t.Errorf("1,024 over 256 GPUs per GPU: measured %.3f, predicted %.3f: want within 3 points and no gain", meas, pred)
	}
}
