package serve

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/mrep-dev/mrep/kernels"
)

// The steady state (At) answers "how fast once the engine is full"; a benchmark measures
// requests that arrive, queue, prefill in chunks beside running decodes and finish at
// different times. Simulate runs the engine's scheduler step by step over such requests, the
// way vLLM's, SGLang's and TensorRT-LLM's schedulers do: every step decodes each running
// sequence once, then fills what the token budget leaves with prompt chunks, first of the
// prompts already being prefilled, then of waiting requests in arrival order, admitting a
// request only while the running sequences stay under the batch cap and its whole context
// fits in the free KV cache. A prompt's first token comes at the end of the step that
// prefills its last chunk. Each step is timed by the same kernels as the steady state.

// LoadKind is how requests arrive.
type LoadKind string

const (
	// Wave: N requests all at time 0 (an offline batch: `vllm bench throughput`,
	// trtllm-bench, or the first burst of a concurrency-bounded benchmark).
	Wave LoadKind = "wave"
	// Users: a closed loop of N users, each sending its next request when the last one
	// completes (`vllm bench serve --max-concurrency N`, `sglang.bench_serving
	// --max-concurrency N`, `genai-perf --concurrency N`): all N start together.
	Users LoadKind = "users"
	// Rate: open-loop Poisson arrivals at Rate requests/s (`vllm bench serve --request-rate`).
	Rate LoadKind = "rate"
)

// Load is a benchmark's arrivals: Kind with N requests (wave) or users, or Rate per second;
// Requests is how many complete (0: N for a wave, 10 per user for users, 500 for a rate),
// Lengths the requests' ISL/OSL (cycled in order; a Workload's entries by weight), Seed the
// Poisson arrivals' seed.
type Load struct {
	Kind     LoadKind
	N        int
	Rate     float64
	Requests int
	Lengths  []Request
	Seed     uint64
}

// Request is one request's prompt and output lengths.
type Request struct{ ISL, OSL int64 }

// Dist summarises one figure over the requests.
type Dist struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
}

// StepMix is the composition of the simulated steps: what a trace of the run would show on
// average per step.
type StepMix struct {
	Steps         int     `json:"steps"`
	MeanStep      float64 `json:"mean_step_s"`
	DecodeSeqs    float64 `json:"decode_sequences"`        // per step, mean
	PrefillTokens float64 `json:"prefill_tokens"`          // per step, mean
	PrefillShare  float64 `json:"steps_with_prefill"`      // share of steps carrying a prompt chunk
	GEMM          float64 `json:"gemm_s"`                  // per step, mean
	Attention     float64 `json:"attention_s"`             // per step
	Memory        float64 `json:"memory_bound_s"`          // per step: norms, activations, routing
	Comm          float64 `json:"communication_exposed_s"` // per step
	Launch        float64 `json:"launch_s"`                // per step: kernel launches beyond graphs
	Overhead      float64 `json:"overhead_s"`              // per step: the engine's step and per-sequence host time
}

// SimResult is a simulated benchmark. TTFT runs from a request's arrival to the end of the
// step that prefills its last chunk, plus the engine's per-request overhead (API server,
// tokenizer, streaming: the lane's request_overhead_us): queueing for admission, every chunk's
// step beside the running decodes, and the wait for the step in flight when it arrived are
// all in it.
type SimResult struct {
	Load       LoadKind `json:"load"`
	N          int      `json:"n,omitempty"`
	Rate       float64  `json:"rate,omitempty"`
	Requests   int      `json:"requests"`
	Duration   float64  `json:"duration_s"`
	OutputTokS float64  `json:"output_tokens_per_s"`
	TotalTokS  float64  `json:"total_tokens_per_s"`
	TTFT       Dist     `json:"ttft"`
	TPOT       Dist     `json:"tpot"`
	E2E        Dist     `json:"e2e"`
	QueueWait  Dist     `json:"queue_wait"` // arrival to admission (the first chunk's step)
	PeakSeqs   int      `json:"peak_running"`
	Mix        StepMix  `json:"step_mix"`
}

// MaxSimSteps bounds a simulation (a runaway load does not spin forever).
const MaxSimSteps = 2_000_000

// ErrSimTooLong: the load needs more than MaxSimSteps steps (outputs of a million tokens, a
// queue that never drains); a plan then keeps the steady state and says so.
var ErrSimTooLong = errors.New("simulation too long")

type simReq struct {
	Request
	arrive, admit, first, done float64
	prefilled                  int64
	decoded                    float64 // output tokens emitted
	user                       int
}

// Simulate runs load on the replica's scheduler. With the attention data-parallel (EP > TP)
// each group schedules its own share of the load (requests dealt round-robin); the groups
// run in lockstep at the experts, so one group is simulated with 1/DP of the load and the
// throughput scaled by DP. A pipelined replica is simulated a cycle at a time (PP micro-batch
// steps, each with its own token budget, after which every running sequence has advanced one
// token), as its steady state is timed.
func (rp Replica) Simulate(load Load) (SimResult, error) {
	e := rp.Engine
	if e.DecodeOnly {
		return SimResult{}, fmt.Errorf("a disaggregated decode instance has no arrivals of its own to simulate")
	}
	if len(load.Lengths) == 0 {
		return SimResult{}, fmt.Errorf("no request lengths to simulate")
	}
	for _, r := range load.Lengths {
		if r.ISL < 1 || r.OSL < 1 {
			return SimResult{}, fmt.Errorf("request lengths must be >= 1 (got isl %d, osl %d)", r.ISL, r.OSL)
		}
	}
	dp := rp.DP()
	e.dp = dp
	n, rate, total := load.N, load.Rate, load.Requests
	switch load.Kind {
	case Wave:
		if n < 1 {
			return SimResult{}, fmt.Errorf("a wave needs at least one request (got %d)", n)
		}
		total = n
	case Users:
		if n < 1 {
			return SimResult{}, fmt.Errorf("a closed loop needs at least one user (got %d)", n)
		}
		if total <= 0 {
			total = 10 * n
		}
	case Rate:
		if !(rate > 0) || math.IsInf(rate, 0) {
			return SimResult{}, fmt.Errorf("rate must be a positive number of requests/s (got %g)", rate)
		}
		if total <= 0 {
			total = 500
		}
	default:
		return SimResult{}, fmt.Errorf("unknown load %q: want wave, users or rate", load.Kind)
	}
	// one attention group's share
	groupN := int(math.Ceil(float64(n) / dp))
	groupTotal := int(math.Ceil(float64(total) / dp))
	groupRate := rate / dp

	kvFree := KVTokens(rp.Model, rp.Scenario, rp.MemBytes, e)
	maxBatch := e.MaxBatch
	if !(maxBatch > 0) {
		maxBatch = math.Inf(1)
	}
	tau := e.SpecTokensPerStep()
	rng := rand.New(rand.NewPCG(load.Seed, 0x6d726570))
	next := 0 // requests issued
	issue := func(at float64, user int) *simReq {
		l := load.Lengths[next%len(load.Lengths)]
		next++
		return &simReq{Request: l, arrive: at, admit: -1, first: -1, user: user}
	}
	var pending []*simReq // issued, arrival in the future (rate) or now
	switch load.Kind {
	case Wave:
		for i := 0; i < groupN; i++ {
			pending = append(pending, issue(0, i))
		}
	case Users:
		for i := 0; i < min(groupN, groupTotal); i++ {
			pending = append(pending, issue(0, i))
		}
	case Rate:
		at := 0.0
		for i := 0; i < groupTotal; i++ {
			at += rng.ExpFloat64() / groupRate
			pending = append(pending, issue(at, -1))
		}
	}
	for _, r := range pending {
		if need := float64(e.reserved(r.ISL + r.OSL)); need > kvFree {
			return SimResult{}, fmt.Errorf("a request of %d tokens does not fit in the KV cache (%.0f tokens)", r.ISL+r.OSL, kvFree)
		}
	}

	type key struct{ d, p, ctx, isl int64 }
	memo := map[key]kernels.Time{}
	stepTime := func(d, prefill, ctx float64, isl int64) (kernels.Time, error) {
		// bucket the decode context and the prefill tokens: steps differing by a few tokens cost
		// the same to a few parts in 1e3
		k := key{int64(d), int64(math.Round(prefill/16)) * 16, int64(math.Round(ctx/64)) * 64, isl}
		if t, ok := memo[k]; ok {
			return t, nil
		}
		t, err := cycle(rp.Model, rp.Scenario, rp.Pred, e, float64(k.d), math.Max(float64(k.ctx), 1), float64(k.p), max(k.isl, 1))
		if err != nil {
			return t, err
		}
		memo[k] = t
		return t, nil
	}
	seqOH, reqOH := 0.0, 0.0
	if so, ok := rp.Pred.(interface{ SeqOverhead() float64 }); ok {
		seqOH = so.SeqOverhead()
	}
	reqOH = requestPath(rp.Pred, e)

	var waiting, running, done, decodes []*simReq
	type chunk struct {
		r *simReq
		n int64
	}
	var chunks []chunk
	t := 0.0
	var mix StepMix
	var busyTime float64
	var peak int
	for steps := 0; len(done) < groupTotal; steps++ {
		if steps >= MaxSimSteps {
			return SimResult{}, fmt.Errorf("%w: not finished in %d steps", ErrSimTooLong, MaxSimSteps)
		}
		// arrivals up to now
		for len(pending) > 0 && pending[0].arrive <= t {
			waiting = append(waiting, pending[0])
			pending = pending[1:]
		}
		// a pipeline's step is a cycle of its PP micro-batch steps (cycle), each scheduled under
		// its own budget, as the steady state times it
		budget := e.TokenBudget * e.stages()
		decodes, chunks = decodes[:0], chunks[:0] // reused step to step
		for _, r := range running {
			if r.prefilled >= r.ISL {
				decodes = append(decodes, r)
			}
		}
		if e.PrefillOnlySteps && prefillReady(running, waiting, kvFree, maxBatch, e) {
			decodes = nil // SGLang without mixed chunks: a step with prompts to prefill decodes nothing
		}
		budget -= float64(len(decodes)) * float64(1+max(e.SpecTokens, 0))
		for _, r := range running { // prompts already being prefilled go first
			if r.prefilled < r.ISL && budget >= 1 {
				c := min(r.ISL-r.prefilled, int64(budget))
				chunks = append(chunks, chunk{r, c})
				budget -= float64(c)
			}
		}
		for len(waiting) > 0 && budget >= 1 && float64(len(running)) < maxBatch {
			r := waiting[0]
			need := float64(e.reserved(r.ISL + r.OSL))
			if need > kvFree {
				break // first come, first served: the head waits for KV to free up
			}
			kvFree -= need
			waiting = waiting[1:]
			r.admit = t
			running = append(running, r)
			c := min(r.ISL-r.prefilled, int64(budget))
			chunks = append(chunks, chunk{r, c})
			budget -= float64(c)
		}
		peak = max(peak, len(running))
		if len(decodes) == 0 && len(chunks) == 0 {
			if len(pending) == 0 {
				return SimResult{}, fmt.Errorf("scheduler stalled with %d requests waiting", len(waiting))
			}
			t = pending[0].arrive // idle until the next arrival
			continue
		}
		var prefill float64
		var lump int64
		for _, c := range chunks {
			prefill += float64(c.n)
			lump = max(lump, c.r.ISL)
		}
		ctx := 0.0
		for _, r := range decodes {
			ctx += float64(r.ISL) + r.decoded
		}
		if len(decodes) > 0 {
			ctx /= float64(len(decodes))
		}
		st, err := stepTime(float64(len(decodes)), prefill, ctx, max(lump, 1))
		if err != nil {
			return SimResult{}, err
		}
		oh := seqOH * float64(len(decodes)+len(chunks))
		dt := st.TEst + oh
		t += dt
		mix.Steps++
		mix.DecodeSeqs += float64(len(decodes))
		mix.PrefillTokens += prefill
		if prefill > 0 {
			mix.PrefillShare++
		}
		mix.GEMM += st.TGEMM
		mix.Attention += st.TAttention
		mix.Memory += st.TMemory
		mix.Comm += st.TComm
		mix.Launch += st.TLatency - st.TOverhead
		mix.Overhead += st.TOverhead + oh
		busyTime += dt
		for _, c := range chunks {
			c.r.prefilled += c.n
			if c.r.prefilled >= c.r.ISL {
				c.r.first, c.r.decoded = t, 1
			}
		}
		for _, r := range decodes {
			r.decoded += tau
		}
		kept := running[:0]
		for _, r := range running {
			if r.first >= 0 && r.decoded >= float64(r.OSL) {
				r.done = t
				done = append(done, r)
				kvFree += float64(e.reserved(r.ISL + r.OSL))
				if load.Kind == Users && next < groupTotal {
					pending = insertByArrival(pending, issue(t, r.user)) // the user's next request
				}
				continue
			}
			kept = append(kept, r)
		}
		running = kept
	}
	res := SimResult{Load: load.Kind, N: n, Rate: rate, Requests: len(done) * int(dp), PeakSeqs: peak * int(dp)}
	var ttft, tpot, e2e, wait []float64
	var out, in float64
	first, last := math.Inf(1), 0.0
	for _, r := range done {
		ttft = append(ttft, r.first-r.arrive+reqOH)
		if r.OSL > 1 {
			tpot = append(tpot, (r.done-r.first)/float64(r.OSL-1))
		}
		e2e = append(e2e, r.done-r.arrive+reqOH)
		wait = append(wait, r.admit-r.arrive)
		out += float64(r.OSL)
		in += float64(r.ISL)
		first = math.Min(first, r.arrive)
		last = math.Max(last, r.done)
	}
	res.Duration = last - first
	if res.Duration > 0 {
		res.OutputTokS = out * dp / res.Duration
		res.TotalTokS = (out + in) * dp / res.Duration
	}
	res.TTFT, res.TPOT, res.E2E, res.QueueWait = dist(ttft), dist(tpot), dist(e2e), dist(wait)
	if mix.Steps > 0 && busyTime > 0 {
		s := float64(mix.Steps)
		mix.MeanStep = busyTime / s
		mix.DecodeSeqs /= s
		mix.PrefillTokens /= s
		mix.PrefillShare /= s
		mix.GEMM /= s
		mix.Attention /= s
		mix.Memory /= s
		mix.Comm /= s
		mix.Launch /= s
		mix.Overhead /= s
	}
	res.Mix = mix
	return res, nil
}

// prefillReady: a prompt is mid-prefill, or the head of the queue can be admitted now.
func prefillReady(running, waiting []*simReq, kvFree, maxBatch float64, e Engine) bool {
	for _, r := range running {
		if r.prefilled < r.ISL {
			return true
		}
	}
	return len(waiting) > 0 && float64(len(running)) < maxBatch && float64(e.reserved(waiting[0].ISL+waiting[0].OSL)) <= kvFree
}

// insertByArrival keeps pending requests ordered by arrival time.
func insertByArrival(q []*simReq, r *simReq) []*simReq {
	i := sort.Search(len(q), func(i int) bool { return q[i].arrive > r.arrive })
	q = append(q, nil)
	copy(q[i+1:], q[i:])
	q[i] = r
	return q
}

// dist is the mean and percentiles (nearest rank) of xs.
func dist(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return Dist{Mean: sum / float64(len(s)), P50: q(0.5), P90: q(0.9), P99: q(0.99)}
}
