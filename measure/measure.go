// Package measure reads what users measure with the tools they run — vLLM's `vllm bench serve
// --save-result` JSON, SGLang's bench_serving JSONL, genai-perf's profile export, trtllm-bench's
// report, Megatron-LM's and torchtitan's training logs, the Hugging Face Trainer's
// trainer_state.json — recognised by their content, into runs: what ran, as far as the file
// says, and the figures measured. Rows turns a run into calibration rows (calib.Row), the
// form validate and calibrate predict and fit.
package measure

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Tools are the writers Parse recognises, as Run.Tool names them.
var Tools = []string{"vllm", "sglang", "genai-perf", "trtllm-bench", "megatron", "torchtitan", "hf-trainer"}

// Figure is one measured figure: Metric ttft, tpot, e2e (s), output_throughput (tok/s),
// step_time (s) or tokens_per_gpu (tok/s per GPU); Stat mean, median, p90 or p99.
type Figure struct {
	Metric string  `json:"metric"`
	Stat   string  `json:"stat"`
	Value  float64 `json:"value"`
}

// Run is one benchmark run or training job as its tool reported it.
type Run struct {
	Tool   string `json:"tool"`
	Record int    `json:"record"` // which record of the file (line or object), from 1
	// What ran, as far as the file says ("" or 0 where it does not).
	Model         string `json:"model,omitempty"`
	Engine        string `json:"engine,omitempty"`
	EngineVersion string `json:"engine_version,omitempty"`
	TP            int64  `json:"tp,omitempty"`
	PP            int64  `json:"pp,omitempty"`
	EP            int64  `json:"ep,omitempty"`
	// Serving load: a closed loop of Users, or Poisson arrivals at Rate requests/s; Requests
	// completed; the mean prompt and output lengths.
	Users    float64 `json:"users,omitempty"`
	Rate     float64 `json:"rate,omitempty"`
	Requests int64   `json:"requests,omitempty"`
	ISL      float64 `json:"isl,omitempty"`
	OSL      float64 `json:"osl,omitempty"`
	// Training: the steps the figures come from and the global batch the log states.
	Steps int64 `json:"steps,omitempty"`
	GBS   int64 `json:"gbs,omitempty"`
	// Figures are what was measured; Meta the run's own metadata (vLLM's --metadata pairs,
	// SGLang's --tag, the mrep_* keys an emitted plan writes).
	Figures []Figure          `json:"figures"`
	Meta    map[string]string `json:"meta,omitempty"`
}

// ErrNotResult: the file is none of the result formats mrep reads.
var ErrNotResult = errors.New("not a benchmark result or training log mrep reads")

// Parse reads one result file: its runs, or an error naming the file, the place and the
// problem. A file of none of the formats is ErrNotResult.
func Parse(name string, data []byte) ([]Run, error) {
	trim := bytes.TrimSpace(data)
	if len(trim) == 0 {
		return nil, fmt.Errorf("%s: empty: %w", name, ErrNotResult)
	}
	// JSON starts with '{'; a log line may start with '[' (a timestamp, a rank), so a '[' is
	// JSON only when the whole file is
	if trim[0] == '{' || trim[0] == '[' && json.Valid(pythonJSON(trim)) {
		return parseJSON(name, trim)
	}
	text := string(data)
	switch {
	case strings.Contains(text, "= PERFORMANCE OVERVIEW") && strings.Contains(text, "Request Throughput (req/sec):"):
		return parseTRTLLMBench(name, text)
	case megatronLine.MatchString(text):
		return parseMegatron(name, text)
	case titanLine.MatchString(text):
		return parseTorchtitan(name, text)
	}
	return nil, fmt.Errorf("%s: %w (vLLM or SGLang benchmark JSON/JSONL, genai-perf's profile_export_genai_perf.json, trtllm-bench's report, Megatron-LM or torchtitan log lines, trainer_state.json)", name, ErrNotResult)
}

// parseJSON reads a JSON document, or JSON lines, of benchmark results. Bare Infinity and NaN
// (Python's json writes them; SGLang's request_rate is Infinity for an all-at-once run) read as
// null.
func parseJSON(name string, data []byte) ([]Run, error) {
	clean := pythonJSON(data)
	var one map[string]any
	dec := json.NewDecoder(bytes.NewReader(clean))
	dec.UseNumber()
	if err := dec.Decode(&one); err == nil && !dec.More() {
		r, err := fromObject(name, 1, one)
		if err != nil {
			return nil, err
		}
		return []Run{r}, nil
	}
	// JSON lines: every non-empty line one result
	var runs []Run
	for i, line := range bytes.Split(clean, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var obj map[string]any
		d := json.NewDecoder(bytes.NewReader(line))
		d.UseNumber()
		if err := d.Decode(&obj); err != nil {
			if len(runs) == 0 {
				// nothing read as a result yet: not a result file (a truncated dump, say)
				return nil, fmt.Errorf("%s:%d: not JSON (%v): %w", name, i+1, err, ErrNotResult)
			}
			return nil, fmt.Errorf("%s:%d: not JSON (%v): a result file is one JSON object or one object per line", name, i+1, err)
		}
		r, err := fromObject(name, i+1, obj)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%s: no results: %w", name, ErrNotResult)
	}
	return runs, nil
}

// fromObject recognises one JSON result by its keys.
func fromObject(name string, rec int, o map[string]any) (Run, error) {
	where := fmt.Sprintf("%s:%d", name, rec)
	switch {
	case o["log_history"] != nil:
		return fromTrainerState(where, o)
	case isObject(o["time_to_first_token"]) || isObject(o["request_throughput"]):
		return fromGenAIPerf(where, o)
	case has(o, "mean_ttft_ms", "median_ttft_ms"):
		return fromBenchServe(where, rec, o)
	}
	return Run{}, fmt.Errorf("%s: %w (a JSON object without mean_ttft_ms/median_ttft_ms, time_to_first_token or log_history)", where, ErrNotResult)
}

// fromBenchServe reads vLLM's and SGLang's benchmark result (vllm/benchmarks/serve.py
// main_async's result_json; sglang bench_serving's result line): the same figure names, in ms.
// SGLang's lines carry dataset_name and total_output_tokens_retokenized, vLLM's model_id.
func fromBenchServe(where string, rec int, o map[string]any) (Run, error) {
	r := Run{Tool: "vllm", Record: rec, Engine: "vllm", Meta: map[string]string{}}
	if str(o["backend"]) == "sglang" || o["total_output_tokens_retokenized"] != nil || o["dataset_name"] != nil && o["model_id"] == nil {
		r.Tool, r.Engine = "sglang", "sglang"
	}
	r.Model = firstStr(o, "model_id", "model")
	if info, ok := o["server_info"].(map[string]any); ok { // SGLang 0.5.x: the server's own arguments
		r.Model = firstStr(info, "model_path")
		r.EngineVersion = str(info["version"])
		r.TP, r.PP, r.EP = num64(info["tp_size"]), num64(info["pp_size"]), num64(info["ep_size"])
	}
	completed := num(o["completed"])
	if !(completed >= 1) {
		return Run{}, fmt.Errorf("%s: completed %v: no request completed, nothing was measured", where, o["completed"])
	}
	r.Requests = int64(completed)
	r.ISL, r.OSL = num(o["total_input_tokens"])/completed, num(o["total_output_tokens"])/completed
	if !(r.ISL >= 1) || !(r.OSL >= 1) {
		return Run{}, fmt.Errorf("%s: total_input_tokens %v, total_output_tokens %v over %v requests: the lengths are missing", where, o["total_input_tokens"], o["total_output_tokens"], o["completed"])
	}
	if c := num(o["max_concurrency"]); c >= 1 {
		r.Users = c
	}
	if rate := num(o["request_rate"]); rate > 0 && !math.IsInf(rate, 0) {
		r.Rate = rate
	}
	for _, m := range []struct{ metric, key string }{{"ttft", "ttft"}, {"tpot", "tpot"}, {"e2e", "e2el"}, {"e2e", "e2e_latency"}} {
		for _, s := range []struct{ stat, prefix string }{{"mean", "mean_"}, {"median", "median_"}, {"p90", "p90_"}, {"p99", "p99_"}} {
			if v := num(o[s.prefix+m.key+"_ms"]); v > 0 {
				r.Figures = append(r.Figures, Figure{m.metric, s.stat, v / 1e3})
			}
		}
	}
	if v := num(o["output_throughput"]); v > 0 {
		r.Figures = append(r.Figures, Figure{"output_throughput", "mean", v})
	}
	if len(r.Figures) == 0 {
		return Run{}, fmt.Errorf("%s: no figure (mean_ttft_ms, median_tpot_ms, output_throughput...) is a positive number", where)
	}
	// vLLM's --metadata pairs sit among the top-level keys; SGLang's --tag is one string
	for k, v := range o {
		if strings.HasPrefix(k, "mrep_") {
			r.Meta[k] = str(v)
		}
	}
	for _, kv := range strings.FieldsFunc(str(o["tag"]), func(c rune) bool { return c == ';' || c == ' ' }) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			r.Meta[k] = v
		}
	}
	return r, nil
}

// fromGenAIPerf reads genai-perf's profile_export_genai_perf.json (genai_perf/export_data/
// json_exporter.py): each metric an object of avg/p50/p90/p99 with its unit, and input_config.
func fromGenAIPerf(where string, o map[string]any) (Run, error) {
	r := Run{Tool: "genai-perf", Record: 1, Meta: map[string]string{}}
	cfg, _ := o["input_config"].(map[string]any)
	if models, ok := cfg["model"].([]any); ok && len(models) > 0 {
		r.Model = str(models[0])
	}
	// genai-perf's backend names the engine behind the server (tensorrtllm, vllm): mrep's names
	r.Engine = map[string]string{"tensorrtllm": "trtllm", "vllm": "vllm"}[str(cfg["backend"])]
	if c := num(cfg["concurrency"]); c >= 1 {
		r.Users = c
	}
	if rate := num(cfg["request_rate"]); rate > 0 {
		r.Rate = rate
	}
	stat := func(metric string) map[string]any { m, _ := o[metric].(map[string]any); return m }
	r.ISL, r.OSL = num(stat("input_sequence_length")["avg"]), num(stat("output_sequence_length")["avg"])
	if !(r.ISL >= 1) || !(r.OSL >= 1) {
		return Run{}, fmt.Errorf("%s: input_sequence_length or output_sequence_length has no avg: the lengths are missing", where)
	}
	scale := func(m map[string]any) (float64, error) {
		switch u := str(m["unit"]); u {
		case "ms":
			return 1e-3, nil
		case "s", "sec":
			return 1, nil
		case "tokens/sec":
			return 1, nil
		default:
			return 0, fmt.Errorf("unit %q", u)
		}
	}
	for _, m := range []struct{ metric, key string }{{"ttft", "time_to_first_token"}, {"tpot", "inter_token_latency"}, {"e2e", "request_latency"}, {"output_throughput", "output_token_throughput"}} {
		s := stat(m.key)
		if s == nil {
			continue
		}
		k, err := scale(s)
		if err != nil {
			return Run{}, fmt.Errorf("%s: %s: %v", where, m.key, err)
		}
		for _, st := range []struct{ stat, key string }{{"mean", "avg"}, {"median", "p50"}, {"p90", "p90"}, {"p99", "p99"}} {
			if m.metric == "output_throughput" && st.stat != "mean" {
				continue
			}
			if v := num(s[st.key]); v > 0 {
				r.Figures = append(r.Figures, Figure{m.metric, st.stat, v * k})
			}
		}
	}
	if len(r.Figures) == 0 {
		return Run{}, fmt.Errorf("%s: no figure (time_to_first_token, inter_token_latency, request_latency, output_token_throughput) has a value", where)
	}
	return r, nil
}

// fromTrainerState reads the Hugging Face Trainer's trainer_state.json (TrainerState
// .save_to_json): the last log_history entry with train_runtime is the run's summary.
func fromTrainerState(where string, o map[string]any) (Run, error) {
	hist, _ := o["log_history"].([]any)
	r := Run{Tool: "hf-trainer", Record: 1, Engine: "hf"}
	for i := len(hist) - 1; i >= 0; i-- {
		e, _ := hist[i].(map[string]any)
		rt, steps := num(e["train_runtime"]), num(e["step"])
		if rt > 0 && steps >= 1 {
			r.Steps = int64(steps)
			r.Figures = append(r.Figures, Figure{"step_time", "mean", rt / steps})
			return r, nil
		}
	}
	return Run{}, fmt.Errorf("%s: log_history has no entry with train_runtime and step: the run did not finish (the summary is written at its end)", where)
}

// pythonJSON turns Python's non-standard Infinity, -Infinity and NaN (outside strings) into
// null, so Go's decoder reads the file.
func pythonJSON(b []byte) []byte {
	var out []byte
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if in {
			out = append(out, c)
			if c == '\\' && i+1 < len(b) {
				i++
				out = append(out, b[i])
			} else if c == '"' {
				in = false
			}
			continue
		}
		switch {
		case c == '"':
			in = true
		case bytes.HasPrefix(b[i:], []byte("-Infinity")):
			out, i = append(out, "null"...), i+len("-Infinity")-1
			continue
		case bytes.HasPrefix(b[i:], []byte("Infinity")):
			out, i = append(out, "null"...), i+len("Infinity")-1
			continue
		case bytes.HasPrefix(b[i:], []byte("NaN")):
			out, i = append(out, "null"...), i+2
			continue
		}
		out = append(out, c)
	}
	return out
}

func isObject(v any) bool { _, ok := v.(map[string]any); return ok }

func has(o map[string]any, keys ...string) bool {
	for _, k := range keys {
		if _, ok := o[k]; ok {
			return true
		}
	}
	return false
}

// num is a JSON number (or a numeric string) as a float; NaN for anything else.
func num(v any) float64 {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err == nil {
			return f
		}
	case float64:
		return x
	case string:
		if x == "inf" {
			return math.Inf(1)
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return f
		}
	}
	return math.NaN()
}

func num64(v any) int64 {
	f := num(v)
	if f >= 1 && f < 1e9 {
		return int64(f)
	}
	return 0
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func firstStr(o map[string]any, keys ...string) string {
	for _, k := range keys {
		if s := str(o[k]); s != "" {
			return s
		}
	}
	return ""
}

// median of xs (sorted in place).
func median(xs []float64) float64 {
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
