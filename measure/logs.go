package measure

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Megatron-LM's training log (megatron/training/training.py training_log): one line per logged
// iteration, "iteration N/ M | ... | elapsed time per iteration (ms): T | ... | global batch
// size: B |", with or without a leading timestamp and TFLOP/s.
var megatronLine = regexp.MustCompile(`(?m)iteration\s+(\d+)/\s*(\d+)\s*\|.*?elapsed time per iteration \(ms\):\s*([0-9.]+)`)
var megatronGBS = regexp.MustCompile(`global batch size:\s*(\d+)`)

// torchtitan's metrics line (torchtitan/components/metrics.py): "step: N  loss: ...  memory:
// ...  tps: 5,856  tflops: ...  mfu: ...%" (ANSI colours stripped first).
var titanLine = regexp.MustCompile(`(?m)step:\s*(\d+)\s+loss:\s*\S+.*?tps:\s*([0-9,]+)`)
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// mrepLine is the line an emitted training script prints before it starts, so the log carries
// the plan it ran: "mrep-plan: key=value key=value ...".
var mrepLine = regexp.MustCompile(`(?m)mrep-plan:\s*(.*)$`)

// warmup is how many of a log's first steps are left out of its figures: the first iterations
// carry compilation, allocator growth and data-loader start.
func warmup(n int) int {
	switch {
	case n >= 10:
		return n / 5
	case n >= 3:
		return 1
	}
	return 0
}

func metaOf(text string) map[string]string {
	meta := map[string]string{}
	for _, m := range mrepLine.FindAllStringSubmatch(text, -1) {
		for _, kv := range strings.Fields(m[1]) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				meta["mrep_"+strings.TrimPrefix(k, "mrep_")] = v
			}
		}
	}
	return meta
}

// parseMegatron reads a log's iteration lines: the median time per iteration after the first
// ones, and the global batch.
func parseMegatron(name, text string) ([]Run, error) {
	var times []float64
	var gbs int64
	last := int64(0)
	for _, line := range strings.Split(text, "\n") {
		m := megatronLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		it, _ := strconv.ParseInt(m[1], 10, 64)
		ms, err := strconv.ParseFloat(m[3], 64)
		if err != nil || !(ms > 0) {
			return nil, fmt.Errorf("%s: iteration %d: elapsed time %q is not a positive number", name, it, m[3])
		}
		if it <= last {
			// a restarted job logs its iterations again: the figures are the last run's
			times, last = nil, 0
		}
		last = it
		times = append(times, ms/1e3)
		if g := megatronGBS.FindStringSubmatch(line); g != nil {
			gbs, _ = strconv.ParseInt(g[1], 10, 64)
		}
	}
	if len(times) == 0 {
		// the file looked like a Megatron log, but no iteration line carries a time
		return nil, fmt.Errorf("%s: no iteration line with an elapsed time per iteration: %w", name, ErrNotResult)
	}
	times = times[warmup(len(times)):]
	r := Run{Tool: "megatron", Record: 1, Engine: "megatron", Steps: int64(len(times)), GBS: gbs, Meta: metaOf(text),
		Figures: []Figure{{"step_time", "median", median(times)}}}
	return []Run{r}, nil
}

// parseTorchtitan reads a log's metrics lines: the median tokens per second per GPU (torchtitan's
// tps is per device) after the first steps.
func parseTorchtitan(name, text string) ([]Run, error) {
	var tps []float64
	last := int64(-1)
	for _, line := range strings.Split(ansi.ReplaceAllString(text, ""), "\n") {
		m := titanLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		step, _ := strconv.ParseInt(m[1], 10, 64)
		v, err := strconv.ParseFloat(strings.ReplaceAll(m[2], ",", ""), 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("%s: step %d: tps %q is not a positive number", name, step, m[2])
		}
		if step <= last {
			tps, last = nil, -1
		}
		last = step
		tps = append(tps, v)
	}
	if len(tps) == 0 {
		return nil, fmt.Errorf("%s: no step line with tps: %w", name, ErrNotResult)
	}
	tps = tps[warmup(len(tps)):]
	r := Run{Tool: "torchtitan", Record: 1, Engine: "fsdp", Steps: int64(len(tps)), Meta: metaOf(text),
		Figures: []Figure{{"tokens_per_gpu", "median", median(tps)}}}
	return []Run{r}, nil
}

// trtllm-bench's report (tensorrt_llm/bench/dataclasses/reporting.py report_statistics): "Key:
// value" lines, the per-request TTFT and TPOT breakdowns as "[TTFT] P50    : v".
var reportLine = regexp.MustCompile(`(?m)^([A-Za-z][^:\n]*?):\s+(\S+)\s*$`)
var breakdown = regexp.MustCompile(`(?m)^\[(TTFT|TPOT|Latency)\]\s+(AVERAGE|P50|P90|P99)\s*:\s*([0-9.eE+-]+)`)

func parseTRTLLMBench(name, text string) ([]Run, error) {
	kv := map[string]string{}
	for _, m := range reportLine.FindAllStringSubmatch(text, -1) {
		kv[strings.TrimSpace(m[1])] = m[2]
	}
	f := func(k string) float64 { v, _ := strconv.ParseFloat(kv[k], 64); return v }
	r := Run{Tool: "trtllm-bench", Record: 1, Engine: "trtllm", Model: kv["Model"], EngineVersion: kv["TensorRT-LLM Version"],
		TP: int64(f("TP Size")), PP: int64(f("PP Size")), EP: int64(f("EP Size")), Requests: int64(f("Number of requests")),
		ISL: f("Average Input Length (tokens)"), OSL: f("Average Output Length (tokens)")}
	if !(r.ISL >= 1) || !(r.OSL >= 1) || r.Requests < 1 {
		return nil, fmt.Errorf("%s: the report's REQUEST DETAILS (number of requests, average input and output lengths) are missing", name)
	}
	// trtllm-bench throughput queues every request at once (Issue Rate is its own pace): the
	// concurrency it reports is what the engine held on average
	r.Users = float64(r.Requests)
	if c := f("Number of concurrent requests"); c >= 1 {
		r.Users = c
	}
	// 0.17's report names the output throughput "Token Throughput" (128 out x 221.8 req/s in
	// its docs' sample is its 28,390)
	if v := f("Total Output Throughput (tokens/sec)"); v > 0 {
		r.Figures = append(r.Figures, Figure{"output_throughput", "mean", v})
	} else if v := f("Token Throughput (tokens/sec)"); v > 0 {
		r.Figures = append(r.Figures, Figure{"output_throughput", "mean", v})
	}
	metric := map[string]string{"TTFT": "ttft", "TPOT": "tpot", "Latency": "e2e"}
	stat := map[string]string{"AVERAGE": "mean", "P50": "median", "P90": "p90", "P99": "p99"}
	for _, m := range breakdown.FindAllStringSubmatch(text, -1) {
		if v, err := strconv.ParseFloat(m[3], 64); err == nil && v > 0 {
			r.Figures = append(r.Figures, Figure{metric[m[1]], stat[m[2]], v / 1e3})
		}
	}
	if len(r.Figures) == 0 {
		return nil, fmt.Errorf("%s: the report's PERFORMANCE OVERVIEW has no throughput or latency figure", name)
	}
	return []Run{r}, nil
}
