package serve

import (
	"errors"
	"fmt"
	memory "github.com/mrep-dev/mrep/layout"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/econ"
	"github.com/mrep-dev/mrep/kernels"
)

// Target is one chip the planner may use, with its kernel timing, price and power.
type Target struct {
	Chip chips.Chip
	// Pred times kernels on Chip at the scenario's compute dtype (timing.New(Chip, dtype)):
	// the caller builds it, as for layout, so the planner depends on the Predictor interface
	// and not on one time model.
	Pred kernels.Predictor
	// PriceUSDPerGPUHour: 0 when unknown (no cost is shown).
	PriceUSDPerGPUHour float64
	PriceSource        string
	Power              chips.Power
	// MaxTP is the largest tensor-parallel group: the node's scale-up domain, at most 8
	// (serving engines keep TP inside one NVLink node).
	MaxTP int64
}

// PlanOptions is a serving question: a workload, a load, SLOs and the GPUs allowed.
type PlanOptions struct {
	ISL, OSL int64
	// Users (closed loop) or Rate (requests/s, open); neither: offline max throughput.
	Users, Rate float64
	// TTFT and TPOT are the SLOs in seconds (0: none).
	TTFT, TPOT float64
	// GPUs fixes the deployment's size (replicas = GPUs / TP); MaxGPUs caps the search.
	GPUs, MaxGPUs int64
	Scenario      analyzer.Scenario // dtypes; TP/EP are searched
	Engine        Engine
	Top           int
	// Disagg adds disaggregated deployments to the search: a prefill pool and a decode pool of
	// any two of the layouts, balanced for the load, with each request's KV cache sent between.
	Disagg bool
	// Workload describes where ISL and OSL came from when they are a file's means.
	Workload string
	// Prompts are prompt lengths whose TTFT the best deployments report (a workload's ISL
	// quantiles), at PromptQuantiles.
	Prompts         []int64
	PromptQuantiles []float64
	// Lengths, when set, are the requests the simulation of the first deployment draws its
	// lengths from (a workload's mix); empty: every request ISL in, OSL out.
	Lengths []Request
	// SLOQuantile is the statistic of the simulated requests an SLO holds at: mean, p50, p90
	// or p99 ("": p90, the 90 % attainment DistServe (OSDI '24) sizes for). Under a load
	// with SLOs a deployment must meet them both in the steady state and, simulated step by
	// step, at this quantile.
	SLOQuantile string
}

// SLOQuantiles are the statistics an SLO may hold at (PlanOptions.SLOQuantile).
var SLOQuantiles = []string{"mean", "p50", "p90", "p99"}

// DefaultSLOQuantile is the SLO statistic when none is named.
const DefaultSLOQuantile = "p90"

func (o PlanOptions) sloQuantile() string {
	if o.SLOQuantile == "" {
		return DefaultSLOQuantile
	}
	return o.SLOQuantile
}

// at is d's figure at the quantile q (one of SLOQuantiles).
func (d Dist) at(q string) float64 {
	switch q {
	case "mean":
		return d.Mean
	case "p50":
		return d.P50
	case "p99":
		return d.P99
	}
	return d.P90
}

// QuantileTTFT is the time to first token of a prompt at a quantile of the workload's lengths,
// in the steady state of the means (queueing not included).
type QuantileTTFT struct {
	Quantile float64 `json:"quantile"`
	Prompt   int64   `json:"prompt_tokens"`
	TTFT     float64 `json:"ttft_s"`
}

// Config is one deployment: chip, layout, replicas and the steady state of one replica.
type Config struct {
	Chip     string  `json:"chip"`
	TP       int64   `json:"tp"`
	EP       int64   `json:"ep"` // 1: experts split by TP like the dense layers
	PP       int64   `json:"pp"` // pipeline stages of TP (or EP) GPUs each
	Replicas int64   `json:"replicas"`
	GPUs     int64   `json:"gpus"`
	BatchCap float64 `json:"batch_cap"` // sequences one replica may run (offline search)
	Result   Result  `json:"per_replica"`
	// TTFTQuantiles: the TTFT of the workload's p50/p90/p99 prompts (with --workload).
	TTFTQuantiles []QuantileTTFT `json:"ttft_quantiles,omitempty"`
	// Disagg is set for a disaggregated deployment: its prefill pool, the KV transfer and the
	// prefill queue; TP/EP/PP, Replicas and the steady state are then the decode pool's.
	Disagg *Disagg `json:"disaggregated,omitempty"`
	// Memory is what one GPU of the replica holds: its weights, the KV cache pool, the
	// engine's reserve (CUDA graphs, buffers, the prefill chunk's activations) and what is
	// left of its capacity; the KV cache in use at the planned concurrency beside the pool.
	Memory *GPUMemory `json:"memory_per_gpu,omitempty"`
	rp     Replica    // to re-time the deployment (not serialized)
	// Per GPU and per user (1/TPOT), and for the whole deployment.
	TokSPerGPU  float64 `json:"output_tokens_per_s_per_gpu"`
	TokSPerUser float64 `json:"output_tokens_per_s_per_user"`
	TokS        float64 `json:"output_tokens_per_s"`
	// ServingCost is the estimate of $ per 1M output tokens (0: no price) and joules per
	// output token, node share included, from econ (its fields sit in this JSON object).
	econ.ServingCost
	// PerToken splits the cost and energy between input and output tokens, and blends them
	// over all tokens, for the workload's ISL:OSL (set on the reported deployments).
	PerToken econ.TokenCosts `json:"per_token"`
	MeetsSLO bool            `json:"meets_slo"`
	Miss     string          `json:"miss,omitempty"` // which SLO or load it misses
	// UnderLoad is the SLO check of the deployment's simulation (one replica under its share
	// of the load, step by step) at the plan's SLO quantile; nil where none ran (no SLO, or
	// a disaggregated deployment, which Simulate does not model).
	UnderLoad *UnderLoad `json:"under_load,omitempty"`
	tg        Target     // to re-size the deployment with more replicas (not serialized)
	sim       *Simulated // the simulation UnderLoad came from
}

// UnderLoad is a deployment's simulated TTFT and TPOT at the SLO's quantile.
type UnderLoad struct {
	Quantile string  `json:"quantile"`
	TTFT     float64 `json:"ttft_s"`
	TPOT     float64 `json:"tpot_s"`
	MeetsSLO bool    `json:"meets_slo"`
}

// GPUMemory is one serving GPU's memory, in bytes.
type GPUMemory struct {
	Capacity float64 `json:"capacity"`
	Weights  float64 `json:"weights"`
	KVPool   float64 `json:"kv_pool"`
	KVInUse  float64 `json:"kv_in_use"` // the sequences running at the planned concurrency
	Reserve  float64 `json:"reserve"`
	Headroom float64 `json:"headroom"` // capacity less weights, pool and reserve
}

// memoryOf is a replica's per-GPU memory at concurrency sequences of isl+osl tokens (half of
// the output written, on average, while they decode).
func memoryOf(rp Replica, concurrency float64, isl, osl int64) *GPUMemory {
	e := rp.Engine
	w, kv := memory.KVPool(rp.Model, rp.Scenario, int64(e.stages()), rp.MemBytes, e.ReserveBytes, e.KVFraction, e.KVFractionOf)
	per := rp.Model.KVBytesPerToken(rp.Scenario) / float64(max(e.stages(), 1))
	inUse := concurrency / rp.DP() * (float64(isl) + float64(osl)/2) * per
	kv = math.Max(kv, 0)
	return &GPUMemory{Capacity: rp.MemBytes, Weights: w, KVPool: kv, KVInUse: math.Min(inUse, kv), Reserve: e.ReserveBytes,
		Headroom: rp.MemBytes - w - kv - e.ReserveBytes}
}

// Plan is the answer: the best configurations, the Pareto front and what was searched.
type Plan struct {
	Options    PlanOptions `json:"options"`
	Mode       string      `json:"mode"` // offline, users or rate
	Considered int         `json:"considered"`
	Fitting    int         `json:"fitting"`
	Meeting    int         `json:"meeting"` // in the steady state; Refuted lists those the simulation then refuted
	Best       []Config    `json:"best"`
	// Pareto is the front of tokens/s per GPU against tokens/s per user over every fitting
	// layout and batch cap of one replica: what a higher interactivity costs in throughput.
	Pareto []Config `json:"pareto"`
	// NoConfig says, when nothing meets the SLO and the load, which limit binds and the
	// nearest relaxation that works.
	NoConfig string `json:"no_config,omitempty"`
	// Simulated is the first deployment's load run through the engine's scheduler step by
	// step (Simulate): arrivals, admission, chunked prefill beside decodes, the tail. Absent
	// for disaggregated deployments, which the simulation does not model.
	Simulated *Simulated `json:"simulated,omitempty"`
	// Refuted are the deployments that met the SLOs in the steady state but not simulated
	// under the load (their Miss says which figure, at which quantile), best first, one per
	// chip, layout and size tried.
	Refuted []Config `json:"refuted_under_load,omitempty"`
	// Command is the command line that reproduces this plan (set by the caller that parsed
	// one; empty for a plan made in code).
	Command string `json:"command,omitempty"`
}

// Simulated is one replica of a deployment under its share of the load.
type Simulated struct {
	Config string    `json:"deployment"`
	Result SimResult `json:"result"`
}

// ErrBadWorkload: the workload or load cannot be served by any engine (ISL or OSL < 1...).
var ErrBadWorkload = errors.New("bad workload")

// ErrNoPredictor: a target came without the kernel timing to plan on.
var ErrNoPredictor = errors.New("no kernel predictor")

// OptionError is a planner option out of its range. Option is the knob's name as the command
// line spells it (isl, kv-fraction...), so a command can name its flag; it wraps ErrBadWorkload.
type OptionError struct {
	Option string
	Value  any
	Want   string
}

func (e *OptionError) Error() string { return fmt.Sprintf("%s %v: %s", e.Option, e.Value, e.Want) }

func (e *OptionError) Unwrap() error { return ErrBadWorkload }

// Validate checks the question and the engine's knobs; the one place their ranges are stated.
func (o PlanOptions) Validate() error {
	bad := func(opt string, v any, want string) error { return &OptionError{Option: opt, Value: v, Want: want} }
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case o.ISL < 1:
		return bad("isl", o.ISL, "must be at least 1")
	case o.OSL < 1:
		return bad("osl", o.OSL, "must be at least 1")
	case o.Users < 0 || !finite(o.Users):
		return bad("users", o.Users, "must be positive")
	case o.Rate < 0 || !finite(o.Rate):
		return bad("rate", o.Rate, "must be positive (requests/s)")
	case o.Users > 0 && o.Rate > 0:
		return bad("users", o.Users, "give one load, users or a rate, not both")
	case o.TTFT < 0 || o.TPOT < 0 || !finite(o.TTFT) || !finite(o.TPOT):
		return bad("tpot", o.TPOT, "SLOs must be positive durations")
	case o.GPUs < 0:
		return bad("gpus", o.GPUs, "must not be negative")
	case o.MaxGPUs < 0:
		return bad("max-gpus", o.MaxGPUs, "must not be negative")
	case o.Top < 0:
		return bad("top", o.Top, "want 0 (the default) or more deployments")
	case o.GPUs > 0 && o.MaxGPUs > 0 && o.GPUs > o.MaxGPUs:
		return bad("gpus", o.GPUs, fmt.Sprintf("more than --max-gpus %d: give one of them", o.MaxGPUs))
	case o.Users > 0 && (o.Users < 1 || o.Users > MaxUsers):
		return bad("users", o.Users, fmt.Sprintf("want 1 to %g concurrent users (a fraction of a user sends no request; more than the largest fleets serve is a typo)", float64(MaxUsers)))
	case o.Rate > MaxRate:
		return bad("rate", o.Rate, fmt.Sprintf("want at most %g requests/s", float64(MaxRate)))
	case o.SLOQuantile != "" && !slices.Contains(SLOQuantiles, o.SLOQuantile):
		return bad("slo-quantile", fmt.Sprintf("%q", o.SLOQuantile), "want one of "+strings.Join(SLOQuantiles, ", "))
	}
	return o.Engine.Validate()
}

// MaxUsers and MaxRate bound a load: beyond them a figure is a typo, and the planner would size
// fleets of millions of GPUs before saying no layout carries it.
const (
	MaxUsers = 10_000_000
	MaxRate  = 1_000_000
)

// Validate checks the engine's knobs.
func (e Engine) Validate() error {
	bad := func(opt string, v any, want string) error { return &OptionError{Option: opt, Value: v, Want: want} }
	switch {
	case e.SpecTokens < 0 || e.SpecTokens > 16:
		return bad("spec-tokens", e.SpecTokens, "want 0 to 16 draft tokens per step")
	case !(e.SpecAccept >= 0 && e.SpecAccept <= 1):
		return bad("spec-accept", e.SpecAccept, "a probability, in [0, 1]")
	case !(e.SpecDraftCost >= 0 && e.SpecDraftCost <= 10):
		return bad("spec-draft-cost", e.SpecDraftCost, "a share of a decode step, 0 to 10")
	case e.KVBlock < 0 || e.KVBlock > 4096:
		return bad("kv-block", e.KVBlock, "want 0 (contiguous) to 4096 tokens per block")
	case !(e.PrefixHit >= 0 && e.PrefixHit < 1):
		return bad("prefix-hit", e.PrefixHit, "must be in [0, 1)")
	case !(e.TokenBudget >= 1) || math.IsInf(e.TokenBudget, 0):
		return bad("token-budget", e.TokenBudget, "must be at least 1")
	case !(e.KVFraction >= 0.05 && e.KVFraction <= 1):
		return bad("kv-fraction", e.KVFraction, "must be in [0.05, 1] (the share of memory the engine takes; below 0.05 no weights fit beside a KV cache)")
	}
	return nil
}

// LayoutName says a replica's layout: "TP4", "TP8 PP2", "TP4 EP4", "attention DP8, EP8".
func LayoutName(tp, ep, pp int64) string {
	s := fmt.Sprintf("TP%d", tp)
	if ep > tp { // attention data-parallel beside the experts
		s = fmt.Sprintf("attention DP%d, EP%d", ep/tp, ep)
		if tp > 1 {
			s = fmt.Sprintf("attention TP%d x DP%d, EP%d", tp, ep/tp, ep)
		}
	} else if ep > 1 {
		s += fmt.Sprintf(" EP%d", ep)
		if ep < tp {
			s += fmt.Sprintf(" x ETP%d", tp/ep)
		}
	}
	if pp > 1 {
		s += fmt.Sprintf(" PP%d", pp)
	}
	return s
}

// Layout says the configuration's replica layout; a disaggregated one names both pools.
func (c Config) Layout() string {
	if d := c.Disagg; d != nil {
		return fmt.Sprintf("prefill %s x%d + decode %s x%d", d.Layout(), d.PrefillReplicas, LayoutName(c.TP, c.EP, c.PP), c.Replicas)
	}
	return LayoutName(c.TP, c.EP, c.PP)
}

// InferenceETP is how many ways a serving replica splits each expert by tensor: the TP group
// holds all the experts, so EP groups of TP/EP GPUs each (EP <= TP); with the attention
// data-parallel (EP > TP) each expert sits whole on one GPU.
func InferenceETP(tp, ep int64) int64 {
	if ep <= 1 {
		return tp
	}
	return max(1, tp/ep)
}

// layout is one replica's parallel layout: TP, EP (> TP: attention data-parallel beside the
// experts) and PP stages.
type layout struct{ tp, ep, pp int64 }

// maxPPNodes bounds a pipelined replica to two scale-up domains (TP8 PP2 is how a 405B model
// is served on two 8-GPU nodes); longer pipelines only add latency for serving.
const maxPPNodes = 2

// maxWideEPDomains bounds wide expert parallelism to eight scale-up domains (64 H100s; DeepSeek's
// own decode deployment spans 18 nodes, beyond what one replica of a plan is sized for here).
const maxWideEPDomains = 8

// layouts are the replica layouts of a model on a chip: TP a power of two up to MaxTP; a MoE
// model also with experts spread over the TP ranks (EP = TP, attention tensor-parallel) and
// with attention data-parallel beside experts over the node (TP1, EP = DP up to MaxTP); and
// the TP (and EP = TP) layouts again with PP = 2, 4, 8 stages, at most two nodes in all; and
// wide expert parallelism across scale-up domains (attention data-parallel on every GPU, EP
// over 2, 4 or 8 domains, the experts' all-to-all on the scale-out network: DeepSeek's EP32
// and EP64 deployments, SGLang's and TensorRT-LLM's wide-EP recipes).
func layouts(m *analyzer.Model, maxTP int64) []layout {
	var out []layout
	if moe := m.Fingerprint.MoE; moe != nil {
		for ep := 2 * maxTP; ep <= maxWideEPDomains*maxTP && ep <= moe.RoutedExperts; ep *= 2 {
			if moe.RoutedExperts%ep == 0 {
				out = append(out, layout{1, ep, 1})
			}
		}
	}
	for tp := int64(1); tp <= maxTP; tp *= 2 {
		bases := []layout{{tp, 1, 1}}
		if m.Fingerprint.MoE != nil && tp > 1 {
			bases = append(bases, layout{tp, tp, 1})
			out = append(out, layout{1, tp, 1})
			// experts split both ways inside the TP group: EP groups of TP/EP-way split
			// experts (SGLang's --tp 8 --ep 4, TensorRT-LLM's tp_size 8 ep_size 4; not vLLM:
			// Engine.RunsLayout)
			for ep := int64(2); ep < tp; ep *= 2 {
				if m.Fingerprint.MoE.RoutedExperts%ep == 0 {
					bases = append(bases, layout{tp, ep, 1})
				}
			}
		}
		for _, b := range bases {
			for pp := int64(1); pp <= 8 && pp <= m.Fingerprint.Layers && tp*pp <= maxPPNodes*maxTP; pp *= 2 {
				out = append(out, layout{b.tp, b.ep, pp})
			}
		}
	}
	return out
}

// RunsLayout says whether the engine has options for a layout: vLLM splits each expert over the
// whole TP group (no --enable-expert-parallel) or places experts whole over all TP x DP ranks
// (with it; EngineArgs has no expert-parallel size of its own), so EP groups inside a TP group
// (1 < EP < TP) are not a vLLM deployment.
func (e Engine) RunsLayout(tp, ep int64) bool {
	return !(strings.EqualFold(e.Name, "vllm") && ep > 1 && ep < tp)
}

// withinContext refuses a workload whose longest sequence (prompt and output) the model cannot
// hold: an engine would reject every such request, so no plan for it means anything.
func withinContext(m *analyzer.Model, o PlanOptions) error {
	mp := m.Fingerprint.MaxPositions
	if mp <= 0 {
		return nil
	}
	longest := o.ISL
	for _, p := range o.Prompts {
		longest = max(longest, p)
	}
	if longest+o.OSL > mp {
		return fmt.Errorf("a %d-token prompt and %d output tokens exceed the model's context of %d tokens (max_position_embeddings); "+
			"shorten them, or, for a checkpoint extended beyond its config (RoPE scaling), say so with --set max_position_embeddings=N", longest, o.OSL, mp)
	}
	return nil
}

// PlanServe searches chips x layouts x batch caps x replicas for the deployments that fit,
// meet the SLOs and carry the load, best first: with a load, the fewest GPUs (then the
// cheapest); offline, the most tokens/s per GPU.
func PlanServe(m *analyzer.Model, targets []Target, o PlanOptions) (Plan, error) {
	if reflect.ValueOf(o.Engine).IsZero() { // no engine stated
		o.Engine = DefaultEngine()
	}
	if err := o.Validate(); err != nil {
		return Plan{}, err
	}
	if err := withinContext(m, o); err != nil {
		return Plan{}, err
	}
	if o.Top <= 0 {
		o.Top = 10
	}
	pl := Plan{Options: o, Mode: "offline"}
	switch {
	case o.Users > 0:
		pl.Mode = "users"
	case o.Rate > 0:
		pl.Mode = "rate"
	}
	// each chip's search is independent: run them side by side, merge in the order given
	found := make([]targetSearch, len(targets))
	var wg sync.WaitGroup
	for i, tg := range targets {
		if tg.Pred == nil {
			return pl, fmt.Errorf("chip %s: %w", tg.Chip.Name, ErrNoPredictor)
		}
		wg.Add(1)
		go func(i int, tg Target) {
			defer wg.Done()
			found[i] = o.searchTarget(m, tg, pl.Mode)
		}(i, tg)
	}
	wg.Wait()
	var all, front []Config
	var minTPOT, minTTFT *Config
	var fitErrs []string
	for _, f := range found {
		if f.err != nil {
			return pl, f.err
		}
		pl.Considered += f.considered
		pl.Fitting += f.fitting
		fitErrs = append(fitErrs, f.fitErrs...)
		front = append(front, f.front...)
		all = append(all, f.all...)
		if f.minTPOT != nil && (minTPOT == nil || f.minTPOT.Result.TPOT < minTPOT.Result.TPOT) {
			minTPOT = f.minTPOT
		}
		if f.minTTFT != nil && (minTTFT == nil || f.minTTFT.Result.TTFT < minTTFT.Result.TTFT) {
			minTTFT = f.minTTFT
		}
	}
	pl.Pareto = pareto(front)
	for _, c := range all {
		if c.MeetsSLO {
			pl.Meeting++
			pl.Best = append(pl.Best, c)
		}
	}
	sort.SliceStable(pl.Best, func(i, j int) bool { return pl.better(pl.Best[i], pl.Best[j]) })
	if o.checksUnderLoad(pl.Mode) {
		best, refuted, err := o.underLoad(pl, pl.Best)
		if err != nil {
			return pl, err
		}
		if len(best) == 0 {
			pl.Meeting = 0
		}
		pl.Best, pl.Refuted = best, refuted
	}
	pl.Best = dedupe(pl.Best, o.Top)
	for _, cs := range [][]Config{pl.Best, pl.Pareto} {
		for i := range cs {
			if err := cs[i].splitCost(o.ISL, o.OSL); err != nil {
				return pl, err
			}
		}
	}
	for i := range pl.Best {
		c := &pl.Best[i]
		if d := c.Disagg; d != nil {
			node := int64(8)
			for _, tg := range targets {
				if tg.Chip.Name == c.Chip {
					node = tg.MaxTP
				}
			}
			for k, x := range o.Prompts {
				c.TTFTQuantiles = append(c.TTFTQuantiles, QuantileTTFT{Quantile: o.PromptQuantiles[k], Prompt: x, TTFT: d.PromptTTFT(x, c.rp, node)})
			}
			continue
		}
		if c.rp.Model != nil {
			c.Memory = memoryOf(c.rp, c.Result.Concurrency, o.ISL, o.OSL)
		}
		for k, x := range o.Prompts {
			rp := c.rp
			rp.Engine.Prompt = x
			r, err := rp.At(o.ISL, o.OSL, c.Result.Concurrency)
			if err != nil {
				return pl, err
			}
			c.TTFTQuantiles = append(c.TTFTQuantiles, QuantileTTFT{Quantile: o.PromptQuantiles[k], Prompt: x, TTFT: r.TTFT})
		}
	}
	if pl.Meeting == 0 {
		pl.NoConfig = o.why(m, pl, fitErrs, minTPOT, minTTFT, targets)
	}
	if len(pl.Best) > 0 && pl.Best[0].sim != nil {
		pl.Simulated = pl.Best[0].sim
	} else if len(pl.Best) > 0 {
		sim, err := o.simulate(pl.Best[0])
		if err != nil {
			return pl, fmt.Errorf("simulating %s: %w", pl.Best[0].Layout(), err)
		}
		pl.Simulated = sim
	}
	return pl, nil
}

// simulate runs one replica of c under its share of the load: the users or the rate divided
// over the replicas, or offline a wave of twice the batch cap (all queued at once, as
// trtllm-bench and `vllm bench throughput` run). Nil for what Simulate does not model.
func (o PlanOptions) simulate(c Config) (*Simulated, error) {
	if c.Disagg != nil || c.rp.Model == nil {
		return nil, nil
	}
	lengths := o.Lengths
	if len(lengths) == 0 {
		lengths = []Request{{o.ISL, o.OSL}}
	}
	reps := float64(max(c.Replicas, 1))
	load := Load{Lengths: lengths, Seed: 1}
	switch {
	case o.Users > 0:
		load.Kind, load.N = Users, int(math.Max(1, math.Round(o.Users/reps)))
	case o.Rate > 0:
		load.Kind, load.Rate = Rate, o.Rate/reps
	default:
		load.Kind, load.N = Wave, int(math.Min(8192, math.Max(1, 2*math.Round(c.Result.Concurrency))))
	}
	if load.Kind == Users {
		// ten requests per user, fewer where outputs are so long that ten would not finish
		// within the simulation's steps (each request is at least OSL steps of its user)
		per := math.Max(1, math.Min(10, math.Floor(MaxSimSteps/4/float64(o.OSL))))
		load.Requests = load.N * int(per)
	}
	rp := c.rp
	if c.BatchCap > 0 {
		rp.Engine.MaxBatch = math.Min(rp.Engine.MaxBatch, c.BatchCap)
	}
	r, err := rp.Simulate(load)
	if errors.Is(err, ErrSimTooLong) {
		return nil, nil // too long to run step by step: the steady state stands, as the plan says
	} else if err != nil {
		return nil, err
	}
	return &Simulated{Config: fmt.Sprintf("%s %s x%d", c.Chip, c.Layout(), c.Replicas), Result: r}, nil
}

// checksUnderLoad says whether the plan's SLOs are checked by simulation: under a load (users
// or a rate) with an SLO; offline, a wave's TTFT is the queue of the whole batch, so only a TPOT
// SLO is.
func (o PlanOptions) checksUnderLoad(mode string) bool {
	if mode == "offline" {
		return o.TPOT > 0
	}
	return o.TTFT > 0 || o.TPOT > 0
}

// maxUnderLoadSims bounds the simulations one plan runs to check its SLOs under load.
const maxUnderLoadSims = 64

// underLoad walks the deployments that meet the SLOs in the steady state, best first, and
// keeps those whose simulation meets them too at the SLO's quantile (the steady state has no
// burst, no admission wait and no tail). One that misses is tried again with more replicas
// (each then carries less of the load), re-ranked among the rest, until o.Top layouts pass or
// the simulations run out; what cannot be simulated (disaggregated) is kept on its steady
// state. The result is ranked as before; refuted holds each miss.
func (o PlanOptions) underLoad(pl Plan, cands []Config) (kept, refuted []Config, err error) {
	type key [3]string
	keyOf := func(c Config) key {
		k := key{c.Chip, LayoutName(c.TP, c.EP, c.PP), ""}
		if d := c.Disagg; d != nil {
			k[2] = d.Layout()
		}
		return k
	}
	queue := append([]Config(nil), cands...)
	done := map[key]bool{}
	sims := 0
	for len(queue) > 0 && countLayouts(kept) < o.Top {
		c := queue[0]
		queue = queue[1:]
		if done[keyOf(c)] {
			continue
		}
		if sims >= maxUnderLoadSims {
			kept = append(kept, c) // unchecked: UnderLoad stays nil, as the report says
			done[keyOf(c)] = true
			continue
		}
		sim, err := o.simulate(c)
		if err != nil {
			return nil, nil, fmt.Errorf("simulating %s %s: %w", c.Chip, c.Layout(), err)
		}
		if sim == nil {
			kept = append(kept, c)
			done[keyOf(c)] = true
			continue
		}
		sims++
		c.sim = sim
		c.UnderLoad = o.checkSim(sim.Result)
		if c.UnderLoad.MeetsSLO {
			kept = append(kept, c)
			done[keyOf(c)] = true
			continue
		}
		c.MeetsSLO, c.Miss = false, o.missUnderLoad(c.UnderLoad)
		refuted = append(refuted, c)
		if g, ok, err := o.nextTry(c, pl.Mode); err != nil {
			return nil, nil, err
		} else if ok {
			at := sort.Search(len(queue), func(i int) bool { return pl.better(g, queue[i]) })
			queue = append(queue[:at], append([]Config{g}, queue[at:]...)...)
		}
	}
	return kept, refuted, nil
}

// checkSim is the SLO check of one simulated replica at the plan's quantile.
func (o PlanOptions) checkSim(r SimResult) *UnderLoad {
	q := o.sloQuantile()
	u := &UnderLoad{Quantile: q, TTFT: r.TTFT.at(q), TPOT: r.TPOT.at(q), MeetsSLO: true}
	if o.TTFT > 0 && r.Load != Wave && u.TTFT > o.TTFT {
		u.MeetsSLO = false
	}
	if o.TPOT > 0 && u.TPOT > o.TPOT {
		u.MeetsSLO = false
	}
	return u
}

// missUnderLoad says which simulated figure broke which SLO.
func (o PlanOptions) missUnderLoad(u *UnderLoad) string {
	var miss []string
	if o.TTFT > 0 && u.TTFT > o.TTFT {
		miss = append(miss, fmt.Sprintf("simulated %s TTFT %.3g s, over the %.3g s SLO", u.Quantile, u.TTFT, o.TTFT))
	}
	if o.TPOT > 0 && u.TPOT > o.TPOT {
		miss = append(miss, fmt.Sprintf("simulated %s TPOT %.3g ms, over the %.3g ms SLO", u.Quantile, u.TPOT*1e3, o.TPOT*1e3))
	}
	return strings.Join(miss, ", ")
}

// nextTry is the next deployment to try after c missed its SLOs under load: with a load, c with
// more replicas (a quarter more, at least one; each then carries less of the load); offline, c
// with a batch cap a tenth smaller (less queueing and fewer prefill chunks beside each decode).
// Either is re-timed in the steady state and judged; false when the GPUs are fixed or capped,
// nothing smaller is left, or the steady state misses too.
func (o PlanOptions) nextTry(c Config, mode string) (Config, bool, error) {
	if c.Disagg != nil || c.rp.Model == nil {
		return Config{}, false, nil
	}
	if mode == "offline" {
		cap := math.Floor(0.9 * c.BatchCap)
		if cap < 1 {
			return Config{}, false, nil
		}
		r, err := c.rp.At(o.ISL, o.OSL, cap)
		if err != nil {
			return Config{}, false, err
		}
		if r.Bound == "load" {
			r.Bound = "batch-cap"
		}
		g := c.tg.config(c.rp, r, c.Replicas, cap)
		o.judge(&g)
		return g, g.MeetsSLO, nil
	}
	if o.GPUs > 0 {
		return Config{}, false, nil
	}
	reps := max(c.Replicas+1, int64(math.Ceil(1.25*float64(c.Replicas))))
	size := c.GPUs / max(c.Replicas, 1)
	if o.MaxGPUs > 0 && reps*size > o.MaxGPUs {
		return Config{}, false, nil
	}
	var r Result
	var err error
	if o.Users > 0 {
		if o.Users/float64(reps) < 1 {
			return Config{}, false, nil
		}
		r, err = c.rp.Users(o.ISL, o.OSL, o.Users/float64(reps))
	} else {
		r, err = c.rp.Rate(o.ISL, o.OSL, o.Rate/float64(reps))
	}
	if errors.Is(err, ErrOverloaded) {
		return Config{}, false, nil
	} else if err != nil {
		return Config{}, false, err
	}
	g := c.tg.config(c.rp, r, reps, c.BatchCap)
	o.judge(&g)
	return g, g.MeetsSLO, nil
}

// countLayouts is how many chip and layout pairs cs holds (one answer each, as dedupe keeps).
func countLayouts(cs []Config) int {
	return len(dedupe(cs, 0))
}

// largestCap is the largest batch cap whose steady state meets the SLOs (bisection: TPOT and
// TTFT grow with the batch), so "the largest batch under 50 ms" is answered exactly.
func (o PlanOptions) largestCap(tg Target, rp Replica, limit float64) (float64, bool, error) {
	meets := func(cap float64) (bool, error) {
		r, err := rp.At(o.ISL, o.OSL, cap)
		if err != nil {
			return false, err
		}
		c := tg.config(rp, r, 1, cap)
		o.judge(&c)
		return c.MeetsSLO, nil
	}
	return largestMeeting(limit, meets)
}

// largestMeeting is the largest whole batch in [1, limit] that meets, by bisection (meeting
// is monotone: a larger batch only lengthens the steps); false when even one sequence misses.
func largestMeeting(limit float64, meets func(float64) (bool, error)) (float64, bool, error) {
	if ok, err := meets(1); err != nil || !ok {
		return 0, false, err
	}
	if ok, err := meets(limit); err != nil || ok {
		return limit, err == nil, err
	}
	lo, hi := 1.0, limit // meets at lo, not at hi
	for hi-lo > 1 {
		mid := math.Floor((lo + hi) / 2)
		ok, err := meets(mid)
		if err != nil {
			return 0, false, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, true, nil
}

// caps are the batch caps tried: powers of two below the limit and the limit itself.
func caps(limit float64) []float64 {
	var out []float64
	for c := 1.0; c < limit; c *= 2 {
		out = append(out, c)
	}
	return append(out, limit)
}

func (tg Target) config(rp Replica, r Result, replicas int64, cap float64) Config {
	s, pp := rp.Scenario, int64(rp.Engine.stages())
	c := Config{Chip: tg.Chip.Name, TP: s.TP, EP: s.EP, PP: pp, Replicas: replicas, GPUs: replicas * max(s.TP, s.EP) * pp, BatchCap: cap, Result: r, rp: rp, tg: tg}
	c.TokS = r.OutputTokS * float64(replicas)
	c.TokSPerGPU = c.TokS / float64(c.GPUs)
	if r.TPOT > 0 {
		c.TokSPerUser = 1 / r.TPOT
	}
	c.ServingCost = econ.Serving(c.TokS, c.GPUs, r.Busy, tg.PriceUSDPerGPUHour, tg.Power)
	return c
}

// judge marks whether c meets the SLOs.
func (o PlanOptions) judge(c *Config) {
	c.MeetsSLO, c.Miss = true, ""
	if o.TTFT > 0 && c.Result.TTFT > o.TTFT {
		c.MeetsSLO, c.Miss = false, fmt.Sprintf("TTFT %.3g s > %.3g s", c.Result.TTFT, o.TTFT)
	}
	if o.TPOT > 0 && c.Result.TPOT > o.TPOT {
		c.MeetsSLO, c.Miss = false, fmt.Sprintf("TPOT %.3g ms > %.3g ms", c.Result.TPOT*1e3, o.TPOT*1e3)
	}
}

// loaded sizes one layout for the load: the fewest replicas (binary search; more replicas
// only lighten each one) whose steady state meets the SLOs, within the GPU limits.
func (o PlanOptions) loaded(tg Target, rp Replica, limit float64) (Config, bool, error) {
	tp := rp.gpus()
	eval := func(reps int64) (Config, bool, error) {
		var r Result
		var err error
		if o.Users > 0 {
			per := o.Users / float64(reps)
			if o.GPUs == 0 && per > limit { // a sized deployment admits every user at once
				return Config{}, false, nil
			}
			r, err = rp.Users(o.ISL, o.OSL, per)
		} else {
			r, err = rp.Rate(o.ISL, o.OSL, o.Rate/float64(reps))
			if errors.Is(err, ErrOverloaded) {
				return Config{}, false, nil
			}
		}
		if err != nil {
			return Config{}, false, err
		}
		c := tg.config(rp, r, reps, limit)
		o.judge(&c)
		return c, c.MeetsSLO, nil
	}
	if o.GPUs > 0 {
		c, _, err := eval(o.GPUs / tp)
		return c, err == nil && c.GPUs > 0, err
	}
	hi := int64(math.Ceil(math.Max(o.Users, 1)))
	if o.Rate > 0 {
		hi = 1 << 20
	}
	if o.MaxGPUs > 0 {
		hi = min(hi, o.MaxGPUs/tp)
	}
	if hi < 1 {
		return Config{}, false, nil
	}
	best, ok, err := eval(hi)
	if err != nil || !ok {
		return best, false, err
	}
	lo := int64(1)
	for lo < hi {
		mid := (lo + hi) / 2
		c, good, err := eval(mid)
		if err != nil {
			return c, false, err
		}
		if good {
			hi, best = mid, c
		} else {
			lo = mid + 1
		}
	}
	return best, true, nil
}

// better orders configurations: with a load, fewer GPUs, then cost, then TPOT; offline, more
// tokens/s per GPU, then a lower TPOT.
func (pl Plan) better(a, b Config) bool {
	if pl.Mode != "offline" {
		if a.GPUs != b.GPUs {
			return a.GPUs < b.GPUs
		}
		if a.USDPerMTok != b.USDPerMTok {
			return a.USDPerMTok < b.USDPerMTok
		}
		return a.Result.TPOT < b.Result.TPOT
	}
	if a.TokSPerGPU != b.TokSPerGPU {
		return a.TokSPerGPU > b.TokSPerGPU
	}
	return a.Result.TPOT < b.Result.TPOT
}

// dedupe keeps the best batch cap of each chip and layout, at most top of them.
func dedupe(cs []Config, top int) []Config {
	seen := map[[3]string]bool{}
	var out []Config
	for _, c := range cs {
		k := [3]string{c.Chip, LayoutName(c.TP, c.EP, c.PP), ""}
		if d := c.Disagg; d != nil {
			k[2] = d.Layout() // one answer per pair of pool layouts
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		if out = append(out, c); len(out) == top {
			break
		}
	}
	return out
}

// pareto keeps, for each chip, the configurations no other of the chip beats on both tokens/s
// per GPU and per user (one front per chip: a faster chip's front would hide the other's).
func pareto(cs []Config) []Config {
	sorted := append([]Config(nil), cs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].TokSPerUser != sorted[j].TokSPerUser {
			return sorted[i].TokSPerUser > sorted[j].TokSPerUser
		}
		return sorted[i].TokSPerGPU > sorted[j].TokSPerGPU
	})
	var out []Config
	bestGPU := map[string]float64{}
	for _, c := range sorted {
		if b, ok := bestGPU[c.Chip]; !ok || c.TokSPerGPU > b {
			out = append(out, c)
			bestGPU[c.Chip] = c.TokSPerGPU
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Chip < out[j].Chip })
	return out
}

// why explains an empty answer: nothing fits, or the SLO that binds with the best any layout
// reaches and the weight streaming that floors TPOT, and the nearest relaxation.
func (o PlanOptions) why(m *analyzer.Model, pl Plan, fitErrs []string, minTPOT, minTTFT *Config, targets []Target) string {
	if len(pl.Refuted) > 0 {
		c := pl.Refuted[0]
		return fmt.Sprintf("%d deployments meet the SLO in the steady state but none simulated step by step under the load "+
			"(requests arriving together queue for admission and prefill behind each other): the first, %s %s x%d, has %s. "+
			"Allow more GPUs (--max-gpus), relax the SLO, or hold it at another statistic (--slo-quantile mean|p50|p90|p99)",
			countLayouts(pl.Refuted), c.Chip, c.Layout(), c.Replicas, c.Miss)
	}
	if pl.Fitting == 0 {
		if len(fitErrs) > 0 {
			return "no layout fits: " + fitErrs[len(fitErrs)-1] + "; try --dtype fp8 (or --weight-dtype fp8), a chip with more memory, or a shorter context"
		}
		return "no layout was searched (check --gpus against the replica sizes: TP 1, 2, 4, 8, times PP 1, 2, 4, 8)"
	}
	if minTPOT != nil && o.TPOT > 0 && minTPOT.Result.TPOT > o.TPOT {
		var floor float64
		for _, tg := range targets {
			if tg.Chip.Name == minTPOT.Chip {
				s := o.Scenario
				etp := minTPOT.TP
				if minTPOT.EP > 1 {
					etp = 1
				}
				w := m.ParamsPerGPU(minTPOT.TP, 1, minTPOT.EP, etp) * s.WeightBytes
				floor = w / (tg.Chip.HBMBytesPerSec() * tg.Chip.Efficiency.HBMFrac)
			}
		}
		return fmt.Sprintf("TPOT >= %.1f ms even at %s %s, batch 1: streaming the weights alone takes %.1f ms a step; relax --tpot to %.0f ms or use a chip with more memory bandwidth",
			minTPOT.Result.TPOT*1e3, minTPOT.Chip, minTPOT.Layout(), floor*1e3, math.Ceil(minTPOT.Result.TPOT*1e3))
	}
	if minTTFT != nil && o.TTFT > 0 && minTTFT.Result.TTFT > o.TTFT {
		return fmt.Sprintf("TTFT >= %.3g s even at %s %s with one request in flight: the %d-token prefill alone takes that long; relax --ttft to %.3g s or shorten the prompt",
			minTTFT.Result.TTFT, minTTFT.Chip, minTTFT.Layout(), o.ISL, minTTFT.Result.TTFT)
	}
	if o.MaxGPUs > 0 || o.GPUs > 0 {
		return "the SLOs are met only with more GPUs than --gpus/--max-gpus allow: raise it"
	}
	return "no layout meets the SLOs under the load: relax --ttft or --tpot"
}

// splitCost sets the per-token costs of either kind: a disaggregated deployment's input tokens
// carry the prefill pool (its GPUs' share of the spend, its draw's share of the energy); an
// aggregated one's carry the share of each step its prefill tokens take (the step's time
// beside the same step without them).
func (c *Config) splitCost(isl, osl int64) error {
	in := c.TokS * float64(isl) / float64(max(osl, 1))
	if d := c.Disagg; d != nil {
		c.PerToken = econ.Split(c.ServingCost, in, c.TokS, float64(d.PrefillGPUs)/float64(max(c.GPUs, 1)), d.EnergyShare)
		return nil
	}
	share, err := c.rp.PrefillShare(isl, osl, c.Result)
	if err != nil {
		return err
	}
	c.PerToken = econ.Split(c.ServingCost, in, c.TokS, share, share)
	return nil
}

// targetSearch is one chip's part of a plan: every layout and batch cap on it.
type targetSearch struct {
	considered, fitting int
	fitErrs             []string
	front, all          []Config
	minTPOT, minTTFT    *Config
	err                 error
}

// searchTarget searches one chip: the layouts that fit, each at its batch caps (offline) or
// under the load, and the disaggregated pairs of its layouts.
func (o PlanOptions) searchTarget(m *analyzer.Model, tg Target, mode string) targetSearch {
	var f targetSearch
	pred := tg.Pred
	var fitting []Replica // for the disaggregated search
	for _, lay := range layouts(m, tg.MaxTP) {
		if !o.Engine.RunsLayout(lay.tp, lay.ep) {
			continue
		}
		s := o.Scenario
		s.TP, s.EP, s.ETP = lay.tp, lay.ep, InferenceETP(lay.tp, lay.ep)
		size := max(s.TP, s.EP) * lay.pp // GPUs in one replica
		if o.MaxGPUs > 0 && size > o.MaxGPUs || o.GPUs > 0 && o.GPUs%size != 0 {
			continue
		}
		e := o.Engine.ForLayout(max(s.TP, s.EP), lay.pp, max(1, s.EP/s.TP))
		e.PP, e.PPTier = lay.pp, kernels.ScaleUp
		if size > tg.MaxTP {
			e.PPTier = kernels.ScaleOut // the stages span nodes
		}
		rp := Replica{Model: m, Scenario: s, Pred: pred, MemBytes: tg.Chip.MemoryBytes(), Engine: e}
		maxKV, _, _ := Capacity(m, s, rp.MemBytes, o.ISL, o.OSL, e)
		limit := rp.Limit(o.ISL, o.OSL)
		f.considered++
		if maxKV < 1 {
			f.fitErrs = append(f.fitErrs, fmt.Sprintf("%s %s: weights %.1f GiB per GPU leave no room for one %d-token sequence",
				tg.Chip.Name, LayoutName(s.TP, s.EP, lay.pp), m.ParamsPerGPU(s.TP, lay.pp, s.EP, s.ETP)*s.WeightBytes/(1<<30), o.ISL+o.OSL))
			continue
		}
		f.fitting++
		fitting = append(fitting, rp)
		// the offline sweep over batch caps: the Pareto front and, without a load, the answer
		cs := caps(limit)
		if mode == "offline" && (o.TTFT > 0 || o.TPOT > 0) {
			if edge, ok, err := o.largestCap(tg, rp, limit); err != nil {
				f.err = err
				return f
			} else if ok {
				cs = append(cs, edge)
			}
		}
		for _, cap := range cs {
			r, err := rp.At(o.ISL, o.OSL, cap)
			if err != nil {
				f.err = err
				return f
			}
			if r.Bound == "load" {
				r.Bound = "batch-cap"
			}
			c := tg.config(rp, r, 1, cap)
			if f.minTPOT == nil || c.Result.TPOT < f.minTPOT.Result.TPOT {
				f.minTPOT = &c
			}
			if f.minTTFT == nil || c.Result.TTFT < f.minTTFT.Result.TTFT {
				f.minTTFT = &c
			}
			f.front = append(f.front, c)
			if mode == "offline" {
				reps := int64(1)
				if o.GPUs > 0 {
					reps = o.GPUs / size
				}
				c = tg.config(rp, r, reps, cap)
				o.judge(&c)
				f.all = append(f.all, c)
			}
		}
		if mode != "offline" {
			c, ok, err := o.loaded(tg, rp, limit)
			if err != nil {
				f.err = err
				return f
			}
			if ok {
				f.all = append(f.all, c)
			}
		}
	}
	if o.Disagg {
		cs, err := o.disagg(tg, fitting)
		if err != nil {
			f.err = err
			return f
		}
		f.considered += len(fitting) * len(fitting)
		f.all = append(f.all, cs...)
	}
	return f
}
