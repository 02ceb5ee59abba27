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
	memory "github.com/mrep-dev/mrep/layout" // the one memory model (serve has a layout type of its own)
)

// Engine is the serving engine's memory and scheduling knobs (defaults: TensorRT-LLM's).
type Engine struct {
	// KVFraction goes to the KV cache, of what KVFractionOf says: the memory left after weights
	// and reserves ("", TensorRT-LLM's kv_cache_free_gpu_mem_fraction 0.9), the whole GPU with
	// weights and reserve inside ("total", vLLM's gpu_memory_utilization 0.9), or the whole GPU
	// with the weights inside ("static", SGLang's mem_fraction_static). Read as the engine reads
	// its own flag, so a plan's capacity and the flag --emit writes agree.
	KVFraction   float64
	KVFractionOf string
	// ReserveBytes per GPU for CUDA graphs, communication buffers and the prefill chunk's
	// activations (stated default 3 GiB).
	ReserveBytes float64
	// TokenBudget is the tokens one step processes at most, prefill chunks and decode tokens
	// together (TensorRT-LLM max_num_tokens 8192).
	TokenBudget float64
	// MaxBatch caps concurrent sequences (trtllm-bench max batch 8192... its scheduler).
	MaxBatch float64
	// KVBlock is the paged KV cache's tokens per block: a sequence holds whole blocks, so it
	// reserves its context rounded up to a block (TensorRT-LLM's KvCacheConfig.tokens_per_block
	// 32; vLLM's block_size 16). 0: contiguous, no rounding.
	KVBlock int64
	// PrefixHit is the share of each prompt found in the prefix cache (0: none): those tokens
	// are not prefilled. Their KV is still reserved per sequence (shared blocks are not
	// deduplicated: conservative), and the new tokens' attention over the cached prefix is
	// not counted (it is a small part of a prefill chunk's work).
	PrefixHit float64
	// SpecTokens and SpecAccept: speculative decoding (draft model or MTP heads) proposing k
	// tokens per step, each accepted with probability a. A step then verifies k+1 query tokens
	// per sequence, reading the weights and each sequence's KV cache once, and emits
	// (1-a^(k+1))/(1-a) tokens on average (Leviathan, Kalman, Matias 2023). Drafting costs
	// SpecDraftCost of a plain decode step per draft token (stated default for MTP: one extra
	// layer, 1/L). 0 tokens: no speculation.
	SpecTokens    int
	SpecAccept    float64
	SpecDraftCost float64
	// MTP is the engine's own speculative figures for a model's MTP heads (engineFigures:
	// what its releases measured), taken where the user or the row states none.
	MTP EngineFigures
	// RequestPathUs is what a benchmark client waits per request beyond the engine's steps
	// before its first token, where the chip's lane has no fitted figure of its own: the API
	// server's HTTP handling, chat template and tokenization, the hand-off to the scheduler,
	// the first token's detokenization and streaming (engineFigures).
	RequestPathUs float64
	// Prompt, when > 0, is the length of the prompt whose TTFT is reported, arriving in the
	// steady state of the workload's means (a p90 prompt of a mix); 0: the mean prompt.
	Prompt int64
	// PP is the replica's pipeline stages (a layout, not a knob: the planner sets it; 0 or 1:
	// none), and PPTier the link between stages (scale-out when the stages span nodes).
	PP     int64
	PPTier kernels.Tier
	// dp is the attention data-parallel groups sharing the experts (set by Replica.At).
	dp float64
	// Name and Release name the engine preset the limits come from (EnginePreset; empty: the
	// defaults of the measured TensorRT-LLM runs).
	Name, Release string
	// PrefillOnlySteps: a step that prefills carries no decodes (SGLang's default, mixed chunks
	// off: its scheduler runs a prefill batch whenever prompts wait, then goes back to
	// decoding). Only the step-by-step simulation models it; the steady state mixes them.
	PrefillOnlySteps bool
	// GraphMaxTokens is the largest decode batch the engine captured in CUDA graphs (vLLM:
	// max_cudagraph_capture_size, min(2 x max_num_seqs, 512)); a larger one runs eagerly and
	// pays the host's launch of every kernel. 0: every decode step is graphed.
	GraphMaxTokens float64
	// AutoKVFraction: the KV fraction is the engine's own default for the layout (ForLayout
	// derives it); a stated fraction clears it.
	AutoKVFraction bool
	// layoutDefaults names the preset whose defaults depend on the layout, for ForLayout, and
	// memGiB the GPU memory the preset was made for.
	layoutDefaults string
	memGiB         float64
	// chunk is the token budget as stated (SGLang's chunked_prefill_size) before ForLayout
	// divides it over the attention groups (0: not divided yet).
	chunk float64
	// DecodeOnly is a decode instance of a disaggregated deployment: prompts arrive with their
	// KV cache from the prefill pool, so steps carry decode tokens only (no TTFT of its own).
	DecodeOnly bool
}

// SpecTokensPerStep is the mean tokens a speculative step emits per sequence: 1 without
// speculation, (1-a^(k+1))/(1-a) with k drafts accepted with probability a each.
func (e Engine) SpecTokensPerStep() float64 {
	k, a := float64(e.SpecTokens), e.SpecAccept
	switch {
	case e.SpecTokens <= 0:
		return 1
	case a >= 1:
		return k + 1
	case a <= 0:
		return 1
	}
	return (1 - math.Pow(a, k+1)) / (1 - a)
}

// reserved is the KV cache a sequence of n tokens holds: whole blocks.
func (e Engine) reserved(n int64) int64 {
	if e.KVBlock <= 1 {
		return n
	}
	return (n + e.KVBlock - 1) / e.KVBlock * e.KVBlock
}

// computed is how many of a prompt's isl tokens are prefilled (at least one: the last token
// is always computed to produce the first output).
func (e Engine) computed(isl int64) int64 {
	return max(1, int64(math.Round(float64(isl)*(1-e.PrefixHit))))
}

// KVMemory says what the KV cache gets, as the engine reads its memory fraction.
func (e Engine) KVMemory() string {
	switch e.KVFractionOf {
	case memory.OfTotal:
		return fmt.Sprintf("%.0f%% of the GPU's memory for the weights, activations and the KV cache (what is left after them is the KV cache)", 100*e.KVFraction)
	case memory.OfStatic:
		return fmt.Sprintf("%.0f%% of the GPU's memory for the weights and the KV cache (what is left after the weights is the KV cache)", 100*e.KVFraction)
	}
	return fmt.Sprintf("%.0f%% of the free memory for the KV cache", 100*e.KVFraction)
}

// DefaultEngine is TensorRT-LLM's defaults as the measured runs used them.
func DefaultEngine() Engine {
	return Engine{KVFraction: 0.9, ReserveBytes: 3 * (1 << 30), TokenBudget: 8192, MaxBatch: 8192, KVBlock: 32}
}

// KVTokens is how many tokens of KV cache one GPU holds next to its share of the weights and
// the engine's reserve, at its KV fraction: the memory model's (layout.KVTokens), so a plan's
// capacity and analyze's verdict come from one place.
func KVTokens(m *analyzer.Model, s analyzer.Scenario, memBytes float64, e Engine) float64 {
	return memory.KVTokens(m, s, int64(e.stages()), memBytes, e.ReserveBytes, e.KVFraction, e.KVFractionOf)
}

// Result is a steady state of the engine.
type Result struct {
	Concurrency float64 `json:"concurrency"` // sequences in the engine at once
	MaxByKV     float64 `json:"max_by_kv"`   // sequences the KV cache holds at full context
	PrefillTok  float64 `json:"prefill_tokens_per_step"`
	StepTime    float64 `json:"step_time"` // s: one step of Concurrency decode tokens and the mean prefill
	TPOT        float64 `json:"tpot"`      // s per output token of one sequence
	// TTFT is the prompt's prefill, in chunks of what the token budget leaves beside the
	// decode tokens, plus the engine's per-request overhead (its lane's request_overhead_us:
	// API server, tokenizer, streaming) and QueueWait (0 when every request is admitted on
	// arrival).
	TTFT       float64 `json:"ttft"`
	QueueWait  float64 `json:"queue_wait"`
	E2E        float64 `json:"e2e"` // TTFT + (OSL-1) x TPOT
	OutputTokS float64 `json:"output_tokens_per_s"`
	// RooflineTokS is the same steady state on the ideal roofline: no engine beats it.
	RooflineTokS float64 `json:"roofline_output_tokens_per_s"`
	TotalTokS    float64 `json:"total_tokens_per_s"`
	// Busy is the share of a step the GPUs spend in kernels that move data or compute (not
	// launch gaps or exposed communication): the power model's utilization.
	Busy  float64 `json:"busy"`
	GPUs  int64   `json:"gpus"`
	Bound string  `json:"bound"` // what caps Concurrency: kv-cache, token-budget, max-batch or load
}

// Offline is the max-throughput steady state of requests of isl prompt and osl output tokens
// all queued at once (the published trtllm-bench runs).
func Offline(m *analyzer.Model, s analyzer.Scenario, p kernels.Predictor, memBytes float64, isl, osl int64, e Engine) (Result, error) {
	return At(m, s, p, memBytes, isl, osl, e, math.Inf(1))
}

// Capacity is how many sequences of isl+osl tokens one replica runs at once: the KV cache
// (each sequence reserves its full context), the token budget (each decoding sequence brings
// isl/(osl-1) prompt tokens per step beside its decode token) and the batch cap, the last two
// per micro-batch with PP stages (TensorRT-LLM's max_num_tokens and max_batch_size are).
func Capacity(m *analyzer.Model, s analyzer.Scenario, memBytes float64, isl, osl int64, e Engine) (maxByKV, limit float64, bound string) {
	maxByKV = math.Floor(KVTokens(m, s, memBytes, e) / float64(e.reserved(isl+osl)))
	limit, bound = maxByKV, "kv-cache"
	perDecode := float64(e.computed(isl)) / math.Max(float64(osl-1), 1)
	if e.DecodeOnly {
		perDecode = 0
	}
	if byBudget := e.stages() * math.Max(1, math.Floor(e.TokenBudget/(1+perDecode))); byBudget < limit {
		limit, bound = byBudget, "token-budget"
	}
	if e.MaxBatch*e.stages() < limit {
		limit, bound = e.MaxBatch*e.stages(), "max-batch"
	}
	return maxByKV, limit, bound
}

// At is the steady state with at most want sequences in flight (+Inf: as many as fit): D
// sequences decode each step, and the step also prefills the D·isl/(osl-1) prompt tokens that
// keep D constant, within the token budget and the KV cache.
func At(m *analyzer.Model, s analyzer.Scenario, p kernels.Predictor, memBytes float64, isl, osl int64, e Engine, want float64) (Result, error) {
	if isl < 1 || osl < 1 {
		return Result{}, fmt.Errorf("isl and osl must be >= 1 (got %d, %d)", isl, osl)
	}
	if !(want >= 1) {
		return Result{}, fmt.Errorf("concurrency must be >= 1 (got %g)", want)
	}
	r := Result{GPUs: s.TP * int64(e.stages())}
	r.MaxByKV, r.Concurrency, r.Bound = Capacity(m, s, memBytes, isl, osl, e)
	if r.MaxByKV < 1 {
		return r, fmt.Errorf("not one sequence of %d tokens fits in the KV cache next to the weights", isl+osl)
	}
	if want < r.Concurrency {
		r.Concurrency, r.Bound = want, "load"
	}
	tau := e.SpecTokensPerStep()
	decodeSteps := math.Max(float64(osl-1)/tau, 1) // steps a sequence decodes for
	d := r.Concurrency
	ctx := float64(isl) + float64(osl)/2
	isl = e.computed(isl) // from here on, the prompt tokens that are prefilled
	r.PrefillTok = d * float64(isl) / decodeSteps
	if e.DecodeOnly {
		r.PrefillTok = 0
	}
	if osl == 1 {
		r.PrefillTok, d = math.Min(e.TokenBudget, d*float64(isl)), 0
	}
	lump := math.Min(float64(isl), math.Max(e.TokenBudget-d, 1)) // a prompt's share of a step
	st, err := lumpyStep(m, s, p, e, math.Max(e.dp, 1), d, ctx, r.PrefillTok, lump, isl)
	if err != nil {
		return r, err
	}
	if so, ok := p.(interface{ SeqOverhead() float64 }); ok && so.SeqOverhead() > 0 {
		// the engine's host work per running sequence (scheduling, sampling) each step
		extra := so.SeqOverhead() * (d + r.PrefillTok/float64(max(isl, 1)))
		st.TEst += extra
		st.TLatency += extra
	}
	r.StepTime = st.TEst
	if st.TEst > 0 {
		r.Busy = math.Max(0, st.TEst-st.TLatency-st.TComm) / st.TEst
	}
	rate := func(t float64) float64 {
		if osl == 1 {
			return r.PrefillTok / float64(isl) / t
		}
		return d / t * float64(osl) / decodeSteps
	}
	r.OutputTokS, r.RooflineTokS = rate(st.TEst), rate(st.TRoofline)
	r.TotalTokS = r.OutputTokS * (ctx - float64(osl)/2 + float64(osl)) / float64(osl)
	r.TPOT = st.TEst / tau
	// A new prompt is prefilled in chunks of what the budget leaves beside the decode tokens
	// (the scheduler runs decodes first, as vLLM's and TensorRT-LLM's do), each chunk a step.
	if e.DecodeOnly {
		r.E2E = float64(osl-1) * r.TPOT
		return r, nil
	}
	prompt := isl
	if e.Prompt > 0 {
		prompt = e.computed(e.Prompt)
	}
	// (with PP stages: a chunk per micro-batch, each passing every stage in one cycle)
	chunk := math.Min(float64(prompt), math.Max(e.TokenBudget-d/e.stages(), 1))
	if chunk <= r.PrefillTok/e.stages() {
		r.TTFT = math.Ceil(float64(prompt)*e.stages()/math.Max(r.PrefillTok, 1)) * st.TEst
	} else {
		var ct kernels.Time
		var err error
		if e.dp > 1 && e.stages() == 1 && e.SpecTokens == 0 {
			// one attention group prefills the prompt; the experts see the mean
			ct, err = skewedStep(m, s, p, d, ctx, chunk, math.Max(r.PrefillTok, chunk/e.dp), prompt)
		} else {
			ct, err = cycle(m, s, p, e, d, ctx, chunk*e.stages(), prompt)
		}
		if err != nil {
			return r, err
		}
		r.TTFT = math.Ceil(float64(prompt)/chunk) * ct.TEst
	}
	r.TTFT += requestPath(p, e) // the API server's part of what a client waits
	r.E2E = r.TTFT + float64(osl-1)*r.TPOT
	return r, nil
}

// specStep is mixedStep with speculative decoding: each of the d sequences verifies k drafts
// beside its token, so the step's GEMMs carry d·(k+1) rows (weights read once) while the
// attention reads each sequence's KV cache once (the drafts are k more query rows of the same
// tile); drafting adds SpecDraftCost of a plain decode step per draft token.
func specStep(m *analyzer.Model, s analyzer.Scenario, p kernels.Predictor, e Engine, d, ctx, prefill float64, isl int64) (kernels.Time, error) {
	if e.SpecTokens <= 0 || d <= 0 {
		if e.GraphMaxTokens > 0 && prefill < 1 && d > e.GraphMaxTokens {
			// a decode batch beyond the captured CUDA graphs runs eagerly: every kernel is
			// launched from the host again
			ks, err := mixedKernels(m, s, d, ctx, 0, isl)
			if err != nil {
				return kernels.Time{}, err
			}
			for i := range ks {
				ks[i].Graphed = false
			}
			return p.Predict(ks), nil
		}
		return mixedStep(m, s, p, d, ctx, prefill, isl)
	}
	plain, err := mixedStep(m, s, p, d, ctx, 0, isl)
	if err != nil {
		return kernels.Time{}, err
	}
	ks, err := mixedKernels(m, s, d, ctx, prefill, isl)
	if err != nil {
		return kernels.Time{}, err
	}
	sd := s
	sd.Batch, sd.Seq = int64(math.Max(1, math.Round(d))), int64(e.SpecTokens)
	drafts, err := m.AnalyzeTotals(analyzer.Prefill, sd, analyzer.Achievable)
	if err != nil {
		return kernels.Time{}, err
	}
	// the drafts' rows join the step's GEMMs; their attention is the decode tile's (not added)
	var rows []kernels.Kernel
	for _, k := range drafts.Kernels {
		if k.Kind == kernels.GEMM || k.Kind == kernels.Collective {
			rows = append(rows, k)
		}
	}
	t := p.Predict(merge(ks, rows, s.WeightBytes))
	draft := float64(e.SpecTokens) * e.SpecDraftCost * plain.TEst
	t.TEst += draft
	t.TLatency += draft * plain.TLatency / math.Max(plain.TEst, 1e-30)
	return t, nil
}

// mixedStep times one engine step of d decode tokens at mean context ctx and prefill tokens
// of prompts of isl: the two counted steps' kernels, with each dense GEMM's weights read once
// for both (the engine runs them as one GEMM over all the step's tokens) and one all-reduce
// per layer carrying both.
func mixedStep(m *analyzer.Model, s analyzer.Scenario, p kernels.Predictor, d, ctx, prefill float64, isl int64) (kernels.Time, error) {
	ks, err := mixedKernels(m, s, d, ctx, prefill, isl)
	if err != nil {
		return kernels.Time{}, err
	}
	return p.Predict(ks), nil
}

// mixedKernels are mixedStep's kernels.
func mixedKernels(m *analyzer.Model, s analyzer.Scenario, d, ctx, prefill float64, isl int64) ([]kernels.Kernel, error) {
	var ks []kernels.Kernel
	var dec, pre analyzer.Step
	var err error
	if d > 0 {
		sd := s
		sd.Batch, sd.KVLen = int64(math.Max(1, math.Round(d))), int64(math.Round(ctx))
		if dec, err = m.AnalyzeTotals(analyzer.Decode, sd, analyzer.Achievable); err != nil {
			return nil, err
		}
		ks = append(ks, dec.Kernels...)
	}
	if prefill >= 1 {
		sp := s
		// whole prompts where the chunk holds several, else one chunk of a longer prompt
		if prefill >= float64(isl) {
			sp.Batch, sp.Seq = int64(math.Round(prefill/float64(isl))), isl
		} else {
			// a chunk of a longer prompt attends over the prompt's earlier chunks in the cache
			sp.Batch, sp.Seq = 1, int64(math.Round(prefill))
			sp.Prefix = int64(math.Round(ChunkPrefix(float64(isl), float64(sp.Seq))))
		}
		if pre, err = m.AnalyzeTotals(analyzer.Prefill, sp, analyzer.Achievable); err != nil {
			return nil, err
		}
		ks = merge(ks, pre.Kernels, s.WeightBytes)
	}
	// the rows of a step's GEMMs vary around these means (decode sequences finish and start,
	// prefill chunks fill what the budget leaves)
	for i := range ks {
		if ks[i].Kind == kernels.GEMM {
			ks[i].VaryingM = true
		}
	}
	return ks, nil
}

// ChunkPrefix is the mean cached prefix a prompt of isl tokens prefilled in chunks of c tokens
// attends over, weighted by tokens: chunk j starts after j x c cached tokens, and attention's
// work is linear in that prefix, so the mean times the chunk prices every chunk.
func ChunkPrefix(isl, c float64) float64 {
	if c <= 0 || isl <= c {
		return 0
	}
	var sum float64
	for start := 0.0; start < isl; start += c {
		sum += start * math.Min(c, isl-start)
	}
	return sum / isl
}

// merge adds prefill kernels to a decode step's: a GEMM of the same op and shape becomes one
// GEMM over both token sets (the weights read once); the TP all-reduce of a layer carries both;
// everything else runs as its own kernel. A grouped expert GEMM keeps the larger set of
// touched experts (a lower bound on their union: once the decode batch touches every expert,
// which any serving batch does, it is exact) with the assignments of both.
func merge(dec, pre []kernels.Kernel, weightBytes float64) []kernels.Kernel {
	type key struct {
		name, cat string
		kind      kernels.Kind
		n, k      float64
	}
	index := map[key]int{}
	for i, k := range dec {
		if k.Kind == kernels.GEMM || k.Kind == kernels.Collective {
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
			// per launch: the rows (assignments, for grouped GEMMs) add up; the weights
			// (N x K per group and launch) of the smaller expert set are already read
			groups := math.Max(math.Max(o.Groups, k.Groups), 1)
			shared := k.Count * math.Min(math.Max(o.Groups, 1), math.Max(k.Groups, 1)) * k.N * k.K * weightBytes
			o.M = (o.M*math.Max(o.Groups, 1) + k.M*math.Max(k.Groups, 1)) / groups
			if o.Groups > 0 || k.Groups > 0 {
				o.Groups = groups
			}
			o.FLOPs += k.FLOPs
			o.Bytes += math.Max(0, k.Bytes-shared)
		case kernels.Collective:
			o.Message += k.Message
		}
	}
	return out
}

// StaticResult is one fixed batch run to completion: a prefill of the whole batch, then
// OSL-1 decode steps as the KV cache grows (trtllm-bench's and the early papers' static mode).
type StaticResult struct {
	Prefill    float64 `json:"prefill"` // s
	Decode     float64 `json:"decode"`  // s, all OSL-1 steps
	Total      float64 `json:"total"`
	OutputTokS float64 `json:"output_tokens_per_s"`
	TPOT       float64 `json:"tpot"` // mean decode step
}

// staticSegments bounds the decode steps timed one by one: longer outputs are timed in this
// many equal runs of steps at each run's mean KV length (step time is linear in KV length
// within a run, so the mean is exact up to kernel-shape changes).
const staticSegments = 64

// Static times a batch of b prompts of isl tokens generating osl tokens each.
func Static(m *analyzer.Model, s analyzer.Scenario, p kernels.Predictor, b, isl, osl int64) (StaticResult, error) {
	if b < 1 || isl < 1 || osl < 1 {
		return StaticResult{}, fmt.Errorf("batch, isl and osl must be >= 1 (got %d, %d, %d)", b, isl, osl)
	}
	var r StaticResult
	sp := s
	sp.Batch, sp.Seq = b, isl
	pre, err := m.AnalyzeTotals(analyzer.Prefill, sp, analyzer.Achievable)
	if err != nil {
		return r, err
	}
	r.Prefill = p.Predict(pre.Kernels).TEst
	steps := osl - 1
	segs := min(steps, staticSegments)
	for i := int64(0); i < segs; i++ {
		// steps [lo, hi) of this run; step j (0-based) reads isl+j+1 cached tokens
		lo, hi := steps*i/segs, steps*(i+1)/segs
		sd := s
		sd.Batch, sd.KVLen = b, isl+1+(lo+hi-1)/2
		dec, err := m.AnalyzeTotals(analyzer.Decode, sd, analyzer.Achievable)
		if err != nil {
			return r, err
		}
		r.Decode += float64(hi-lo) * p.Predict(dec.Kernels).TEst
	}
	r.Total = r.Prefill + r.Decode
	r.OutputTokS = float64(b*osl) / r.Total
	if steps > 0 {
		r.TPOT = r.Decode / float64(steps)
	}
	return r, nil
}

// PrefillShare is the share of the steady state's step that its prefill tokens take: the step
// beside the same step of decode tokens alone (the marginal time of the prompts).
func (rp Replica) PrefillShare(isl, osl int64, r Result) (float64, error) {
	switch {
	case osl <= 1:
		return 1, nil
	case r.PrefillTok <= 0 || r.StepTime <= 0:
		return 0, nil
	}
	// the replica's result is per attention group scaled up by the groups (Replica.At): time
	// one group's decode tokens
	e := rp.Engine
	e.dp = rp.DP()
	ctx := float64(isl) + float64(osl)/2
	dec, err := cycle(rp.Model, rp.Scenario, rp.Pred, e, r.Concurrency/e.dp, ctx, 0, e.computed(isl))
	if err != nil {
		return 0, err
	}
	return math.Max(0, math.Min(1, 1-dec.TEst/r.StepTime)), nil
}
