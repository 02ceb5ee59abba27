package serve

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	memory "github.com/mrep-dev/mrep/layout"
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

// Engines are the serving engines mrep has presets and lanes for, as flags name them.
var Engines = []string{"trtllm", "vllm", "sglang", "atom"}

// ParseEngine reads an engine flag: "" (none named), or one of Engines, case-insensitive.
func ParseEngine(name string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(name))
	if e == "" || slices.Contains(Engines, e) {
		return e, nil
	}
	return "", fmt.Errorf("engine %q: want %s", name, engineList())
}

// engineList is Engines as an error message lists them.
func engineList() string {
	return strings.Join(Engines[:len(Engines)-1], ", ") + " or " + Engines[len(Engines)-1]
}

// engineVendors are the accelerators each engine's releases run on: TensorRT-LLM NVIDIA GPUs
// only; SGLang NVIDIA GPUs and AMD Instinct (its ROCm images); vLLM those and Google TPUs (the
// vllm-tpu backend) and Intel Gaudi (the vllm-gaudi plugin); ATOM (ROCm/ATOM, AMD's engine on
// its AITER kernels) AMD Instinct only.
var engineVendors = map[string][]string{"trtllm": {"NVIDIA"}, "sglang": {"NVIDIA", "AMD"}, "vllm": {"NVIDIA", "AMD", "Google", "Intel"}, "atom": {"AMD"}}

// EngineRunsOn refuses an engine-chip pair that does not exist (TensorRT-LLM on an MI300X): a
// plan for it would be one no one can run. "" (no engine named) runs anywhere.
func EngineRunsOn(engine, vendor string) error {
	vs, ok := engineVendors[engine]
	if engine == "" || !ok {
		return nil
	}
	for _, v := range vs {
		if strings.EqualFold(v, vendor) {
			return nil
		}
	}
	return fmt.Errorf("%s does not run on %s accelerators (it runs on %s)", engine, vendor, strings.Join(vs, ", "))
}

// Lane is the engine whose fitted figures time a chip's serving kernels: the one named, else
// vLLM on AMD chips (TensorRT-LLM does not run there; their figures come from AMD's vLLM
// tables), else TensorRT-LLM (the chips' own figures were calibrated on it, and its lane, where
// a chip has one, holds what its MoE runs fitted). engine is ParseEngine's.
func Lane(engine string, chip chips.Chip) string {
	switch {
	case engine != "":
		return engine
	case chip.Vendor == "AMD":
		return "vllm"
	}
	return "trtllm"
}

// EnginePreset is a serving engine's scheduling defaults as its release documents them, for a
// GPU of memGiB: the batch and token limits a server starts with, the KV cache's share of
// memory and its block size. The engines' own code is the source (release wheels read for
// each figure): timing figures fitted for an engine on a chip are its lane (chips.json).
//
//   - trtllm: TensorRT-LLM's PyTorch backend (trtllm-serve, 1.x): max_batch_size 2048,
//     max_num_tokens 8192, KvCacheConfig free_gpu_memory_fraction 0.9, tokens_per_block 32.
//
//   - vllm: vLLM's V1 engine (0.8.5 to 0.11, `vllm serve`): max_num_seqs 1024 and
//     max_num_batched_tokens 8192 on GPUs of 70 GiB or more (256 and 2048 below),
//     gpu_memory_utilization 0.90, block_size 16, chunked prefill always on, decodes first.
//
//   - sglang: SGLang 0.5.x (`sglang.launch_server`; server_args.py _handle_gpu_memory_settings):
//     chunked_prefill_size 2048 below 35 GiB, 4096 below 60, 8192 below 160 (H100, H200), 16384
//     from 160 GiB (B200, MI300X); max_running_requests bounded by a request pool of 4096,
//     page_size 1; mem_fraction_static and cuda_graph_max_bs per layout (ForLayout).
//
//   - atom: AMD's ATOM 0.1.5 (ROCm/ATOM tag v0.1.5, b0071c55; atom/model_engine/arg_utils.py
//     and atom/config.py): max_num_seqs 512, max_num_batched_tokens 16384,
//     gpu_memory_utilization 0.9, block size 16, CUDA graphs captured for decode batches up to
//     512 ([1,2,4,...,256,512]); its scheduler "tries prefill first; if no new prefills are
//     ready, falls back to decoding" (scheduler.py), so a step that prefills carries no decodes.
//
// SGLang and ATOM run prefill-only steps by default (SGLang's mixed chunks are off): the
// step-by-step simulation models it, the steady state does not. vLLM captures CUDA graphs up to min(2 x max_num_seqs,
// 512) tokens (max_cudagraph_capture_size), SGLang up to cuda_graph_max_bs sequences: larger
// decode batches run eagerly.
func EnginePreset(name string, memGiB float64) (Engine, error) {
	e := DefaultEngine()
	switch name {
	case "", "trtllm":
		e.Name, e.Release = "TensorRT-LLM", "1.x PyTorch backend"
		e.MaxBatch, e.TokenBudget, e.KVFraction, e.KVBlock = 2048, 8192, 0.9, 32
	case "vllm":
		e.Name, e.Release = "vLLM", "0.8.5-0.11 (V1 engine)"
		e.MaxBatch, e.TokenBudget = 1024, 8192
		if memGiB < 70 {
			e.MaxBatch, e.TokenBudget = 256, 2048
		}
		e.KVFraction, e.KVBlock = 0.9, 16
		e.KVFractionOf = memory.OfTotal                // gpu_memory_utilization: weights, activations and KV inside
		e.GraphMaxTokens = math.Min(2*e.MaxBatch, 512) // max_cudagraph_capture_size
	case "sglang":
		e.Name, e.Release = "SGLang", "0.5.x"
		e.MaxBatch, e.TokenBudget = 4096, 8192
		if memGiB >= 160 {
			e.TokenBudget = 16384
		}
		if memGiB < 35 {
			e.TokenBudget = 2048
		} else if memGiB < 60 {
			e.TokenBudget = 4096
		}
		e.KVFraction, e.KVBlock = 0.88, 1 // until ForLayout derives it for a layout
		e.KVFractionOf = memory.OfStatic  // mem_fraction_static: weights and the KV pool inside
		e.PrefillOnlySteps = true         // --enable-mixed-chunk is off by default
		e.layoutDefaults, e.memGiB, e.AutoKVFraction = "sglang", memGiB, true
	case "atom":
		e.Name, e.Release = "ATOM", "0.1.5"
		e.MaxBatch, e.TokenBudget = 512, 16384
		e.KVFraction, e.KVBlock = 0.9, 16
		e.KVFractionOf = memory.OfTotal // gpu_memory_utilization, as vLLM reads it
		e.GraphMaxTokens = 512
		e.PrefillOnlySteps = true
	default:
		return e, fmt.Errorf("engine %q: want %s", name, engineList())
	}
	e.MTP = Figures(name)
	e.RequestPathUs = e.MTP.RequestPathUs
	return e, nil
}

// ForLayout is e for a replica of tp x pp GPUs with attention data-parallel over dp groups
// (dp > 1: EP spans dp attention groups): the defaults an engine derives from the layout
// when it starts. SGLang 0.5.x (server_args.py, _handle_gpu_memory_settings) sets
// cuda_graph_max_bs by memory and TP (below 35 GiB 24, or 80 from TP4; below 60 GiB 32, or
// 160 from TP4; below 160 GiB 256, or 512 from TP4; from 160 GiB 512), and, unless the user
// states it (AutoKVFraction), mem_fraction_static = 1 - reserved / memory, reserving in MiB
// 512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x cuda_graph_max_bs + 1024 x tp x pp / 8,
// with DP attention 3 x cuda_graph_max_bs x dp more (and 1.5 x more again above 300), at
// least 10 GiB on GPUs over 60 GiB. Other engines' defaults do not depend on the layout.
func (e Engine) ForLayout(tp, pp, dp int64) Engine {
	if e.layoutDefaults != "sglang" {
		return e
	}
	tp, pp, dp = max(tp, 1), max(pp, 1), max(dp, 1)
	// with DP attention each attention group's chunk is chunked_prefill_size / dp ("to avoid
	// MoE kernel issues", server_args.py _handle_data_parallelism, 0.5.x): the budget a group's
	// step fills. chunk keeps the stated size, so a layout applied twice divides it once.
	if e.chunk == 0 {
		e.chunk = e.TokenBudget
	}
	e.TokenBudget = math.Floor(e.chunk / float64(dp))
	mem := e.memGiB * 1024 // MiB, as SGLang reads the device
	var graphBS float64
	switch small := tp < 4; {
	case e.memGiB < 35 && small:
		graphBS = 24
	case e.memGiB < 35:
		graphBS = 80
	case e.memGiB < 60 && small:
		graphBS = 32
	case e.memGiB < 60:
		graphBS = 160
	case e.memGiB < 160 && small:
		graphBS = 256
	default:
		graphBS = 512
	}
	e.GraphMaxTokens = graphBS
	if e.AutoKVFraction && mem > 0 {
		reserved := 512 + 1.5*math.Max(e.chunk, 2048) + 2*graphBS + 1024*float64(tp*pp)/8
		if dp > 1 {
			reserved += 3 * graphBS * float64(dp)
			if graphBS > 300 {
				reserved += 1.5 * graphBS * float64(dp)
			}
		}
		if mem > 60*1024 {
			reserved = math.Max(reserved, 10*1024)
		}
		e.KVFraction = math.Round((mem-reserved)/mem*1000) / 1000
	}
	return e
}
