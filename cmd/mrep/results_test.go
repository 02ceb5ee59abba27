package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/store"
)

const nerdalert = "../../examples/results/vllm-bench-llama-3.2-3b-4xl40s.jsonl"

// storedResults counts the results a history holds (-1: no history file).
func storedResults(t *testing.T, db string) int {
	t.Helper()
	if _, err := os.Stat(db); err != nil {
		return -1
	}
	s, err := store.Open(context.Background(), db, store.Options{Existing: true, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rs, err := s.Results(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(rs)
}

// A third party's vLLM benchmark results (nerdalert/vllm-bench-automation: Llama-3.2-3B on four
// L40S replicas behind a gateway) go into the history once the file's gaps are given; without
// them nothing is stored and the message names the flag; a second ingest adds nothing; a broken
// file stores nothing; dumps and results do not mix in one command.
func TestIngestResults(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "h.db")
	if _, _, err := run(t, db, "ingest", nerdalert); err == nil || !strings.Contains(err.Error(), "give --chip") || storedResults(t, db) != -1 {
		t.Fatalf("no chip: %v (history %d)", err, storedResults(t, db))
	}
	out := mustRun(t, db, "ingest", nerdalert, "--chip", "L40S", "--model", "Llama-3.2-3B-Instruct", "--replicas", "4")
	if !strings.Contains(out, "stored 9 new of 9 results (63 measured rows)") || storedResults(t, db) != 9 {
		t.Fatalf("ingest: %s", out)
	}
	if out := mustRun(t, db, "ingest", nerdalert, "--chip", "L40S", "--model", "Llama-3.2-3B-Instruct", "--replicas", "4"); !strings.Contains(out, "stored 0 new of 9") {
		t.Errorf("again: %s", out)
	}
	broken := filepath.Join(dir, "broken.jsonl")
	raw, _ := os.ReadFile(nerdalert)
	os.WriteFile(broken, append(raw, []byte("{\"mean_ttft_ms\": 3, \n")...), 0o644)
	if _, _, err := run(t, db, "ingest", broken, "--chip", "L40S", "--model", "Llama-3.2-3B-Instruct"); err == nil ||
		!strings.Contains(err.Error(), "broken.jsonl:10: not JSON") || !strings.Contains(err.Error(), "nothing was stored") || storedResults(t, db) != 9 {
		t.Errorf("broken file: %v (history %d)", err, storedResults(t, db))
	}
	if _, _, err := run(t, db, "ingest", nerdalert, "../../examples/dumps/gpt2.json.gz", "--chip", "L40S", "--model", "Llama-3.2-3B-Instruct"); exitCode(err) != exitUsage {
		t.Errorf("results and dumps together: %v", err)
	}
	if _, _, err := run(t, db, "ingest", nerdalert, "--chip", "L40S", "--model", "no-such-model"); err == nil || storedResults(t, db) != 9 {
		t.Errorf("unknown model: %v", err)
	}

	// measured beside predicted, every figure
	var rep struct {
		Rows []struct {
			ID        string  `json:"id"`
			Measured  float64 `json:"measured"`
			Predicted float64 `json:"predicted"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "validate", "--from-history", "--json")), &rep); err != nil || len(rep.Rows) != 63 {
		t.Fatalf("validate --from-history: %v, %d rows", err, len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if !(r.Predicted > 0) || !(r.Measured > 0) {
			t.Errorf("%s: measured %g, predicted %g", r.ID, r.Measured, r.Predicted)
		}
	}
	// two measured runs side by side: the rate tripled, and the simulation says which part of
	// the step grew with it
	d := mustRun(t, db, "diff", "6ef60c057af5#1", "6ef60c057af5#2")
	if !strings.Contains(d, "| tpot median | 13.69 ms | 25.47 ms | +86% |") || !strings.Contains(d, "What moved, as mrep's simulation of each run sees it: the step goes from") ||
		!strings.Contains(d, "| Attention |") {
		t.Errorf("diff of two measured runs:\n%s", d)
	}
	if out := mustRun(t, db, "show", "6ef60c057af5#2"); !strings.Contains(out, "Measured run 6ef60c057af5#2: vllm: 900 requests") || !strings.Contains(out, "`6ef60c057af5#2-tpot-median`") {
		t.Errorf("show of a measured run:\n%s", out)
	}
	if _, _, err := run(t, db, "diff", "6ef60c057af5#1", "000000000000#7"); err == nil || !strings.Contains(err.Error(), "no measured serving run 000000000000#7") {
		t.Errorf("an unknown measured run: %v", err)
	}
	// the fit writes a chips file whose figures then time the plans
	chipsFile := filepath.Join(dir, "mine.json")
	out = mustRun(t, db, "calibrate", "--from-history", "--fit", "step_overhead_us", "--where", "stat=median", "--where", "kind=bench_serve", "-o", chipsFile)
	if !strings.Contains(out, "| `step_overhead_us` | 0 |") || !strings.Contains(out, "each run's rows predicted by a fit to the other runs' rows") {
		t.Errorf("calibrate --from-history:\n%s", out)
	}
	if _, err := os.Stat(chipsFile); err != nil {
		t.Fatal(err)
	}
	one := filepath.Join(dir, "one.db")
	first := filepath.Join(dir, "first.jsonl")
	os.WriteFile(first, []byte(strings.SplitN(string(raw), "\n", 2)[0]+"\n"), 0o644)
	mustRun(t, one, "ingest", first, "--chip", "L40S", "--model", "Llama-3.2-3B-Instruct", "--replicas", "4")
	if _, _, err := run(t, one, "calibrate", "--from-history", "--fit", "step_overhead_us,request_overhead_us"); err == nil || !strings.Contains(err.Error(), "1 measured runs for 2 parameters") {
		t.Errorf("one run, two parameters: %v", err)
	}
	// a history copied whole keeps what was measured, once
	team := filepath.Join(dir, "team.db")
	if out := mustRun(t, db, "copy", "--to", team); !strings.Contains(out, "copied 9 measured results") || storedResults(t, team) != 9 {
		t.Errorf("copy: %s", out)
	}
	if out := mustRun(t, db, "copy", "--to", team); strings.Contains(out, "measured results") || storedResults(t, team) != 9 {
		t.Errorf("copy again: %s", out)
	}
	runsOnly := filepath.Join(dir, "runs.db")
	mustRun(t, runsOnly, "ingest", "../../examples/dumps/gpt2.json.gz")
	if _, _, err := run(t, runsOnly, "validate", "--from-history"); err == nil || !strings.Contains(err.Error(), "holds no measured results") {
		t.Errorf("a history of runs only: %v", err)
	}
}

// The loop closes by itself: an emitted plan's benchmark writes the plan's id and what ran into
// its result file (vLLM's --metadata), and ingest reads it back with no flag.
func TestEmittedPlanResultRoundTrip(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "h.db")
	out := mustRun(t, db, "plan", "serve", "Llama-3.1-8B", "--users", "64", "--isl", "1000", "--osl", "200", "--top", "1", "--emit", "vllm")
	m := regexp.MustCompile(`--metadata ([^\\\n]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no --metadata in the emitted benchmark:\n%s", out)
	}
	// what `vllm bench serve --save-result --metadata ...` writes (vllm/benchmarks/serve.py
	// main_async: the metadata pairs sit among result_json's own keys); the figures are a run's
	result := map[string]any{"date": "20261126-010000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B", "num_prompts": 640,
		"request_rate": "inf", "max_concurrency": 64, "duration": 120.5, "completed": 640, "total_input_tokens": 640000, "total_output_tokens": 128000,
		"output_throughput": 1062.2, "mean_ttft_ms": 180.5, "median_ttft_ms": 150.2, "p99_ttft_ms": 900.1, "mean_tpot_ms": 55.4, "median_tpot_ms": 54.9, "p99_tpot_ms": 70.2}
	plan := ""
	for _, kv := range strings.Fields(m[1]) {
		k, v, _ := strings.Cut(kv, "=")
		result[k] = v
		if k == "mrep_plan" {
			plan = v
		}
	}
	file := filepath.Join(dir, "deploy-1-vllm-result.json")
	b, _ := json.Marshal(result)
	os.WriteFile(file, b, 0o644)
	if out := mustRun(t, db, "ingest", file); !strings.Contains(out, "stored 1 new of 1 results (7 measured rows)") {
		t.Fatalf("ingest of the emitted plan's result: %s", out)
	}
	s, err := store.Open(context.Background(), db, store.Options{Existing: true, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rs, _ := s.Results(context.Background())
	if len(rs) != 1 || rs[0].Plan != plan || plan == "" || !strings.Contains(rs[0].Rows, `"chip":"H100-SXM"`) || !strings.Contains(rs[0].Rows, `"model":"Llama-3.1-8B"`) ||
		!strings.Contains(rs[0].Rows, `"engine_version":"0.33.0"`) || !strings.Contains(rs[0].Rows, `"concurrency":64`) {
		t.Errorf("stored %+v (plan %s)", rs, plan)
	}
}

// A training plan's emitted script prints the plan into the log it starts; Megatron-LM's
// iteration lines after it (here a real log's, from NVIDIA/Megatron-LM issue #756) are then
// ingested with no flag, as one training step of that layout.
func TestEmittedTrainingLogRoundTrip(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "h.db")
	out := mustRun(t, db, "plan", "train", "Llama-3.1-8B", "--gpus", "16", "--gbs", "128", "--seq", "4096", "--top", "1", "--emit", "megatron")
	m := regexp.MustCompile(`echo '(mrep-plan: [^']+)'`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no mrep-plan line in the emitted script:\n%.3000s", out)
	}
	iters, err := os.ReadFile("../../measure/testdata/megatron-lm/megatron_lm_issue756_mixtral_iteration_lines.log")
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "train.log")
	os.WriteFile(log, append([]byte(m[1]+"\n"), iters...), 0o644)
	if out := mustRun(t, db, "ingest", log); !strings.Contains(out, "stored 1 new of 1 results (1 measured rows)") {
		t.Fatalf("ingest of the training log: %s", out)
	}
	var rep struct {
		Rows []struct {
			Phase     string  `json:"phase"`
			Measured  float64 `json:"measured"`
			Predicted float64 `json:"predicted"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "validate", "--from-history", "--json")), &rep); err != nil || len(rep.Rows) != 1 ||
		math.Abs(rep.Rows[0].Measured-(5533.8+5718.6)/2/1e3) > 1e-9 || !(rep.Rows[0].Predicted > 0) {
		t.Errorf("validate --from-history: %v %+v", err, rep.Rows)
	}
}

// The README's measured-loop example is real output: its commands run in order on one history
// (a plan, the ingest of a shipped result file, validate and calibrate --from-history, the plan
// on the fitted figures); each block is the command's output (a plan's through its table).
func TestREADMEMeasuredLoop(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	start, end := strings.Index(s, "<!-- measured-loop -->"), strings.Index(s, "<!-- /measured-loop -->")
	if start < 0 || end < start {
		t.Fatal("README has no measured-loop section")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "loop.db")
	blocks := strings.Split(s[start:end], "```console\n")[1:]
	if len(blocks) != 6 {
		t.Fatalf("%d blocks, want the plan, ingest, validate, diff, calibrate and the next plan", len(blocks))
	}
	for _, raw := range blocks {
		b := consoleBlock(t, raw)
		cmd, want, args := b.cmd, b.want, b.args
		argv := readmeArgs(strings.Fields(args))
		for i, a := range argv {
			if a == "mychips.json" {
				argv[i] = filepath.Join(dir, a)
			}
		}
		out := mustRun(t, db, argv...)
		out = strings.ReplaceAll(out, "../../examples/", "examples/")
		if strings.Contains(args, "plan serve") {
			out = planHead(out)
		}
		if *update {
			s = strings.Replace(s, b.text, cmd+"\n"+out, 1)
			continue
		}
		if out != want {
			t.Errorf("README block for %q is stale (go test ./cmd/mrep -run READMEMeasuredLoop -update); the command now prints:\n%s", args, out)
		}
	}
	if *update {
		if err := os.WriteFile("../../README.md", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
