package main

import (
	"encoding/json"
	"github.com/mrep-dev/mrep/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validate --json has the documented shape, and its thresholds hold end to end.
func TestValidateJSON(t *testing.T) {
	db := filepath.Join(t.TempDir(), "v.db")
	var rep struct {
		Rows []struct {
			ID        string  `json:"id"`
			Phase     string  `json:"phase"`
			Measured  float64 `json:"measured"`
			Predicted float64 `json:"predicted"`
			Ratio     float64 `json:"ratio"`
		} `json:"rows"`
		Summary map[string]struct {
			Rows         int     `json:"rows"`
			MedianAbsErr float64 `json:"median_abs_err"`
			WorstAbsErr  float64 `json:"worst_abs_err"`
		} `json:"summary"`
		Lanes []struct {
			Group string `json:"group"`
			Rows  int    `json:"rows"`
		} `json:"lanes"`
		Sources []struct {
			Group string `json:"group"`
			Rows  int    `json:"rows"`
		} `json:"sources"`
		LOO []struct {
			Source       string  `json:"source"`
			Rows         int     `json:"rows"`
			MedianAbsErr float64 `json:"median_abs_err"`
		} `json:"leave_one_source_out"`
		Pending int `json:"leave_one_source_out_pending"`
	}
	// the refits (about 25 s on 2 cores) under MREP_STRESS; by default validate says how many
	// it would make
	args := []string{"validate", "--json"}
	if testutil.Stress() {
		args = append(args, "--loo")
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, args...)), &rep); err != nil {
		t.Fatal(err)
	}
	// measured.json's 40, Megatron-Bridge 25.11's 32 pre-training rows, torchtitan's 18, the
	// 21 FSDP rows of fms-fsdp and torchtitan's other benchmarks, AMD's 6 Primus MoE runs
	if len(rep.Rows) != 117 {
		t.Errorf("%d rows, want the 117 of the calibration set", len(rep.Rows))
	}
	lanes := 0
	for _, l := range rep.Lanes {
		lanes += l.Rows
	}
	if lanes != 89 || len(rep.Lanes) != 9 {
		t.Errorf("lanes %+v: want the 89 training rows in 9 lanes", rep.Lanes)
	}
	// the training rows by source: the ten that leave-one-source-out holds out, every row in one
	bySource := map[string]int{}
	n := 0
	for _, g := range rep.Sources {
		bySource[g.Group] = g.Rows
		n += g.Rows
	}
	if len(rep.Sources) != 10 || n != lanes || bySource["IBM fms-fsdp README"] != 6 || bySource["torchtitan llama3_h100_202412"] != 18 ||
		bySource["AMD-AGI/Primus examples/moe_package/README.md"] != 6 {
		t.Errorf("sources %+v: want 10 holding the %d training rows", rep.Sources, lanes)
	}
	// one held-out fit per source: Megatron-Bridge's four system tables, the NeMo 70B rows,
	// torchtitan's three benchmark files, fms-fsdp, AMD's Primus runs
	loo := map[string]int{}
	for _, s := range rep.LOO {
		loo[s.Source] = s.Rows
		if !(s.MedianAbsErr > 0) {
			t.Errorf("source %s held out: median %g", s.Source, s.MedianAbsErr)
		}
	}
	switch {
	case !testutil.Stress() && (len(loo) != 0 || rep.Pending != 10):
		t.Errorf("validate without --loo: %d sources held out, %d pending; want none run and 10 pending", len(loo), rep.Pending)
	case testutil.Stress() && (len(loo) != 10 || loo["torchtitan llama3_h100_202412"] != 18 || loo["IBM fms-fsdp README"] != 6 ||
		loo["Megatron-Bridge 25.11 DGX-GB300"] != 9 || rep.Pending != 0):
		t.Errorf("leave-one-source-out: %v (pending %d)", loo, rep.Pending)
	}
	for _, ph := range []string{"ttft", "static_throughput"} {
		s := rep.Summary[ph]
		if s.Rows != 4 || s.MedianAbsErr > 0.10 || s.WorstAbsErr > 0.30 {
			t.Errorf("%s: %+v", ph, s)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("validate must not create a database")
	}
}

// calibrate writes a chips file that --chips-file accepts, and bad rows name file, line, problem.
func TestCalibrateWritesAChipsFile(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "c.db")
	rows := filepath.Join(dir, "rows.csv")
	csv := "id,kind,model,chip,dtype,kv_dtype,tp,batch,isl,osl,measured,unit\n" +
		"a,ttft,Llama-2-7b,H100,fp8,fp8,1,1,128,1,0.007,s\n" +
		"b,ttft,Llama-2-7b,H100,fp8,fp8,1,1,2048,1,0.036,s\n" +
		"c,static_throughput,Llama-2-7b,H100,fp8,fp8,1,112,128,2048,6818,tok/s/gpu\n" +
		"d,static_throughput,Llama-2-7b,H100,fp8,fp8,1,48,2048,2048,2740,tok/s/gpu\n" +
		"e,ttft,Llama-2-70b,H100,fp8,fp8,4,1,2048,1,0.109,s\n"
	if err := os.WriteFile(rows, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "fitted.json")
	text := mustRun(t, db, "calibrate", rows, "-o", out, "--fit", "gemm_frac", "--fit", "host_launch_us")
	for _, want := range []string{"Calibration of H100-SXM (5 rows)", "gemm_frac.fp8", "Leave-one-out"} {
		if !strings.Contains(text, want) {
			t.Errorf("calibrate output lacks %q:\n%s", want, text)
		}
	}
	chipsOut := mustRun(t, db, "--chips-file", out, "chips", "--json")
	if !strings.Contains(chipsOut, "fitted by mrep calibrate to 5 rows of "+rows) {
		t.Errorf("the written chips file does not carry the fit's source:\n%.2000s", chipsOut)
	}
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("id,kind,model,chip,dtype,isl,measured,unit\nx,ttft,Llama-2-7b,H100,fp8,128,-1,s\n"), 0o644)
	_, _, err := run(t, db, "calibrate", bad)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "positive") {
		t.Errorf("bad row: %v", err)
	}
	os.WriteFile(bad, []byte("id,kind,model,chip,dtype,isl,measured,unit\nx,ttft,NoModel,H100,fp8,128,1,s\n"), 0o644)
	_, _, err = run(t, db, "calibrate", bad)
	if err == nil || !strings.Contains(err.Error(), `row x: model "NoModel"`) {
		t.Errorf("unknown model: %v", err)
	}
}

// plan train on the NeMo recipe's job ranks the published layout among its best (within 10%
// of the best step time), and says when nothing fits.
func TestPlanTrain(t *testing.T) {
	db := filepath.Join(t.TempDir(), "p.db")
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.1-70B-Instruct.json.gz")
	var plan struct {
		Top []struct {
			Step struct {
				StepTime float64 `json:"step_time"`
				Layout   struct{ TP, PP, VP, CP, DP int64 }
			} `json:"step"`
		} `json:"top"`
	}
	// with what NeMo 24.09's Megatron has: the distributed optimizer (ZeRO-1)
	out := mustRun(t, db, "plan", "train", "latest", "--gpus", "64", "--gbs", "128", "--seq", "8192", "--top", "10", "--zero", "1", "--json")
	if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan.Top) != 10 {
		t.Fatalf("plan json: %v", err)
	}
	found := false
	for _, c := range plan.Top {
		l := c.Step.Layout
		if l.TP == 4 && l.PP == 4 && l.VP == 5 && l.CP == 2 && l.DP == 2 {
			found = true
			if c.Step.StepTime > 1.1*plan.Top[0].Step.StepTime {
				t.Errorf("the published layout %.2f s is over 10%% behind the best %.2f s", c.Step.StepTime, plan.Top[0].Step.StepTime)
			}
		}
	}
	if !found {
		t.Errorf("the published layout TP4 PP4 VP5 CP2 is not among the ten best:\n%s", out)
	}
	dir := filepath.Join(t.TempDir(), "plan")
	mustRun(t, db, "plan", "train", "latest", "--gpus", "64", "--gbs", "128", "--seq", "8192", "-o", dir)
	md, err := os.ReadFile(filepath.Join(dir, "plan.md"))
	if err != nil || !strings.Contains(string(md), "![step time against memory per GPU](plan.png)") || !strings.Contains(string(md), "The Pareto front") {
		t.Errorf("plan.md: %v\n%.600s", err, md)
	}
	if fi, err := os.Stat(filepath.Join(dir, "plan.png")); err != nil || fi.Size() < 1000 {
		t.Errorf("plan.png: %v", err)
	}
	_, _, err = run(t, db, "plan", "train", "latest", "--gpus", "8", "--gbs", "8", "--seq", "8192")
	if err == nil || !strings.Contains(err.Error(), "nothing fits") {
		t.Errorf("70B with Adam on 8 GPUs: %v", err)
	}
}

// analyze takes a training layout: the verdict comes first; a layout that breaks a constraint
// is refused naming it.
func TestAnalyzeWithALayout(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.1-70B-Instruct.json.gz")
	out := mustRun(t, db, "analyze", "--phase", "training", "--tp", "4", "--pp", "4", "--vp", "5", "--cp", "2", "--gpus", "64", "--gbs", "128", "-s", "8192", "--system", "dgx-h100")
	if !strings.HasPrefix(out, "# Analysis") || !strings.Contains(out, "**Training on 64 GPUs of H100-SXM bf16 (TP4 PP4 VP5 CP2 DP2 ZeRO-1") || !strings.Contains(out, "training fits, ") || !strings.Contains(out, "| master weights |") {
		t.Errorf("layout verdict missing:\n%.1500s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tp", "3", "--gpus", "24"}, "tp 3 must divide the 64 attention heads"},
		{[]string{"--tp", "4", "--gpus", "30"}, "--gpus 30 is not a multiple of TP x PP x CP"},
		{[]string{"--tp", "4", "--pp", "160", "--gpus", "640"}, "pp 160 x vp 1 stages exceed the 80 layers"},
		{[]string{"--tp", "4", "--dp", "4", "--gbs", "10"}, "gbs 10 must be divisible by mbs 1 x dp 4"},
	} {
		_, _, err := run(t, db, append([]string{"analyze", "--phase", "training", "-s", "8192"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// validate --extended runs the shipped out-of-sample serving rows, with a summary per model,
// chip and layout; it and a rows file are one or the other.
func TestValidateExtended(t *testing.T) {
	db := filepath.Join(t.TempDir(), "v.db")
	var rep struct {
		Rows   []struct{ ID string } `json:"rows"`
		Groups []struct {
			Group       string  `json:"group"`
			Rows        int     `json:"rows"`
			MedianRatio float64 `json:"median_ratio"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "validate", "--extended", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) < 300 || len(rep.Groups) < 20 {
		t.Errorf("%d rows in %d groups", len(rep.Rows), len(rep.Groups))
	}
	n := 0
	for _, g := range rep.Groups {
		n += g.Rows
		if !(g.MedianRatio > 0) {
			t.Errorf("%s: median ratio %g", g.Group, g.MedianRatio)
		}
	}
	if n != len(rep.Rows) {
		t.Errorf("groups hold %d rows of %d", n, len(rep.Rows))
	}
	text := mustRun(t, db, "validate", "--extended")
	if !strings.Contains(text, "| Mixtral-8x7B-v0.1 on H200, TP8 | serving | 9 |") {
		t.Errorf("no per-group summary:\n%s", text[len(text)-2000:])
	}
	_, _, err := run(t, db, "validate", "--extended", "rows.json")
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "not both") {
		t.Errorf("--extended with a file: %v (exit %d)", err, exitCode(err))
	}
}

// plan train over both lanes and the MoE schedules: DeepSeek-V3 on 256 GPUs names the winner's
// mechanisms (its lane, the all-to-all with its bytes and exposure); both frameworks appear
// among the layouts when --framework names both; a bad schedule is refused naming it.
func TestPlanTrainLanesAndMoE(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	mustRun(t, db, "ingest", "../../examples/dumps/DeepSeek-V3.json.gz", "../../examples/dumps/Llama-3.1-8B.json.gz")
	md := mustRun(t, db, "plan", "train", "DeepSeek-V3", "--gpus", "256", "--gbs", "1024", "--seq", "4096", "--dtype", "fp8",
		"--recipe", "fp8-blockwise", "--try-a2a-overlap", "none,1f1b,dualpipe", "--try-dispatcher", "alltoall,deepep", "--chip", "H200")
	for _, want := range []string{"Mechanisms of the winner", "framework lane **megatron**", "expert all-to-all (", "GB sent per MoE layer"} {
		if !strings.Contains(md, want) {
			t.Errorf("plan lacks %q:\n%s", want, md)
		}
	}
	var plan struct {
		Top []struct {
			Step struct {
				Layout struct{ Framework string } `json:"layout"`
			} `json:"step"`
		} `json:"top"`
	}
	js := mustRun(t, db, "plan", "train", "Llama-3.1-8B", "--gpus", "64", "--gbs", "256", "--seq", "8192", "--framework", "megatron,fsdp", "--top", "100000", "--json")
	if err := json.Unmarshal([]byte(js), &plan); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range plan.Top {
		seen[c.Step.Layout.Framework] = true
	}
	if !seen["megatron"] || !seen["fsdp"] {
		t.Errorf("both lanes searched, frameworks among the feasible layouts: %v", seen)
	}
	if _, _, err := run(t, db, "plan", "train", "DeepSeek-V3", "--gpus", "256", "--gbs", "1024", "--seq", "4096", "--a2a-overlap", "sideways"); err == nil || !strings.Contains(err.Error(), "sideways") {
		t.Errorf("bad a2a overlap: %v", err)
	}
}

// AMD's published vLLM runs validate as a shipped set; plan serve on an AMD chip times kernels
// with the vLLM figures fitted there and says so; an unknown engine or set is refused.
func TestAMDSetAndServingEngine(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a.db")
	var rep struct {
		Rows []struct {
			ID string `json:"id"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "validate", "--rows", "amd-vllm", "--json")), &rep); err != nil || len(rep.Rows) != 605 {
		t.Fatalf("amd-vllm set: %v, %d rows", err, len(rep.Rows))
	}
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.1-70B-Instruct.json.gz")
	md := mustRun(t, db, "plan", "serve", "latest", "--chip", "MI300X", "--isl", "2000", "--osl", "500", "--dtype", "fp8", "--top", "2")
	if !strings.Contains(md, "kernels timed with the vllm figures fitted on this chip") {
		t.Errorf("plan serve on MI300X does not name the engine's figures:\n%s", md)
	}
	for _, bad := range [][]string{{"plan", "serve", "latest", "--chip", "MI300X", "--engine", "tgi"}, {"validate", "--rows", "nope"}} {
		if _, _, err := run(t, db, bad...); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}

// calibrate picks its fit set out of a shipped file with --set and --where, holds out a model
// at a time with --leave-out model, and refuses unknown keys, groupings and sets by name; the
// serving benchmarks validate through the step-by-step scheduler.
func TestCalibrateWhereAndLeaveOut(t *testing.T) {
	db := filepath.Join(t.TempDir(), "w.db")
	out := mustRun(t, db, "calibrate", "--rows", "bench-serve", "--where", "chip=A100-SXM", "--where", "engine=sglang",
		"--where", "concurrency=1", "--where", "stat=median", "--where", "metric=tpot", "--fit", "step_overhead_us", "--leave-out", "row", "--abs-loss")
	for _, want := range []string{"Calibration of A100-SXM (2 rows)", "step_overhead_us", "each predicted by a fit to the others"} {
		if !strings.Contains(out, want) {
			t.Errorf("calibrate --where output lacks %q:\n%s", want, out)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate", "--rows", "extended", "--where", "colour=red"}, `unknown key "colour"`},
		{[]string{"calibrate", "--rows", "extended", "--where", "chip"}, "want KEY=VALUE"},
		{[]string{"calibrate", "--rows", "extended", "--leave-out", "moon"}, `leave-out "moon"`},
		{[]string{"calibrate", "--rows", "nope"}, `--rows "nope"`},
		{[]string{"calibrate", "--rows", "extended", "--where", "chip=NoChip"}, "no row matches --where chip=NoChip"},
	} {
		_, _, err := run(t, db, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mrep %s: %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	var rep struct {
		Rows []struct {
			ID        string  `json:"id"`
			Predicted float64 `json:"predicted"`
		} `json:"rows"`
	}
	js := mustRun(t, db, "validate", "--rows", "bench-serve", "--where", "model=Qwen3-235B-A22B", "--where", "concurrency=100", "--json", "--no-loo")
	if err := json.Unmarshal([]byte(js), &rep); err != nil || len(rep.Rows) != 4 {
		t.Fatalf("validate --rows bench-serve --where: %v, %d rows", err, len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if !(r.Predicted > 0) {
			t.Errorf("%s: predicted %g", r.ID, r.Predicted)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("calibrate and validate must not create a database")
	}
}

// analyze times prefill and decode with the serving engine's lane where the chip has one (vLLM's
// on AMD chips and TensorRT-LLM's elsewhere by default, --engine to choose), says so, and leaves
// training on the chip's own figures.
func TestAnalyzeEngineLane(t *testing.T) {
	db := filepath.Join(t.TempDir(), "e.db")
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.1-8B.json.gz")
	times := func(args ...string) (map[string]float64, string) {
		md := mustRun(t, db, append([]string{"analyze", "latest", "--chip", "B200", "--batch", "64"}, args...)...)
		js := mustRun(t, db, append([]string{"analyze", "latest", "--chip", "B200", "--batch", "64", "--json"}, args...)...)
		var a struct {
			Analysis struct {
				Results []struct {
					Step struct {
						Phase string `json:"phase"`
					} `json:"step"`
					Timing struct {
						TEst float64 `json:"T_est"`
					} `json:"timing"`
				} `json:"results"`
			} `json:"analysis"`
		}
		if err := json.Unmarshal([]byte(js), &a); err != nil || len(a.Analysis.Results) == 0 {
			t.Fatalf("analyze --json: %v", err)
		}
		out := map[string]float64{}
		for _, r := range a.Analysis.Results {
			out[r.Step.Phase] = r.Timing.TEst
		}
		return out, md
	}
	trt, md := times()
	if !strings.Contains(md, "Prefill and decode are timed with the trtllm figures fitted on B200") {
		t.Errorf("analyze on B200 does not say it times serving with the trtllm lane:\n%.3000s", md)
	}
	sg, md := times("--engine", "sglang")
	if !strings.Contains(md, "timed with the sglang figures fitted on B200") {
		t.Errorf("--engine sglang not named")
	}
	if trt["training"] != sg["training"] || !(sg["decode"] > trt["decode"]) {
		t.Errorf("training must not change with the engine (%g, %g); SGLang's decode step carries its larger step overhead (%g vs %g)",
			trt["training"], sg["training"], sg["decode"], trt["decode"])
	}
	if _, _, err := run(t, db, "analyze", "latest", "--engine", "tgi"); err == nil || !strings.Contains(err.Error(), `--engine "tgi"`) {
		t.Errorf("unknown engine: %v", err)
	}
}

// validate --kernels checks the time model against the shipped measured kernels, in well
// under a second, and refuses the row-set flags that do not apply to it.
func TestValidateKernels(t *testing.T) {
	db := filepath.Join(t.TempDir(), "k.db")
	out := mustRun(t, db, "validate", "--kernels")
	for _, want := range []string{"aiconfigurator-core 0.12.0", "| gemm bf16, trtllm Hopper | 624 |", "| H100-SXM | vllm 0.24.0 | context_attention |"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate --kernels lacks %q", want)
		}
	}
	var rep struct {
		Groups []struct {
			Chip string  `json:"chip"`
			Rows int     `json:"rows"`
			Err  float64 `json:"median_abs_err"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "validate", "--kernels", "--json")), &rep); err != nil || len(rep.Groups) < 150 {
		t.Fatalf("--json: %v, %d groups", err, len(rep.Groups))
	}
	for _, bad := range [][]string{{"validate", "--kernels", "--where", "chip=H100-SXM"}, {"validate", "--kernels", "rows.csv"}, {"validate", "--kernels", "--loo"}} {
		if _, _, err := run(t, db, bad...); exitCode(err) != exitUsage {
			t.Errorf("%v: exit %d, want a usage error", bad, exitCode(err))
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("validate --kernels must not create a database")
	}
}

// calibrate --kernels writes a chips file whose serving lanes, given back with --chips-file,
// predict the measured kernels closer than the shipped figures (H100 TensorRT-LLM decode
// attention: vLLM's and SGLang's lanes ship their fits already), and leaves what it did not fit
// as it was.
func TestCalibrateKernels(t *testing.T) {
	dir := t.TempDir()
	db, out := filepath.Join(dir, "k.db"), filepath.Join(dir, "lanes.json")
	text := mustRun(t, db, "calibrate", "--kernels", "-o", out)
	if !strings.Contains(text, "| H100-SXM | vllm 0.24.0 | `attn_decode_hbm_frac` |") {
		t.Errorf("calibrate --kernels does not show the H100 vLLM decode attention fit:\n%s", text[:min(len(text), 2000)])
	}
	groupErr := func(args ...string) float64 {
		var rep struct {
			Groups []struct {
				Chip    string  `json:"chip"`
				Engine  string  `json:"engine"`
				Family  string  `json:"family"`
				KVDType string  `json:"kv_dtype"`
				Err     float64 `json:"median_abs_err"`
			} `json:"groups"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, db, append(args, "validate", "--kernels", "--json")...)), &rep); err != nil {
			t.Fatal(err)
		}
		for _, g := range rep.Groups {
			if g.Chip == "H100-SXM" && g.Engine == "trtllm" && g.Family == "generation_attention" && g.KVDType == "bf16" {
				return g.Err
			}
		}
		t.Fatal("no H100 TensorRT-LLM decode attention group")
		return 0
	}
	before, after := groupErr(), groupErr("--chips-file", out)
	if !(after < before) {
		t.Errorf("H100 TensorRT-LLM decode attention: median |error| %.3f with the shipped lane, %.3f with the fitted one", before, after)
	}
	if _, _, err := run(t, db, "calibrate", "--kernels", "--rows", "extended"); exitCode(err) != exitUsage {
		t.Errorf("calibrate --kernels --set: exit %d, want a usage error", exitCode(err))
	}
}

// The README's training-lane tables are validate's own: each block between the validate-lanes
// markers is its command followed by the training-lane table that command prints, so the
// figures the README states cannot drift from what the shipped calibration predicts
// (go test ./cmd/mrep -run READMELaneTables -update rewrites them).
func TestREADMELaneTables(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	start, end := strings.Index(s, "<!-- validate-lanes -->"), strings.Index(s, "<!-- /validate-lanes -->")
	if start < 0 || end < start {
		t.Fatal("README has no validate-lanes section")
	}
	blocks := strings.Split(s[start:end], "```console\n")[1:]
	if len(blocks) != 2 {
		t.Fatalf("%d blocks, want validate and validate --heldout", len(blocks))
	}
	db := filepath.Join(t.TempDir(), "lanes.db")
	section := s[start:end]
	for _, raw := range blocks {
		b := consoleBlock(t, raw)
		got := laneTable(t, mustRun(t, db, strings.Fields(b.args)...))
		if *update {
			section = strings.Replace(section, b.text, b.cmd+"\n"+got, 1)
			continue
		}
		if got != b.want {
			t.Errorf("README lane table for %q is stale (go test ./cmd/mrep -run READMELaneTables -update); it now reads:\n%s", b.args, got)
		}
	}
	if *update {
		if err := os.WriteFile("../../README.md", []byte(s[:start]+section+s[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// laneTable is the training-lane table of validate's markdown output, through its last row.
func laneTable(t *testing.T, out string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "\nTraining by lane")
	if !ok {
		t.Fatalf("no training-lane table in:\n%s", out)
	}
	i := strings.Index(rest, "\n| Lane |")
	if i < 0 {
		t.Fatalf("no training-lane table in:\n%s", out)
	}
	table, _, _ := strings.Cut(rest[i+1:], "\n\n")
	if n := strings.Count(table, "\n| megatron ") + strings.Count(table, "\n| fsdp "); n < 6 {
		t.Fatalf("a lane table of %d lanes:\n%s", n, table)
	}
	return table + "\n"
}
