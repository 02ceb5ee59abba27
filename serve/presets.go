package serve

import (
	"math"

	"github.com/mrep-dev/mrep/analyzer"
)

// BenchRun is what trtllm-bench sizes its engine from: the dataset's prompt and output lengths,
// the layout, the precisions and one GPU's memory.
type BenchRun struct {
	ISL, OSL int64
	TP, PP   int64 // 0 counts as 1
	// WeightBytes and KVBytes per weight and per KV element (analyzer.DTypeBytes; 0: unknown).
	WeightBytes, KVBytes float64
	MemBytes             float64 // one GPU's memory
}

// TRTLLMBench is the engine the published trtllm-bench runs used: TensorRT-LLM's defaults with
// the KV cache given 95% of the free memory ("in majority of cases, we also use a higher KV
// cache percentage by setting --kv_cache_free_gpu_mem_fraction 0.95", perf-overview.md, both
// revisions the measured rows come from), the run's pipeline stages, and the max batch size
// and max number of tokens trtllm-bench sets from the model, the layout and the dataset's
// lengths. A run that set its own limits or KV fraction overrides the preset's fields.
func TRTLLMBench(m *analyzer.Model, r BenchRun) Engine {
	e := DefaultEngine()
	e.KVFraction = 0.95
	e.PP = max(r.PP, 1)
	e.MaxBatch, e.TokenBudget = trtllmBenchLimits(m, r)
	return e
}

// trtllmBenchLimits are trtllm-bench's max batch size and max num tokens for a run (NVIDIA
// TensorRT-LLM tensorrt_llm/bench/build/tuning.py, calc_engine_setting and finetune_setting,
// the same in the v0.17 and PyTorch-backend revisions): the requests its own estimate of the
// KV cache holds (the whole TP x PP group's memory less the weights, 95% of it, at 2 x layers x
// max(TP, KV heads) x head size bytes per token of ISL+OSL), at most 4,096 per pipeline stage,
// rounded up to 32/128/256; tokens per step that many sequences' decode tokens plus their share
// of prompt tokens, between 2,048 and 32,768, rounded up to 256/512/1,024.
func trtllmBenchLimits(m *analyzer.Model, r BenchRun) (maxBatch, maxTokens float64) {
	fp := m.Fingerprint
	tp, pp := float64(max(r.TP, 1)), float64(max(r.PP, 1))
	perToken := 2 * float64(fp.Layers) * math.Max(tp, float64(fp.KVHeads)) * float64(fp.HeadDim) * benchBytes(r.KVBytes)
	free := r.MemBytes*tp*pp - float64(m.TotalParams)*benchBytes(r.WeightBytes)
	requests := 0.95 * free / perToken / float64(r.ISL+r.OSL)
	bs := math.Min(requests, 4096) / pp
	tokens := math.Min(bs*(1+float64(r.ISL)/float64(r.OSL)), 32768)
	switch {
	case bs < 256:
		maxBatch = math.Max(64, 32*math.Ceil(bs/32))
	case bs < 1024:
		maxBatch = 128 * math.Ceil(bs/128)
	default:
		maxBatch = 256 * math.Ceil(bs/256)
	}
	switch {
	case tokens < 4096:
		maxTokens = math.Max(2048, 256*math.Ceil(tokens/256))
	case tokens < 8192:
		maxTokens = 512 * math.Ceil(tokens/512)
	default:
		maxTokens = 1024 * math.Ceil(tokens/1024)
	}
	return maxBatch, maxTokens
}

// benchBytes is a precision's bytes as tuning.py counts them: its quantization's (fp8 1, fp4
// 0.5) below two bytes, else two (it sizes every unquantized model as 16-bit).
func benchBytes(b float64) float64 {
	if b > 0 && b < 2 {
		return b
	}
	return 2
}
