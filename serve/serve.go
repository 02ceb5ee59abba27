// Package serve models an inference engine with in-flight (continuous) batching in steady
// state on the achievable time model: how many sequences fit in the KV cache, how prefill
// chunks and decode tokens share each step under a token budget, and what that gives in
// tokens/s, TTFT and TPOT. It composes counting (analyzer) and a kernels.Predictor.
package serve

import (
	"fmt"
	"math"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/kernels"
)

// Engine is the serving engine's memory and scheduling knobs (defaults: TensorRT-LLM's).
type Engine struct {
	// KVFraction of the memory left after weights and reserves goes to the KV cache
	// (TensorRT-LLM kv_cache_free_gpu_mem_fraction 0.9; vLLM gpu_memory_utilization 0.9).
	KVFraction float64
	// ReserveBytes per GPU for CUDA graphs, communication buffers and the prefill chunk's
	// activations (stated default 3 GiB).
	ReserveBytes float64
	// TokenBudget is the tokens one step processes at most, prefill chunks and decode tokens
	// together (TensorRT-LLM max_num_tokens 8192).
	TokenBudget float64
	// MaxBatch caps concurrent sequences (trtllm-bench max batch 8192... its scheduler).
	MaxBatch float64
}

// DefaultEngine is TensorRT-LLM's defaults as the measured runs used them.
func DefaultEngine() Engine {
	return Engine{KVFraction: 0.9, ReserveBytes: 3 * (1 << 30), TokenBudget: 8192, MaxBatch: 8192}
}

// KVTokens is how many tokens of KV cache one GPU holds next to its share of the weights.
func KVTokens(m *analyzer.Model, s analyzer.Scenario, memBytes float64, e Engine) float64 {
	weights := m.ParamsPerGPU(s.TP, 1, s.EP, s.ETP) * s.WeightBytes
	free := memBytes - weights - e.ReserveBytes
	per := m.KVBytesPerToken(s)
	if free <= 0 || per <= 0 {
		return 0
	}
	return e.KVFraction * free / per
}

// Result is a steady state of the engine.
type Result struct {
	Concurrency float64 `json:"concurrency"` // sequences decoding at once
	MaxByKV     float64 `json:"max_by_kv"`   // sequences the KV cache holds at full context
	PrefillTok  float64 `json:"prefill_tokens_per_step"`
	StepTime    float64 `json:"step_time"` // s: one step of Concurrency decode tokens and the prefill chunk
	TPOT        float64 `json:"tpot"`      // s per output token of one sequence
	TTFT        float64 `json:"ttft"`      // s: the prompt's prefill steps (no queueing)
	OutputTokS  float64 `json:"output_tokens_per_s"`
	// RooflineTokS is the same steady state on the ideal roofline: no engine beats it.
	RooflineTokS float64 `json:"roofline_output_tokens_per_s"`
	TotalTokS    float64 `json:"total_tokens_per_s"`
	GPUs         int64   `json:"gpus"`
	Bound        string  `json:"bound"` // kv-cache, token-budget or max-batch
}

// Offline is the max-throughput steady state of requests of isl prompt and osl output tokens
// all queued at once (the published trtllm-bench runs): D sequences decode each step, and the
// step also prefills the D·isl/(osl-1) prompt tokens that keep D constant, within the token
// budget and the KV cache (each sequence reserves its full isl+osl context).
func Offline(m *analyzer.Model, s analyzer.Scenario, p kernels.Predictor, memBytes float64, isl, osl int64, e Engine) (Result, error) {
	if isl < 1 || osl < 1 {
		return Result{}, fmt.Errorf("isl and osl must be >= 1 (got %d, %d)", isl, osl)
	}
	r := Result{GPUs: s.TP}
	r.MaxByKV = math.Floor(KVTokens(m, s, memBytes, e) / float64(isl+osl))
	if r.MaxByKV < 1 {
		return r, fmt.Errorf("not one sequence of %d tokens fits in the KV cache next to the weights", isl+osl)
	}
	decodeSteps := math.Max(float64(osl-1), 1)
	perDecode := float64(isl) / decodeSteps // prompt tokens each decoding sequence brings per step
	byBudget := e.TokenBudget / (1 + perDecode)
	r.Concurrency, r.Bound = r.MaxByKV, "kv-cache"
	if byBudget < r.Concurrency {
		r.Concurrency, r.Bound = math.Max(1, math.Floor(byBudget)), "token-budget"
	}
	if e.MaxBatch < r.Concurrency {
		r.Concurrency, r.Bound = e.MaxBatch, "max-batch"
	}
	d := r.Concurrency
	r.PrefillTok = d * perDecode
	if osl == 1 {
		r.PrefillTok, d = math.Min(e.TokenBudget, d*float64(isl)), 0
	}
	step, roof, err := mixedStep(m, s, p, d, float64(isl)+float64(osl)/2, r.PrefillTok, isl)
	if err != nil {
		return r, err
	}
	r.StepTime = step
	perReq := float64(osl)
	rate := func(t float64) float64 {
		if osl == 1 {
			return r.PrefillTok / float64(isl) / t
		}
		return d / t * perReq / decodeSteps
	}
	r.OutputTokS, r.RooflineTokS = rate(step), rate(roof)
	r.TotalTokS = r.OutputTokS * float64(isl+osl) / float64(osl)
	r.TPOT = step
	r.TTFT = math.Ceil(float64(isl)/math.Max(r.PrefillTok, 1)) * step
	return r, nil
}

// mixedStep times one engine step of d decode tokens at mean context ctx and prefill tokens
// of prompts of isl: the two counted steps' kernels, with each dense GEMM's weights read once
// for both (the engine runs them as one GEMM over all the step's tokens) and one all-reduce
// per layer carrying both.
func mixedStep(m *analyzer.Model, s analyzer.Scenario, p kernels.Predictor, d, ctx, prefill float64, isl int64) (float64, float64, error) {
	var ks []kernels.Kernel
	var dec, pre analyzer.Step
	var err error
	if d > 0 {
		sd := s
		sd.Batch, sd.KVLen = int64(math.Max(1, math.Round(d))), int64(math.Round(ctx))
		if dec, err = m.AnalyzeTotals(analyzer.Decode, sd, analyzer.Achievable); err != nil {
			return 0, 0, err
		}
		ks = append(ks, dec.Kernels...)
	}
	if prefill >= 1 {
		sp := s
		// whole prompts where the chunk holds several, else one chunk of a longer prompt
		if prefill >= float64(isl) {
			sp.Batch, sp.Seq = int64(math.Round(prefill/float64(isl))), isl
		} else {
			sp.Batch, sp.Seq = 1, int64(math.Round(prefill))
		}
		if pre, err = m.AnalyzeTotals(analyzer.Prefill, sp, analyzer.Achievable); err != nil {
			return 0, 0, err
		}
		ks = merge(ks, pre.Kernels, s.WeightBytes)
	}
	t := p.Predict(ks)
	return t.TEst, t.TRoofline, nil
}

// merge adds prefill kernels to a decode step's: a dense GEMM of the same op and shape becomes
// one GEMM over both token sets (M added, the weights read once); the TP all-reduce of a layer
// carries both; everything else runs as its own kernel.
func merge(dec, pre []kernels.Kernel, weightBytes float64) []kernels.Kernel {
	type key struct {
		name, cat string
		kind      kernels.Kind
		n, k      float64
	}
	index := map[key]int{}
	for i, k := range dec {
		if (k.Kind == kernels.GEMM && k.Groups == 1) || k.Kind == kernels.Collective {
			index[key{k.Name, k.Category, k.Kind, k.N, k.K}] = i
		}
	}
	out := append([]kernels.Kernel(nil), dec...)
	for _, k := range pre {
		j, ok := index[key{k.Name, k.Category, k.Kind, k.N, k.K}]
		if !ok {
			out = append(out, k)
			continue
		}
		o := &out[j]
		switch k.Kind {
		case kernels.GEMM:
			// per launch: M adds up; the weights (N x K per launch) are read once
			weights := k.Count * k.N * k.K * weightBytes
			o.M += k.M
			o.FLOPs += k.FLOPs
			o.Bytes += math.Max(0, k.Bytes-weights)
		case kernels.Collective:
			o.Message += k.Message
		}
	}
	return out
}
