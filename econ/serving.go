package econ

import "github.com/mrep-dev/mrep/chips"

// ServingCost is what a deployment's output tokens cost: dollars per million and joules each,
// and the draw per GPU behind them (node share included). The JSON names are the serving
// plan's.
type ServingCost struct {
	// USDPerMTok is 0 when no price is known.
	USDPerMTok  float64 `json:"usd_per_1m_output_tokens,omitempty"`
	JPerTok     float64 `json:"joules_per_output_token"`
	WattsPerGPU float64 `json:"watts_per_gpu"`
}

// Pool is a group of a deployment's GPUs busy the given share of each step (a disaggregated
// deployment's prefill and decode pools run at different shares).
type Pool struct {
	GPUs int64
	Busy float64
}

// Serving is the cost of tokensPerS output tokens/s on gpus GPUs busy the given share of each
// step, at priceUSD per GPU-hour (0: unknown). With no throughput only the draw is known.
func Serving(tokensPerS float64, gpus int64, busy, priceUSD float64, p chips.Power) ServingCost {
	w := p.Watts(busy)
	c := perToken(tokensPerS, w*float64(gpus), gpus, priceUSD)
	c.WattsPerGPU = w // the pool's own draw, not the total divided back (one rounding fewer)
	return c
}

// ServingPools is Serving for a deployment whose pools run at their own busy shares: the
// energy is the pools' draws summed, the draw per GPU their mean.
func ServingPools(tokensPerS, priceUSD float64, p chips.Power, pools ...Pool) ServingCost {
	var w float64
	var gpus int64
	for _, x := range pools {
		w += float64(x.GPUs) * p.Watts(x.Busy)
		gpus += x.GPUs
	}
	c := perToken(tokensPerS, w, gpus, priceUSD)
	if gpus > 0 {
		c.WattsPerGPU = w / float64(gpus)
	}
	return c
}

// perToken turns a deployment's total draw (W) and GPU-hours into joules and dollars per output
// token: J/token = W / (tokens/s); $/1M tokens = $/GPU-hour x GPUs / 3600 / (tokens/s) x 1e6.
func perToken(tokensPerS, watts float64, gpus int64, priceUSD float64) ServingCost {
	var c ServingCost
	if !(tokensPerS > 0) {
		return c
	}
	c.JPerTok = watts / tokensPerS
	if priceUSD > 0 {
		c.USDPerMTok = priceUSD * float64(gpus) / 3600 / tokensPerS * 1e6
	}
	return c
}
