package serve

import (
	"math"

	"github.com/mrep-dev/mrep/kernels"
)

// EngineFigures are what an engine costs or gains wherever it runs, beyond its kernels (which a
// chip's lane times): the host's request path, which does not depend on the GPU, and the
// speculative decoding its releases implement. Each figure names its source (and the release
// it was measured on); a chip's lane
// that fitted its own request path (request_overhead_us) takes precedence over the engine's.
type EngineFigures struct {
	// RequestPathUs: see Engine.RequestPathUs.
	RequestPathUs  float64
	RequestPathSrc string
	// MTPAcceptLen is the mean tokens a verify step emits per sequence (the accepted drafts
	// and the bonus token) with a model's MTP heads proposing k drafts, as the engine's own
	// publications measured it, by k: acceptance falls with the draft's position, so one
	// probability does not fit every k (TensorRT-LLM's B200 table: 0.92 per draft at k=1, 0.71
	// at k=5). MTPDraftCost is drafting one token as a share of a plain decode step, from the
	// speed-up S measured at one user, where a step is weight-bound: S = tau / (1 + k x cost).
	MTPAcceptLen map[int]float64
	MTPDraftCost float64
	MTPSrc       string
}

// AcceptAt is the probability a per draft token that reproduces the engine's measured accept
// length at k drafts (tau = (1-a^(k+1))/(1-a)); beyond the ks measured, the nearest k's
// probability. 0: the engine has no MTP figure.
func (f EngineFigures) AcceptAt(k int) float64 {
	if len(f.MTPAcceptLen) == 0 || k < 1 {
		return 0
	}
	near := -1
	for m := range f.MTPAcceptLen {
		if near < 0 || abs(m-k) < abs(near-k) || abs(m-k) == abs(near-k) && m < near {
			near = m
		}
	}
	tau := f.MTPAcceptLen[near]
	lo, hi := 0.0, 1.0
	for range 60 { // tau is increasing in a: bisect
		a := (lo + hi) / 2
		if (1-math.Pow(a, float64(near+1)))/(1-a) < tau {
			lo = a
		} else {
			hi = a
		}
	}
	return math.Round(lo*1000) / 1000
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Figures is the named engine's figures ("" is TensorRT-LLM, the default preset's engine).
func Figures(engine string) EngineFigures {
	if engine == "" {
		engine = "trtllm"
	}
	return engineFigures[engine]
}

// requestPath is the seconds a request waits outside the engine's steps before its first
// token: the chip's lane's fitted figure where it has one (p's RequestOverhead), else the
// engine's.
func requestPath(p kernels.Predictor, e Engine) float64 {
	if ro, ok := p.(interface{ RequestOverhead() float64 }); ok && ro.RequestOverhead() > 0 {
		return ro.RequestOverhead()
	}
	return e.RequestPathUs * 1e-6
}

// carriedPath is the request path of engines no publication in the fit sources measures: the
// median of SGLang's fitted per chip (84.9, 47.5 and 42.2 ms on B200, A100 and MI300X, each
// fitted to sgl-cookbook's runs at 1 and 16 users), since every engine here answers through an
// OpenAI-compatible Python server the same benchmark clients call. vLLM's own blog rows
// (Llama-3.1-8B, 20k-token prompts on an H100) would take 76.7 ms, but there the path cannot be
// told from the prefill model's error on 20k-token prompts (12% without any path).
const carriedPath = 47494

// carriedPathSrc says so.
const carriedPathSrc = "carried from SGLang's lanes, the median of its request paths fitted on B200, A100 and MI300X (84.9, 47.5, 42.2 ms); " +
	"no publication in the fit sources measures this engine's"

// engineFigures are the engines' figures with their sources. Fit sets: the request path to the
// sglang lanes' fits named; the MTP figures to the engines' own publications
// (calib/sources/transcribed/engine_paths.json holds every row read, with its quote).
var engineFigures = map[string]EngineFigures{
	"vllm": {
		RequestPathUs:  carriedPath,
		RequestPathSrc: carriedPathSrc,
		MTPAcceptLen:   map[int]float64{1: 1.9},
		MTPDraftCost:   0.015,
		MTPSrc: "vLLM blog (May 2026, DeepSeek-V3.2 on 8 B300, one user): MTP=1 at ~90% acceptance, 234 tok/s against 125 without (1.87x); " +
			"vLLM PR #12755 (V0, DeepSeek-R1): 81.5% acceptance, 1.63x TPOT at 1 QPS (draft cost 0.11 there)",
	},
	"sglang": {
		RequestPathUs:  carriedPath,
		RequestPathSrc: "the median of SGLang's request paths fitted on B200, A100 and MI300X (84.9, 47.5, 42.2 ms); each fitted to sgl-cookbook's runs at 1 and 16 users (the chips' sglang lanes)",
		MTPAcceptLen:   map[int]float64{2: 1.9, 3: 2.18, 4: 2.44},
		MTPDraftCost:   0.125,
		MTPSrc: "LMSYS blog (2025-07, DeepSeek-V3 on H200, 2 requests per rank): 3 drafts accept 2.18 at 1.60x, 4 drafts 2.44 at 1.61x, " +
			"against a baseline without MTP or the overlap scheduler (MTP ran without it): draft cost (2.18/1.598-1)/3 = 0.121, (2.44/1.608-1)/4 = 0.129; " +
			"SGLang PR #3582: 2 drafts accept about 1.9 at 1.76x",
	},
	"trtllm": {
		RequestPathUs:  carriedPath,
		RequestPathSrc: carriedPathSrc,
		MTPAcceptLen:   map[int]float64{1: 1.92, 2: 2.58, 3: 2.82, 4: 2.99, 5: 3.01},
		MTPDraftCost:   0.079,
		MTPSrc: "TensorRT-LLM blog 'Pushing latency boundaries' (May 2025, DeepSeek-R1 FP4 on 8 B200, batch 1, 1k/2k): accept length 1.92/2.58/2.82/2.99/3.01 " +
			"at 1-5 drafts, 1.78/2.25/2.28/2.21/2.15x over 111 tok/s without MTP; draft cost (tau/S-1)/k = 0.079/0.073/0.079/0.088/0.080",
	},
	"atom": {
		RequestPathUs:  carriedPath,
		RequestPathSrc: carriedPathSrc,
		MTPAcceptLen:   map[int]float64{3: 2.83},
		MTPSrc: "ATOM's CI (PR #1557, DeepSeek-R1-0528 FP4 MTP on gsm8k): ~61% of 3 drafts accepted, accept length 1 + 3 x 0.61 = 2.83; " +
			"no single-user speed-up published: the draft costs one MTP layer (1/layers)",
	},
}
