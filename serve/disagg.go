package serve

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/econ"
	"github.com/mrep-dev/mrep/kernels"
)

// Disaggregated serving (DistServe, Zhong et al. 2024; Splitwise, Patel et al. 2024; NVIDIA
// Dynamo, SGLang's PD mode) runs prompts on a pool of prefill replicas and generation on a pool
// of decode replicas: a prefill replica fills each step with whole prompts (no decode tokens
// beside them), sends each request's KV cache to a decode replica, whose steps carry decode
// tokens only. Prefill no longer stretches the decode steps (TPOT), and the pools are sized
// apart; the price is the KV transfer and GPUs split between two pools that must be balanced.

// PrefillStat is one prefill replica's steady state.
type PrefillStat struct {
	// Prompts per step (per cycle with PP stages; over all attention groups with DP), the step
	// time, and the requests per second the replica prefills.
	Prompts  float64 `json:"prompts_per_step"`
	StepTime float64 `json:"step_time"`
	ReqPerS  float64 `json:"requests_per_s"`
	// Prefill is one prompt's own time from its first step to its last token's logits.
	Prefill float64 `json:"prefill"`
	Busy    float64 `json:"busy"`
}

// Prefill is a prefill replica's steady state on prompts of isl tokens: steps of as many whole
// prompts as the token budget takes (one prompt in chunks when it is longer), each held in the
// KV cache until it is sent (room for two steps' prompts: the one computed and the one leaving).
func (rp Replica) Prefill(isl int64) (PrefillStat, error) {
	return rp.prefillUpTo(isl, math.Inf(1))
}

// prefillUpTo is Prefill with at most most prompts a step (per micro-batch and attention
// group): a replica under a light load steps with the prompts that are waiting.
func (rp Replica) prefillUpTo(isl int64, most float64) (PrefillStat, error) {
	if isl < 1 {
		return PrefillStat{}, fmt.Errorf("isl must be >= 1 (got %d)", isl)
	}
	e := rp.Engine
	e.DecodeOnly, e.SpecTokens = false, 0
	computed := e.computed(isl)
	kvPrompts := math.Floor(KVTokens(rp.Model, rp.Scenario, rp.MemBytes, e) / float64(2*e.reserved(isl)))
	if kvPrompts < 1 {
		return PrefillStat{}, fmt.Errorf("not two %d-token prompts fit in the KV cache next to the weights", isl)
	}
	pp := e.stages()
	n, chunks, tokens := 1.0, 1.0, float64(computed)
	if float64(computed) <= e.TokenBudget {
		n = math.Min(math.Floor(e.TokenBudget/float64(computed)), math.Max(1, math.Floor(kvPrompts/pp)))
		n = math.Max(1, math.Min(n, math.Floor(most)))
		tokens = n * float64(computed)
	} else {
		chunks, tokens = math.Ceil(float64(computed)/e.TokenBudget), e.TokenBudget
	}
	// a cycle runs one batch (or chunk) per micro-batch of the pipeline
	t, err := cycle(rp.Model, rp.Scenario, rp.Pred, e, 0, 0, tokens*pp, computed)
	if err != nil {
		return PrefillStat{}, err
	}
	st := PrefillStat{Prompts: n * pp * rp.DP(), StepTime: t.TEst, Prefill: chunks * t.TEst}
	st.ReqPerS = st.Prompts / (chunks * t.TEst)
	if t.TEst > 0 {
		st.Busy = math.Max(0, t.TEst-t.TLatency-t.TComm) / t.TEst
	}
	return st, nil
}

// prefillAt is a prefill replica's step at rate requests/s: it steps with the prompts waiting,
// about the rate over one step, at least one, at most a full step's (full, Prefill's); memo
// keeps the steps timed, by prompts.
func (rp Replica) prefillAt(isl int64, rate float64, full PrefillStat, memo map[float64]PrefillStat) (PrefillStat, error) {
	group := rp.Engine.stages() * rp.DP()
	k := 1.0
	for {
		ps, ok := memo[k]
		if !ok {
			var err error
			if ps, err = rp.prefillUpTo(isl, math.Ceil(k/group)); err != nil {
				return ps, err
			}
			memo[k] = ps
		}
		want := math.Ceil(rate * ps.StepTime)
		if want <= k || ps.Prompts >= full.Prompts {
			return ps, nil
		}
		k = math.Min(want, full.Prompts)
	}
}

// KVTransfer is the time to send one request's KV cache (its isl prompt tokens, every layer)
// from a prefill replica to a decode replica: each of the smaller side's GPUs carries its share
// over its own link, on the scale-up fabric when both replicas sit in one node, else over the
// scale-out network (the prefill replica's KV layout is re-sharded on the way when the TPs
// differ; the bytes are the same).
func KVTransfer(m *analyzer.Model, s analyzer.Scenario, p kernels.Predictor, isl int64, pre, dec Replica, node int64) float64 {
	full := s
	full.TP = 1 // the model's whole per-token KV (an MLA latent once)
	bytes := float64(isl) * m.KVBytesPerToken(full)
	streams := float64(min(pre.gpus(), dec.gpus()))
	tier := kernels.ScaleOut
	if pre.gpus()+dec.gpus() <= node {
		tier = kernels.ScaleUp
	}
	k := kernels.Kernel{Name: "kv transfer", Category: "disaggregation", Kind: kernels.Collective, Count: 1, Coll: kernels.P2P,
		Tier: tier, Ranks: 2, Message: bytes / streams, Exposed: 1, Graphed: true}
	return p.Predict([]kernels.Kernel{k}).TEst
}

// Disagg describes a disaggregated deployment's prefill side (its decode side is the Config's
// layout, replicas and steady state).
type Disagg struct {
	PrefillTP       int64       `json:"prefill_tp"`
	PrefillEP       int64       `json:"prefill_ep"`
	PrefillPP       int64       `json:"prefill_pp"`
	PrefillReplicas int64       `json:"prefill_replicas"`
	PrefillGPUs     int64       `json:"prefill_gpus"` // all prefill replicas
	DecodeGPUs      int64       `json:"decode_gpus"`  // all decode replicas
	Prefill         PrefillStat `json:"prefill_replica"`
	// Step is a prefill replica's step under the load: the prompts waiting over one step, not
	// a full step's (Prefill offline): at low load one prompt, its own prefill's time.
	Step PrefillStat `json:"prefill_step"`
	// RequestPath is what each request waits outside the engines' steps (requestPath).
	RequestPath float64 `json:"request_path_s"`
	// KVTransfer is each request's KV cache on its way to the decode pool, QueueWait the
	// prompt's wait for a prefill step (M/D/1 at the pool's utilisation; 0 offline), both in
	// the TTFT.
	KVTransfer  float64 `json:"kv_transfer_s"`
	QueueWait   float64 `json:"prefill_queue_s"`
	Utilization float64 `json:"prefill_utilization"`
	// EnergyShare is the prefill pool's part of the deployment's draw (its GPUs at their busy
	// share against the decode pool's): the input tokens' share of the energy.
	EnergyShare float64 `json:"prefill_energy_share"`
	pre         Replica // to time other prompts (not serialized)
}

// PromptTTFT is the time to first token of a prompt of n tokens in this deployment's steady
// state, queueing aside: the prefill steps it spans (a prompt within the budget takes one step
// of the prompts waiting under the load, a longer one chunks that fill the budget), the request
// path and its KV transfer.
func (d Disagg) PromptTTFT(n int64, dec Replica, node int64) float64 {
	e := d.pre.Engine
	step := d.Step.StepTime // within the budget: a step of the prompts waiting under the load
	if chunks := math.Ceil(float64(e.computed(n)) / e.TokenBudget); chunks > 1 {
		step = chunks * d.Prefill.StepTime // longer: chunks that fill the budget
	}
	return step + d.RequestPath + KVTransfer(dec.Model, dec.Scenario, dec.Pred, n, d.pre, dec, node)
}

// Layout says the prefill side's layout.
func (d Disagg) Layout() string { return LayoutName(d.PrefillTP, d.PrefillEP, d.PrefillPP) }

// prefillQueue is the mean wait of a prompt for its prefill at a replica that starts a step of
// up to n prompts every step seconds, at utilisation rho: half a step until the next step
// begins when it arrives at a busy replica (probability rho; an idle one starts at once), plus
// the queue ahead of it, M/D/1's rho/(2(1-rho)) services of step/n each (each
// prompt's share of a step; a bulk server's queue is shorter than one serving the whole step).
func prefillQueue(rho, step, n float64) float64 {
	if rho >= 1 {
		return math.Inf(1)
	}
	return rho*step/2 + rho/(2*(1-rho))*step/math.Max(n, 1)
}

// disaggConfig is the deployment of x prefill and y decode replicas carrying reqRate requests/s
// (0: as many as the smaller side completes, the offline steady state), each request's KV cache
// taking transfer seconds to reach the decode pool.
func (o PlanOptions) disaggConfig(tg Target, pre Replica, ps PrefillStat, dec Replica, r Result, x, y int64, reqRate, transfer float64) Config {
	osl := float64(o.OSL)
	decRate := r.OutputTokS / osl // requests/s one decode replica completes
	capRate := math.Min(float64(x)*ps.ReqPerS, float64(y)*decRate)
	offline := reqRate == 0
	if offline {
		reqRate = capRate
	}
	d := &Disagg{PrefillTP: pre.Scenario.TP, PrefillEP: pre.Scenario.EP, PrefillPP: int64(pre.Engine.stages()), PrefillReplicas: x,
		PrefillGPUs: x * pre.gpus(), DecodeGPUs: y * dec.gpus(), Prefill: ps, pre: pre}
	d.KVTransfer = transfer
	d.Utilization = reqRate / (float64(x) * ps.ReqPerS)
	d.Step, d.RequestPath = ps, requestPath(pre.Pred, pre.Engine) // offline, the replica steps full
	if !offline {
		if at, err := pre.prefillAt(o.ISL, reqRate/float64(x), ps, map[float64]PrefillStat{}); err == nil {
			d.Step = at
		}
		d.QueueWait = prefillQueue(d.Utilization, d.Step.StepTime, d.Step.Prompts)
	}
	c := tg.config(dec, r, y, r.Concurrency)
	c.GPUs = d.PrefillGPUs + d.DecodeGPUs
	c.Disagg = d
	c.Result.TTFT = d.Step.Prefill + d.RequestPath + d.KVTransfer + d.QueueWait
	c.Result.QueueWait = d.QueueWait
	c.Result.E2E = c.Result.TTFT + float64(o.OSL-1)*c.Result.TPOT
	c.TokS = reqRate * osl
	c.TokSPerGPU = c.TokS / float64(c.GPUs)
	// power: each pool at its own busy share
	c.ServingCost = econ.ServingPools(c.TokS, tg.PriceUSDPerGPUHour, tg.Power,
		econ.Pool{GPUs: d.PrefillGPUs, Busy: ps.Busy}, econ.Pool{GPUs: d.DecodeGPUs, Busy: r.Busy})
	if pw, dw := float64(d.PrefillGPUs)*tg.Power.Watts(ps.Busy), float64(d.DecodeGPUs)*tg.Power.Watts(r.Busy); pw+dw > 0 {
		d.EnergyShare = pw / (pw + dw)
	}
	o.judge(&c)
	if !offline && reqRate > capRate*(1+1e-9) {
		c.MeetsSLO, c.Miss = false, fmt.Sprintf("%.3g requests/s is more than the pools complete (%.3g/s)", reqRate, capRate)
	}
	return c
}

// maxPoolReplicas bounds each pool's replica count where no GPU count is given offline: the
// balance of two small pools is what the offline answer is about.
const maxPoolReplicas = 8

// disagg searches disaggregated deployments of one chip: every prefill layout that fits beside
// every decode layout, with the pools' replica counts balanced for the load (or, offline, for
// the most tokens/s per GPU over the decode batch caps).
func (o PlanOptions) disagg(tg Target, reps []Replica) ([]Config, error) {
	type pre struct {
		rp Replica
		st PrefillStat
	}
	var pres []pre
	for _, rp := range reps {
		st, err := rp.Prefill(o.ISL)
		if err != nil {
			continue // does not fit as a prefill replica
		}
		pres = append(pres, pre{rp, st})
	}
	var out []Config
	for _, rp := range reps {
		dec := rp
		dec.Engine.DecodeOnly = true
		limit := dec.Limit(o.ISL, o.OSL)
		if limit < 1 || len(pres) == 0 {
			continue
		}
		if o.Users > 0 || o.Rate > 0 {
			y, r, ok, err := o.decodePool(dec, limit)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			for _, p := range pres {
				if c, ok := o.prefillPool(tg, p.rp, p.st, dec, r, y); ok {
					out = append(out, c)
				}
			}
			continue
		}
		cs := caps(limit)
		if o.TPOT > 0 {
			if edge, ok, err := o.largestDecodeCap(dec, limit); err != nil {
				return nil, err
			} else if ok {
				cs = append(cs, edge)
			}
		}
		for _, cap := range cs {
			r, err := dec.At(o.ISL, o.OSL, cap)
			if err != nil {
				return nil, err
			}
			if o.TPOT > 0 && r.TPOT > o.TPOT {
				continue
			}
			for _, p := range pres {
				if c, ok := o.balance(tg, p.rp, p.st, dec, r); ok {
					out = append(out, c)
				}
			}
		}
	}
	return out, nil
}

// largestDecodeCap bisects the largest decode batch whose TPOT meets the SLO.
func (o PlanOptions) largestDecodeCap(dec Replica, limit float64) (float64, bool, error) {
	meets := func(cap float64) (bool, error) {
		r, err := dec.At(o.ISL, o.OSL, cap)
		return err == nil && r.TPOT <= o.TPOT, err
	}
	return largestMeeting(limit, meets)
}

// fits says whether a deployment of gpus is within --gpus and --max-gpus.
func (o PlanOptions) fits(gpus int64) bool {
	return (o.GPUs == 0 || gpus <= o.GPUs) && (o.MaxGPUs == 0 || gpus <= o.MaxGPUs)
}

// balance picks, offline, the pools' replica counts for one prefill and one decode replica at
// the decode batch r: the pair (within --gpus, or each pool up to maxPoolReplicas) with the most
// tokens/s per GPU, trying for each decode pool the prefill pool that keeps it busy and one
// replica fewer.
func (o PlanOptions) balance(tg Target, pre Replica, ps PrefillStat, dec Replica, r Result) (Config, bool) {
	gp, gd := pre.gpus(), dec.gpus()
	decRate := r.OutputTokS / float64(o.OSL)
	transfer := KVTransfer(dec.Model, dec.Scenario, dec.Pred, o.ISL, pre, dec, tg.MaxTP)
	var best Config
	found := false
	for y := int64(1); y <= maxPoolReplicas || o.GPUs > 0 && y*gd < o.GPUs; y++ {
		x := max(1, int64(math.Ceil(float64(y)*decRate/ps.ReqPerS)))
		for _, xx := range []int64{x - 1, x} {
			if xx < 1 || xx > maxPoolReplicas && o.GPUs == 0 || !o.fits(xx*gp+y*gd) {
				continue
			}
			c := o.disaggConfig(tg, pre, ps, dec, r, xx, y, 0, transfer)
			if c.Result.Bound == "load" {
				c.Result.Bound = "batch-cap"
			}
			if o.GPUs > 0 { // a sized deployment: its throughput over all the GPUs given
				c.GPUs = o.GPUs
				c.TokSPerGPU = c.TokS / float64(o.GPUs)
			}
			if c.MeetsSLO && (!found || c.TokSPerGPU > best.TokSPerGPU) {
				best, found = c, true
			}
		}
	}
	return best, found
}

// decodePool is the fewest decode replicas that carry the load within the TPOT SLO (bisection:
// more replicas only lighten each), with one replica's steady state: the users' closed loop, or
// the rate's concurrency by Little's law, per replica.
func (o PlanOptions) decodePool(dec Replica, limit float64) (int64, Result, bool, error) {
	eval := func(y int64) (Result, bool, error) {
		var r Result
		var err error
		if o.Users > 0 {
			per := o.Users / float64(y)
			if per > limit {
				return r, false, nil
			}
			r, err = dec.Users(o.ISL, o.OSL, per)
		} else {
			r, err = dec.Rate(o.ISL, o.OSL, o.Rate/float64(y))
			if errors.Is(err, ErrOverloaded) {
				return r, false, nil
			}
		}
		if err != nil {
			return r, false, err
		}
		return r, o.TPOT == 0 || r.TPOT <= o.TPOT, nil
	}
	hi := int64(math.Ceil(math.Max(o.Users, 1)))
	if o.Rate > 0 {
		hi = 1 << 20
	}
	if o.MaxGPUs > 0 {
		hi = min(hi, o.MaxGPUs/dec.gpus())
	}
	if o.GPUs > 0 {
		hi = min(hi, o.GPUs/dec.gpus())
	}
	if hi < 1 {
		return 0, Result{}, false, nil
	}
	best, ok, err := eval(hi)
	if err != nil || !ok {
		return 0, best, false, err
	}
	lo := int64(1)
	for lo < hi {
		mid := (lo + hi) / 2
		r, good, err := eval(mid)
		if err != nil {
			return 0, r, false, err
		}
		if good {
			hi, best = mid, r
		} else {
			lo = mid + 1
		}
	}
	return hi, best, true, nil
}

// prefillPool is the fewest prefill replicas that keep up with the load's request rate within
// the TTFT SLO, beside y decode replicas at r: the queue shrinks as replicas are added, so the
// answer is found by bisection between the first pool that keeps up and one that waits no more
// than half a step.
func (o PlanOptions) prefillPool(tg Target, pre Replica, ps PrefillStat, dec Replica, r Result, y int64) (Config, bool) {
	rate := o.Rate
	if o.Users > 0 { // the closed loop: each user's request prefills, moves, then decodes
		rate = o.Users / (ps.Prefill + float64(o.OSL-1)*r.TPOT + r.QueueWait)
	}
	transfer := KVTransfer(dec.Model, dec.Scenario, dec.Pred, o.ISL, pre, dec, tg.MaxTP)
	if o.TTFT > 0 && ps.Prefill+transfer+prefillQueue(0, ps.StepTime, ps.Prompts) > o.TTFT {
		return Config{}, false // no prefill pool gets under the TTFT
	}
	lo := max(1, int64(math.Floor(rate/ps.ReqPerS))+1) // utilisation below 1
	meets := func(x int64) (Config, bool) {
		c := o.disaggConfig(tg, pre, ps, dec, r, x, y, rate, transfer)
		return c, c.MeetsSLO && o.fits(c.GPUs)
	}
	c, ok := meets(lo)
	if ok {
		return c, true
	}
	if c.Miss != "" && !strings.HasPrefix(c.Miss, "TTFT") {
		return Config{}, false // the decode pool misses, not the queue
	}
	// a pool at a tenth of its capacity waits little more than half a step: past it, more
	// replicas barely help
	hi := max(lo+1, int64(math.Ceil(10*rate/ps.ReqPerS)))
	if c, ok = meets(hi); !ok {
		return Config{}, false
	}
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if mc, good := meets(mid); good {
			hi, c = mid, mc
		} else {
			lo = mid
		}
	}
	return c, true
}

// DisaggUsers is a closed loop of users (each sending its next request as the last completes)
// over a disaggregated deployment of x prefill replicas pre and y decode replicas dec, node
// GPUs to a scale-up domain: the layout of a published disaggregated run, as it ran. A request
// spends its TTFT on the prefill side (the wait for a prefill step, the prompt's prefill, the
// API server's request overhead, its KV cache's transfer) and (OSL-1) TPOTs decoding; the
// decode pool carries the users in their decode phase (decode-only steps) and the prefill pool
// the request rate. The rate solves users = rate x E2E (Little's law) by damped fixed-point
// iteration; a pool too small for the users leaves them queueing before it. The Result is the
// whole deployment's: concurrency is the sequences decoding, GPUs both pools.
func DisaggUsers(pre, dec Replica, x, y int64, isl, osl int64, users float64, node int64) (Result, error) {
	switch {
	case x < 1 || y < 1:
		return Result{}, fmt.Errorf("disaggregated pools need at least one replica each (prefill %d, decode %d)", x, y)
	case !(users > 0) || math.IsInf(users, 0):
		return Result{}, fmt.Errorf("users must be a positive number (got %g)", users)
	case osl < 2:
		return Result{}, fmt.Errorf("osl %d: a disaggregated run decodes at least one token after the first", osl)
	}
	full, err := pre.Prefill(isl)
	if err != nil {
		return Result{}, fmt.Errorf("prefill pool: %w", err)
	}
	steps := map[float64]PrefillStat{}
	stepWith := func(rate float64) (PrefillStat, error) { return pre.prefillAt(isl, rate/float64(x), full, steps) }
	transfer := KVTransfer(dec.Model, dec.Scenario, dec.Pred, isl, pre, dec, node)
	reqOH := requestPath(pre.Pred, pre.Engine)
	dec.Engine.DecodeOnly = true
	preRate := float64(x) * full.ReqPerS     // requests/s the prefill pool completes at most
	held := float64(y) * dec.Limit(isl, osl) // sequences the decode pool holds
	ps := full
	var r Result
	var rate, ttft, wait float64
	decoding := users / float64(y) // first guess: every user decoding
	for i := 0; i < 200; i++ {
		if r, err = dec.At(isl, osl, math.Max(1, math.Min(decoding, held/float64(y)))); err != nil {
			return r, fmt.Errorf("decode pool: %w", err)
		}
		decodeTime := float64(osl-1) * r.TPOT
		if rate > 0 {
			if ps, err = stepWith(rate); err != nil {
				return Result{}, fmt.Errorf("prefill pool: %w", err)
			}
		}
		base := ps.Prefill + reqOH + transfer // a prompt's TTFT without waiting
		// the loop's pace: the users' own, unless a pool cannot keep it (the prefill pool's
		// rate, the decode pool's slots); then the users' time beyond the service is waiting
		// before the first token (Little's law)
		free := users / (base + wait + decodeTime)
		limit := math.Min(preRate, held/decodeTime)
		nextWait := 0.0
		if rho := math.Min(free, limit) / preRate; rho < 1 {
			nextWait = prefillQueue(rho, ps.StepTime, ps.Prompts)
		}
		if free > limit {
			nextWait = math.Max(nextWait, users/limit-(base+decodeTime))
		}
		rate = users / (base + nextWait + decodeTime)
		nextDecoding := rate * decodeTime / float64(y)
		done := i > 0 && math.Abs(nextWait-wait) <= 1e-4*(base+wait) && math.Abs(nextDecoding-decoding) <= 1e-3*decoding
		wait, decoding = 0.5*(wait+nextWait), 0.5*(decoding+nextDecoding)
		ttft = base + wait
		if done {
			break
		}
	}
	rate = users / (ttft + float64(osl-1)*r.TPOT)
	r.TTFT, r.QueueWait = ttft, wait
	r.E2E = r.TTFT + float64(osl-1)*r.TPOT
	r.Concurrency *= float64(y)
	r.OutputTokS = rate * float64(osl)
	r.TotalTokS = rate * float64(isl+osl)
	r.RooflineTokS *= float64(y)
	r.GPUs = x*pre.gpus() + y*dec.gpus()
	return r, nil
}
