package serve

import (
	"fmt"
	"math"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/kernels"
)

// Replica is one engine instance: its model, layout (in the scenario), predictor and memory.
// When the experts spread over more GPUs than the attention's TP (EP > TP), the attention
// runs data-parallel on EP/TP groups of TP GPUs, each with its own sequences and KV cache
// (DeepSeek-style serving; the analyzer's EP already means DP = EP): the replica is EP GPUs.
type Replica struct {
	Model    *analyzer.Model
	Scenario analyzer.Scenario
	Pred     kernels.Predictor
	MemBytes float64
	Engine   Engine
}

// DP is the attention data-parallel groups in the replica.
func (rp Replica) DP() float64 {
	if rp.Scenario.EP > rp.Scenario.TP {
		return float64(rp.Scenario.EP / rp.Scenario.TP)
	}
	return 1
}

// gpus is the replica's GPU count: its TP (or EP) group times its pipeline stages.
func (rp Replica) gpus() int64 {
	return max(rp.Scenario.TP, rp.Scenario.EP) * int64(rp.Engine.stages())
}

// Limit is how many sequences the replica runs at once (all its attention groups).
func (rp Replica) Limit(isl, osl int64) float64 {
	_, limit, _ := Capacity(rp.Model, rp.Scenario, rp.MemBytes, isl, osl, rp.Engine)
	return limit * rp.DP()
}

// At is the replica's steady state with at most want sequences in flight, spread evenly over
// its attention groups: each group is one At; the replica carries DP of them.
func (rp Replica) At(isl, osl int64, want float64) (Result, error) {
	dp := rp.DP()
	e := rp.Engine
	e.dp = dp
	r, err := At(rp.Model, rp.Scenario, rp.Pred, rp.MemBytes, isl, osl, e, math.Max(1, want/dp))
	if dp == 1 {
		return r, err
	}
	r.Concurrency *= dp
	r.MaxByKV *= dp
	r.PrefillTok *= dp
	r.OutputTokS *= dp
	r.RooflineTokS *= dp
	r.TotalTokS *= dp
	r.GPUs = rp.gpus()
	return r, err
}

// Users is the steady state of a closed loop of users, each sending its next request as the
// last one completes (no think time): the replica runs min(users, capacity) sequences and the
// rest wait their turn, which Little's law prices: users = request rate x (queue + E2E).
func (rp Replica) Users(isl, osl int64, users float64) (Result, error) {
	if !(users > 0) || math.IsInf(users, 0) {
		return Result{}, fmt.Errorf("users must be a positive number (got %g)", users)
	}
	r, err := rp.At(isl, osl, math.Max(1, math.Ceil(users)))
	if err != nil {
		return r, err
	}
	if waiting := users - r.Concurrency; waiting > 0 {
		reqRate := r.Concurrency / r.E2E
		r.QueueWait = users/reqRate - r.E2E
		r.TTFT += r.QueueWait
		r.E2E += r.QueueWait
	}
	return r, nil
}

// Rate is the steady state under an open arrival rate (requests/s): the concurrency D that
// Little's law asks for, D = rate x E2E(D), found by fixed-point iteration (E2E grows with D,
// so the iterates climb to the smallest solution). Arrivals beyond what the replica completes
// at its capacity are an error: the queue would grow without bound.
func (rp Replica) Rate(isl, osl int64, rate float64) (Result, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return Result{}, fmt.Errorf("rate must be a positive number of requests/s (got %g)", rate)
	}
	limit := rp.Limit(isl, osl)
	if limit < 1 {
		return Result{}, fmt.Errorf("not one sequence of %d tokens fits in the KV cache next to the weights", isl+osl)
	}
	d := 1.0
	var r Result
	var err error
	for i := 0; i < 100; i++ {
		if r, err = rp.At(isl, osl, d); err != nil {
			return r, err
		}
		next := math.Max(1, rate*r.E2E)
		if next > limit {
			full, err := rp.At(isl, osl, limit)
			if err != nil {
				return full, err
			}
			return full, fmt.Errorf("%.3g requests/s is more than one replica completes (%.3g/s at its %g sequences): %w",
				rate, full.Concurrency/full.E2E, full.Concurrency, ErrOverloaded)
		}
		if math.Abs(next-d) <= 1e-3*d {
			d = next
			break
		}
		d = next
	}
	return rp.At(isl, osl, d)
}

// ErrOverloaded: the load is more than the replica serves.
var ErrOverloaded = fmt.Errorf("overloaded")
