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

// TokenCosts are a workload's costs per token of either kind. A deployment's spend ($/s) and
// draw (W) go to input tokens in the share of the GPUs' time that prefill takes and to output
// tokens in the rest (the marginal split: an aggregated step's time beside the same step without
// its prefill tokens; a disaggregated deployment's prefill pool against its decode pool); the
// blended figure spreads the whole over every token, input and output. Input x its price plus
// output x its price is the total, which is blended x all tokens.
type TokenCosts struct {
	// PrefillShareUSD and PrefillShareJ are the shares of spend and of energy given to input
	// tokens (they differ for a disaggregated deployment's pools at different loads).
	PrefillShareUSD float64 `json:"prefill_share_of_cost"`
	PrefillShareJ   float64 `json:"prefill_share_of_energy"`
	// Dollars per million tokens (0: no price known) and joules per token.
	InputUSDPerM   float64 `json:"usd_per_1m_input_tokens,omitempty"`
	OutputUSDPerM  float64 `json:"usd_per_1m_output_tokens_split,omitempty"`
	BlendedUSDPerM float64 `json:"usd_per_1m_tokens_blended,omitempty"`
	InputJ         float64 `json:"joules_per_input_token"`
	OutputJ        float64 `json:"joules_per_output_token_split"`
	BlendedJ       float64 `json:"joules_per_token_blended"`
}

// Split divides c (all spend and energy on output tokens) between inputTokS input and
// outputTokS output tokens/s, prefill taking shareUSD of the spend and shareJ of the energy.
func Split(c ServingCost, inputTokS, outputTokS, shareUSD, shareJ float64) TokenCosts {
	t := TokenCosts{PrefillShareUSD: clamp01(shareUSD), PrefillShareJ: clamp01(shareJ)}
	if !(outputTokS > 0) {
		return t
	}
	usdPerS := c.USDPerMTok * outputTokS / 1e6
	watts := c.JPerTok * outputTokS
	all := inputTokS + outputTokS
	if inputTokS > 0 {
		t.InputUSDPerM = usdPerS * t.PrefillShareUSD / inputTokS * 1e6
		t.InputJ = watts * t.PrefillShareJ / inputTokS
	}
	t.OutputUSDPerM = usdPerS * (1 - t.PrefillShareUSD) / outputTokS * 1e6
	t.OutputJ = watts * (1 - t.PrefillShareJ) / outputTokS
	t.BlendedUSDPerM = usdPerS / all * 1e6
	t.BlendedJ = watts / all
	return t
}

func clamp01(x float64) float64 {
	if !(x > 0) {
		return 0
	}
	if x > 1 {
		return 1
	}
	return x
}
