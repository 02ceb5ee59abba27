package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/examples"
	"github.com/mrep-dev/mrep/runref"
)

// Every zoo model answers analyze and plan serve by name on a fresh machine: no Python, no
// ingest, no database created.
func TestEveryZooModelAnalyzesAndPlans(t *testing.T) {
	zoo, err := runref.Zoo()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "none.db")
	for _, z := range zoo {
		var a struct {
			Analysis struct {
				Results []struct {
					Timing struct {
						TEst float64 `json:"T_est"`
					} `json:"timing"`
				} `json:"results"`
			} `json:"analysis"`
		}
		js := mustRun(t, db, "analyze", z.Name, "--chip", "H100", "--phase", "prefill", "--phase", "decode", "--json")
		if err := json.Unmarshal([]byte(js), &a); err != nil || len(a.Analysis.Results) != 2 || !(a.Analysis.Results[1].Timing.TEst > 0) {
			t.Errorf("analyze %s: %v %+v", z.Name, err, a)
		}
		var p struct {
			Best []struct {
				Chip string `json:"chip"`
			} `json:"best"`
			NoConfig string `json:"no_config"`
		}
		args := []string{"plan", "serve", z.Name, "--chip", "H200", "--chip", "B200", "--dtype", "fp8", "--users", "16", "--top", "1", "--json"}
		d, err := examples.Decode(z.Name)
		if err != nil {
			t.Fatal(err)
		}
		if ctx := analyzer.NewModel(d).Fingerprint.MaxPositions; ctx > 0 && ctx < 2500 {
			// the default 2000 + 500 tokens exceed it: refused, the context named; a workload
			// that fits plans
			if _, stderr, err := run(t, db, args...); err == nil || !strings.Contains(err.Error()+stderr, "context of "+strconv.FormatInt(ctx, 10)) {
				t.Errorf("plan serve %s (context %d) with 2500-token sequences: %v %s", z.Name, ctx, err, stderr)
			}
			args = append(args, "--isl", strconv.FormatInt(ctx/2, 10), "--osl", strconv.FormatInt(ctx/4, 10))
		}
		js = mustRun(t, db, args...)
		if err := json.Unmarshal([]byte(js), &p); err != nil || len(p.Best) == 0 && p.NoConfig == "" {
			t.Errorf("plan serve %s: %v, %d deployments, %q", z.Name, err, len(p.Best), p.NoConfig)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("naming zoo models created a database")
	}
	// a config.json of a zoo architecture plans as the zoo model, and says so
	dir := t.TempDir()
	raw, _ := os.ReadFile("../../examples/configs/Qwen3-8B.json")
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, raw, 0o644)
	out, stderr, err := run(t, db, "plan", "serve", cfg, "--users", "50", "--top", "1")
	if err != nil || !strings.Contains(out, "# Serving Qwen3-8B") || !strings.Contains(stderr, "the zoo model Qwen3-8B has the same architecture and sizes") {
		t.Errorf("plan serve config.json: %v\n%s\n%.300s", err, stderr, out)
	}
	// one without a zoo twin: the exporter command, and nothing ingested
	os.WriteFile(cfg, []byte(strings.Replace(string(raw), `"num_hidden_layers": 36`, `"num_hidden_layers": 30`, 1)), 0o644)
	_, _, err = run(t, db, "ingest", cfg)
	if err == nil || !strings.Contains(err.Error(), "python -m mrep_export --hf-config "+cfg+" -o Qwen3ForCausalLM.json.gz") || !strings.Contains(err.Error(), "nothing was stored") {
		t.Errorf("ingest config.json: %v", err)
	}
	// plan without a model is a usage error that lists what there is
	_, _, err = run(t, db, "plan", "serve")
	if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), "zoo models (`mrep models`): ") {
		t.Errorf("plan serve without a model: exit %d, %v", code, err)
	}
	if md := mustRun(t, db, "models"); !strings.Contains(md, "| `Qwen3-8B` | qwen3 | 8.2B |") {
		t.Errorf("mrep models:\n%s", md)
	}
}

// BenchmarkConfigJSONToPlan: a zoo architecture's config.json to a serving plan, in process,
// no Python (issue 22's target: <= 1 s).
func BenchmarkConfigJSONToPlan(b *testing.B) {
	dir := b.TempDir()
	raw, _ := os.ReadFile("../../examples/configs/Llama-3.1-70B-Instruct.json")
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, raw, 0o644)
	db := filepath.Join(dir, "none.db")
	for i := 0; i < b.N; i++ {
		mustRun(b, db, "plan", "serve", cfg, "--users", "50", "--chip", "H100", "--chip", "H200", "--dtype", "fp8", "--top", "3")
	}
}

// plan serve --emit writes each recommended deployment's launch script (and TensorRT-LLM's
// options file) beside serve.md, with the layout the plan chose, and prints them without -o.
func TestPlanServeEmit(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "none.db")
	out := filepath.Join(dir, "plan")
	var plan struct {
		Best []struct {
			TP int64 `json:"tp"`
			EP int64 `json:"ep"`
		} `json:"best"`
	}
	js := mustRun(t, db, "plan", "serve", "Llama-3.1-70B", "--chip", "H100", "--users", "100", "--tpot", "50ms", "--dtype", "fp8", "--top", "2",
		"--emit", "trtllm", "-o", out, "--json")
	if err := json.Unmarshal([]byte(js), &plan); err != nil || len(plan.Best) == 0 {
		t.Fatalf("plan: %v", err)
	}
	for _, f := range []string{"serve.md", "deploy-1-trtllm.sh", "deploy-1-trtllm.yml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	sh, _ := os.ReadFile(filepath.Join(out, "deploy-1-trtllm.sh"))
	if want := "--tp_size " + strconv.FormatInt(max(plan.Best[0].TP, plan.Best[0].EP), 10) + " \\"; !strings.Contains(string(sh), want) {
		t.Errorf("the script does not carry the chosen layout (%q):\n%s", want, sh)
	}
	md := mustRun(t, db, "plan", "serve", "Qwen3-30B-A3B", "--chip", "H100", "--users", "32", "--top", "1", "--emit", "sglang")
	if !strings.Contains(md, "## Run it (sglang)") || !strings.Contains(md, "python -m sglang.launch_server --model-path \"$MODEL\"") {
		t.Errorf("--emit without -o prints the scripts:\n%.2000s", md)
	}
	if _, _, err := run(t, db, "plan", "serve", "Qwen3-30B-A3B", "--emit", "tgi"); err == nil || !strings.Contains(err.Error(), `"tgi"`) {
		t.Errorf("--emit tgi: %v", err)
	}
	// DeepSeek-V3's own MTP heads draft: written as the engine's speculative options; a model
	// without them gets a note in the plan, once, naming the draft model it needs
	md = mustRun(t, db, "plan", "serve", "DeepSeek-V3", "--chip", "H200", "--gpus", "16", "--users", "32", "--spec-tokens", "2", "--top", "1", "--emit", "vllm")
	if !strings.Contains(md, `--speculative-config '{"method": "mtp", "num_speculative_tokens": 2}'`) || strings.Contains(md, "no MTP heads") {
		t.Errorf("DeepSeek-V3 MTP:\n%.3000s", md)
	}
	md, stderr, err := run(t, db, "plan", "serve", "Qwen3-8B", "--users", "32", "--spec-tokens", "3", "--top", "2", "--emit", "sglang", "--emit-version", "0.5.15")
	// the plan's note once, and each of the two scripts' comment
	if err != nil || strings.Count(md, "the model has no MTP heads of its own") != 2 || strings.Count(stderr, "the model has no MTP heads of its own") != 1 ||
		!strings.Contains(md, "SGLang 0.5.15") {
		t.Errorf("a model without MTP heads: %v %s\n%.3000s", err, stderr, md)
	}
	if _, _, err := run(t, db, "plan", "serve", "Qwen3-8B", "--emit", "sglang", "--emit-version", "0.4.0"); err == nil || !strings.Contains(err.Error(), `sglang "0.4.0": mrep writes for 0.5.23, 0.5.15`) {
		t.Errorf("--emit-version 0.4.0: %v", err)
	}
}

// Each plan train row carries the one analyze command that times it alone, and that command
// gives the row's step time to the digit (dense and MoE, bf16 and an FP8 recipe).
func TestPlanRowsReproduceInAnalyze(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	for _, args := range [][]string{
		{"plan", "train", "Llama-3.1-70B", "--gpus", "64", "--gbs", "128", "--seq", "8192", "--top", "3", "--json"},
		{"plan", "train", "DeepSeek-V3", "--gpus", "256", "--gbs", "1024", "--seq", "4096", "--dtype", "fp8", "--top", "2", "--json"},
	} {
		var plan struct {
			Top []struct {
				Analyze string `json:"analyze"`
				Step    struct {
					StepTime float64 `json:"step_time"`
				} `json:"step"`
			} `json:"top"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, db, args...)), &plan); err != nil || len(plan.Top) == 0 {
			t.Fatalf("%v: %v", args, err)
		}
		for _, row := range plan.Top {
			cmd := strings.Fields(strings.TrimPrefix(row.Analyze, "mrep "))
			var a struct {
				Layouts []struct {
					Step struct {
						StepTime float64 `json:"step_time"`
					} `json:"step"`
				} `json:"training_layout"`
			}
			if err := json.Unmarshal([]byte(mustRun(t, db, append(cmd, "--json")...)), &a); err != nil || len(a.Layouts) == 0 {
				t.Fatalf("%s: %v", row.Analyze, err)
			}
			if got := a.Layouts[0].Step.StepTime; got != row.Step.StepTime {
				t.Errorf("%s\n  analyze %.9g s, the plan's row %.9g s", row.Analyze, got, row.Step.StepTime)
			}
		}
	}
}

// plan train --emit writes the winner as the framework's configuration beside plan.md.
func TestPlanTrainEmit(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "none.db")
	out := filepath.Join(dir, "plan")
	var plan struct {
		Top []struct {
			Step struct {
				Layout struct{ TP, PP int64 }
			} `json:"step"`
		} `json:"top"`
	}
	js := mustRun(t, db, "plan", "train", "Llama-3.1-8B", "--gpus", "8", "--gbs", "64", "--seq", "4096", "--emit", "torchtitan", "-o", out, "--json", "--top", "1")
	if err := json.Unmarshal([]byte(js), &plan); err != nil || len(plan.Top) != 1 {
		t.Fatalf("plan: %v", err)
	}
	l := plan.Top[0].Step.Layout
	py, err := os.ReadFile(filepath.Join(out, "train_torchtitan.py"))
	if err != nil || !strings.Contains(string(py), "p.tensor_parallel_degree = "+strconv.FormatInt(l.TP, 10)+"\n") ||
		!strings.Contains(string(py), "p.pipeline_parallel_degree = "+strconv.FormatInt(l.PP, 10)+"\n") ||
		!strings.Contains(string(py), "import llama3_8b as base") {
		t.Errorf("train_torchtitan.py: %v\n%s", err, py)
	}
	// the release before config modules: a job TOML
	mustRun(t, db, "plan", "train", "Llama-3.1-8B", "--gpus", "8", "--gbs", "64", "--seq", "4096", "--emit", "torchtitan", "--emit-version", "0.2.2", "-o", out+"-0.2.2", "--top", "1")
	toml, err := os.ReadFile(filepath.Join(out+"-0.2.2", "train-torchtitan.toml"))
	if err != nil || !strings.Contains(string(toml), "tensor_parallel_degree = "+strconv.FormatInt(l.TP, 10)+"\n") ||
		!strings.Contains(string(toml), "pipeline_parallel_degree = "+strconv.FormatInt(l.PP, 10)+"\n") {
		t.Errorf("train-torchtitan.toml: %v\n%s", err, toml)
	}
	md := mustRun(t, db, "plan", "train", "Llama-3.1-8B", "--gpus", "8", "--gbs", "64", "--seq", "4096", "--emit", "megatron", "--top", "1")
	if !strings.Contains(md, "## Run it (megatron)") || !strings.Contains(md, "--tensor-model-parallel-size") {
		t.Errorf("--emit megatron without -o:\n%.1500s", md)
	}
	if _, _, err := run(t, db, "plan", "train", "Llama-3.1-8B", "--gpus", "8", "--gbs", "64", "--emit", "deepspeed"); err == nil || !strings.Contains(err.Error(), `"deepspeed"`) {
		t.Errorf("--emit deepspeed: %v", err)
	}
}

// Edge plans say what they rest on: a precision other than the published checkpoint's is another
// checkpoint (gpt-oss is MXFP4, DeepSeek-V3 FP8), and a small token budget is what bounds the
// batch; a 16-bit model at --dtype fp8 (quantized online by the engines) gets no such note.
func TestPlanServeEdgeNotes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"gpt-oss-120b", "--dtype", "fp8"}, "gpt-oss-120b's published checkpoint is mxfp4 (its config's quantization_config); this plans FP8 weights"},
		{[]string{"DeepSeek-V3", "--dtype", "bf16", "--chip", "H200", "--max-gpus", "16"}, "DeepSeek-V3's published checkpoint is fp8"},
		{[]string{"Llama-3.1-8B", "--dtype", "fp8"}, ""},
	} {
		_, stderr, err := run(t, db, append([]string{"plan", "serve", "--users", "10", "--top", "1"}, c.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if c.stderr == "" && strings.Contains(stderr, "published checkpoint") || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%v: stderr %q", c.args, stderr)
		}
	}
	out := mustRun(t, db, "plan", "serve", "Llama-3.1-8B", "--users", "500", "--token-budget", "256", "--isl", "2000", "--osl", "200", "--top", "1")
	if !strings.Contains(out, "**The token budget bounds the batch:** a step of 256 tokens") {
		t.Errorf("--token-budget 256 with 500 users:\n%.2000s", out)
	}
}

// A model whose published checkpoint is quantized is planned in that precision unless a dtype
// flag says otherwise, and the note says so: DeepSeek-V3's FP8 blocks need fewer GPUs than its
// 16-bit weights (whose note says they are another checkpoint); a 16-bit checkpoint gets no note.
func TestPlanServeCheckpointPrecision(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	gpus := func(args ...string) (int, string) {
		t.Helper()
		out, stderr, err := run(t, db, append([]string{"plan", "serve", "--users", "10", "--top", "1", "--json"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v %s", args, err, stderr)
		}
		var p struct {
			Best []struct {
				GPUs int `json:"gpus"`
			} `json:"best"`
		}
		if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Best) == 0 {
			t.Fatalf("%v: %v %.200s", args, err, out)
		}
		return p.Best[0].GPUs, stderr
	}
	native, note := gpus("DeepSeek-V3")
	if !strings.Contains(note, "checkpoint is fp8") || !strings.Contains(note, "--dtype bf16") {
		t.Errorf("the note must name the checkpoint's precision and the way out: %q", note)
	}
	bf16, note16 := gpus("DeepSeek-V3", "--dtype", "bf16")
	if !strings.Contains(note16, "this plans BF16 weights") || !(native < bf16) {
		t.Errorf("FP8 checkpoint on %d GPUs, bf16 on %d (note %q)", native, bf16, note16)
	}
	if _, note := gpus("Llama-3.1-8B"); strings.Contains(note, "checkpoint is") {
		t.Errorf("a 16-bit checkpoint has no note: %q", note)
	}
}
