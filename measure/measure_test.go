package measure

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/calib"
)

// read parses a fixture of testdata (real files and pasted output of each tool, provenance in
// testdata/SOURCES.md).
func read(t *testing.T, path string) []Run {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Parse(path, b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return runs
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s: %.12g, want %.12g", what, got, want)
	}
}

// figure is the run's value of metric at stat (NaN when absent).
func figure(r Run, metric, stat string) float64 {
	for _, f := range r.Figures {
		if f.Metric == metric && f.Stat == stat {
			return f.Value
		}
	}
	return math.NaN()
}

// Each tool's file is recognised by its content and its figures read as the file states them,
// in seconds and tokens/s (values checked by hand against the fixtures).
func TestParseEachTool(t *testing.T) {
	v := read(t, "../../examples/results/vllm-bench-llama-3.2-3b-4xl40s.jsonl")
	if len(v) != 9 || v[0].Tool != "vllm" || v[0].Model != "meta-llama/Llama-3.2-3B-Instruct" || v[0].Rate != 10 || v[0].Users != 0 || v[0].Requests != 300 {
		t.Fatalf("vllm: %d runs, first %+v", len(v), v[0])
	}
	near(t, "vllm mean TTFT", figure(v[0], "ttft", "mean"), 54.59561144333596e-3)
	near(t, "vllm p99 TPOT", figure(v[0], "tpot", "p99"), 15.793261194984588e-3)
	near(t, "vllm output tok/s", figure(v[0], "output_throughput", "mean"), 2258.212337970085)
	near(t, "vllm ISL", v[0].ISL, 299700.0/300)

	s := read(t, "sglang/h200_llama_3_3_70b_online_output.jsonl")
	if len(s) != 7 || s[0].Tool != "sglang" || s[0].Rate != 1 || s[0].Requests != 300 {
		t.Fatalf("sglang: %d runs, first %+v", len(s), s[0])
	}
	near(t, "sglang median TTFT", figure(s[0], "ttft", "median"), 85.74514742940664e-3)
	near(t, "sglang mean e2e", figure(s[0], "e2e", "mean"), 7840.616212638561e-3)
	near(t, "sglang OSL", s[0].OSL, 160347.0/300)
	dp := read(t, "sglang/h200_deepseek_dp_mla_output.jsonl") // request_rate: Infinity
	if len(dp) != 1 || dp[0].Rate != 0 || dp[0].Users != 0 {
		t.Errorf("an all-at-once SGLang run: %+v", dp)
	}

	g := read(t, "genai-perf/perf_analyzer_issue298_streaming_genai_perf.json")[0]
	if g.Tool != "genai-perf" || g.Users != 100 || g.Model != "ensemble" || g.Engine != "trtllm" {
		t.Fatalf("genai-perf: %+v", g)
	}
	near(t, "genai-perf mean TTFT", figure(g, "ttft", "mean"), 184.63779366666665e-3)
	near(t, "genai-perf p99 ITL", figure(g, "tpot", "p99"), 2.2631232999999997e-3)
	near(t, "genai-perf output tok/s", figure(g, "output_throughput", "mean"), 44190.56002502682)
	near(t, "genai-perf ISL", g.ISL, 200.85)
	if ns := read(t, "genai-perf/perf_analyzer_issue298_nonstreaming_genai_perf.json")[0]; !math.IsNaN(figure(ns, "tpot", "mean")) {
		t.Errorf("a non-streaming run has no inter-token latency: %+v", ns.Figures)
	}

	tb := read(t, "trtllm-bench/nvidia_blog_pytorch_streaming_report.txt")[0]
	if tb.Tool != "trtllm-bench" || tb.EngineVersion != "0.21.0rc0" || tb.TP != 1 || tb.Requests != 100 || tb.Users != 94.605 {
		t.Fatalf("trtllm-bench: %+v", tb)
	}
	near(t, "trtllm-bench p99 TTFT", figure(tb, "ttft", "p99"), 232.4339e-3)
	near(t, "trtllm-bench mean TPOT", figure(tb, "tpot", "mean"), 7.3272e-3)
	near(t, "trtllm-bench output tok/s", figure(tb, "output_throughput", "mean"), 11076.77)
	old := read(t, "trtllm-bench/perf_benchmarking_md_v0.17_engine_quickstart_output.txt")[0]
	near(t, "trtllm-bench 0.17 token throughput", figure(old, "output_throughput", "mean"), 28390.4265)
	if old.Users != 3000 {
		t.Errorf("0.17 queues all 3000 requests: users %g", old.Users)
	}
	read(t, "trtllm-bench/perf_benchmarking_md_multimodal_sample_output.txt")

	// logs: the median after the first steps (warm-up)
	m := read(t, "megatron-lm/megatron_lm_issue756_mixtral_iteration_lines.log")[0]
	near(t, "megatron median step", figure(m, "step_time", "median"), (5533.8+5718.6)/2/1e3)
	if m.GBS != 128 || m.Steps != 2 {
		t.Errorf("megatron: %+v", m)
	}
	e := read(t, "megatron-lm/epfllm_megatron_llm_issue11_iteration_lines_no_timestamp.log")[0]
	near(t, "megatron (no timestamp) median step", figure(e, "step_time", "median"), 140.1979)
	tt := read(t, "torchtitan/torchtitan_pr1287_2025-06_no_grad_norm.log")[0]
	near(t, "torchtitan median tps", figure(tt, "tokens_per_gpu", "median"), 5864)
	near(t, "torchtitan one line", figure(read(t, "torchtitan/torchtitan_repo_graph_trainer_CLAUDE_md_step20.log")[0], "tokens_per_gpu", "median"), 4376)
	if n := read(t, "torchtitan/torchtitan_pr3393_2026-05_with_grad_norm.log")[0]; n.Steps != 7 {
		t.Errorf("torchtitan with grad_norm: %d steps after the first", n.Steps)
	}
	h := read(t, "hf-trainer/t5_summarization_demo_trainer_state.json")[0]
	near(t, "trainer step time", figure(h, "step_time", "mean"), 54713.1806/215337)
	near(t, "trainer (4.6) step time", figure(read(t, "hf-trainer/text_summarizer_old_format_trainer_state.json")[0], "step_time", "mean"), 542.8804/693)
	read(t, "hf-trainer/whisper_small_hi_trainer_state_with_eval.json")
}

// Bad files are refused naming the file, the place and the problem.
func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		name, body, want string
		notResult        bool
	}{
		{"empty.json", "  \n", "empty", true},
		{"notes.txt", "hello\nworld\n", "not a benchmark result", true},
		{"other.json", `{"a": 1}`, "other.json:1: not a benchmark result", true},
		{"broken.jsonl", "{\"mean_ttft_ms\": 1, \"completed\": 3, \"total_input_tokens\": 30, \"total_output_tokens\": 30}\n{\"mean_ttft_ms\": \n", "broken.jsonl:2: not JSON", false},
		{"none.json", `{"mean_ttft_ms": 5, "completed": 0}`, "none.json:1: completed 0: no request completed", false},
		{"nolen.json", `{"mean_ttft_ms": 5, "completed": 3}`, "the lengths are missing", false},
		{"trainer.json", `{"log_history": [{"loss": 1, "step": 5}]}`, "the run did not finish", false},
		{"titan.log", "step: 3  loss: 1.0  memory: 1GiB(1%)  tps: 0  tflops: 1  mfu: 1%\n", "tps \"0\" is not a positive number", false},
	} {
		_, err := Parse(c.name, []byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, ErrNotResult) != c.notResult {
			t.Errorf("%s: %v, want %q (not a result: %v)", c.name, err, c.want, c.notResult)
		}
	}
}

// A run becomes calibration rows the time model predicts: context from the flags first, then an
// emitted plan's mrep_* metadata, then the file; what is missing is named with its flag.
func TestRowsFromRuns(t *testing.T) {
	v := read(t, "../../examples/results/vllm-bench-llama-3.2-3b-4xl40s.jsonl")[0]
	if _, err := v.Rows(v.Resolve(Context{}), "x", "f"); err == nil || !strings.Contains(err.Error(), "give --chip") {
		t.Errorf("no chip: %v", err)
	}
	v.Meta["mrep_chip"], v.Meta["mrep_model"], v.Meta["mrep_tp"] = "L40S", "Llama-3.2-3B-Instruct", "1"
	c := v.Resolve(Context{Chip: "H100-SXM"})
	if c.Chip != "H100-SXM" || c.Model != "Llama-3.2-3B-Instruct" || c.GPUs != 1 || c.Engine != "vllm" {
		t.Fatalf("context %+v", c)
	}
	rows, err := v.Rows(c, "abc", "nerdalert")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(v.Figures) {
		t.Fatalf("%d rows for %d figures", len(rows), len(v.Figures))
	}
	r := rows[0]
	if r.Kind != calib.KindBenchServe || r.RequestRate != 10 || r.Concurrency != 0 || r.ISL != 999 || r.Requests != 300 || r.ID != "abc#1-"+r.Metric+"-"+r.Stat {
		t.Errorf("row %+v", r)
	}
	m := read(t, "megatron-lm/megatron_lm_issue756_mixtral_iteration_lines.log")[0]
	if _, err := m.Rows(m.Resolve(Context{Model: "Mixtral-8x7B-v0.1", Chip: "H100-SXM"}), "m", "log"); err == nil || !strings.Contains(err.Error(), "give --seq and --gbs") {
		t.Errorf("megatron without seq: %v", err)
	}
	tr, err := m.Rows(m.Resolve(Context{Model: "Mixtral-8x7B-v0.1", Chip: "H100-SXM", Seq: 4096, GPUs: 64, TP: 2, EP: 8, PP: 4}), "m", "log")
	if err != nil || len(tr) != 1 || tr[0].Kind != calib.KindTrainStep || tr[0].GBS != 128 || tr[0].Seq != 4096 {
		t.Errorf("megatron rows %+v %v", tr, err)
	}
}
