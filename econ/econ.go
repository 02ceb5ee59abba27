// Package econ turns throughput into money and energy: GPU-hours, dollars and megawatt-hours
// of a training run, dollars and joules per token of a deployment. Every figure is an
// estimate from a price and a power model the caller shows beside it.
package econ

import (
	"fmt"
	"math"

	"github.com/mrep-dev/mrep/chips"
)

// Run is the cost of processing Tokens at TokensPerS on GPUs.
type Run struct {
	Tokens     float64 `json:"tokens"`
	GPUs       int64   `json:"gpus"`
	TokensPerS float64 `json:"tokens_per_s"`
	Seconds    float64 `json:"seconds"`
	GPUHours   float64 `json:"gpu_hours"`
	// USD is 0 when no price is known.
	USD         float64 `json:"usd,omitempty"`
	PriceSource string  `json:"price_source,omitempty"`
	// WattsPerGPU is the draw per GPU with the node's share, at the run's busy fraction.
	WattsPerGPU float64     `json:"watts_per_gpu"`
	MWh         float64     `json:"mwh"`
	Power       chips.Power `json:"power"`
}

// Training is the run of tokens at tokensPerS on gpus GPUs, busy the given share of each step
// (the rest, pipeline bubbles and exposed communication, at the idle floor's side of the
// power model), at priceUSD per GPU-hour (0: unknown).
func Training(tokens, tokensPerS float64, gpus int64, busy, priceUSD float64, priceSource string, p chips.Power) (Run, error) {
	switch {
	case !(tokens > 0) || math.IsInf(tokens, 0):
		return Run{}, fmt.Errorf("tokens %g: must be a positive number", tokens)
	case !(tokensPerS > 0) || gpus < 1:
		return Run{}, fmt.Errorf("no throughput to cost (%g tokens/s on %d GPUs)", tokensPerS, gpus)
	}
	r := Run{Tokens: tokens, GPUs: gpus, TokensPerS: tokensPerS, Power: p}
	r.Seconds = tokens / tokensPerS
	r.GPUHours = r.Seconds * float64(gpus) / 3600
	if priceUSD > 0 {
		r.USD, r.PriceSource = r.GPUHours*priceUSD, priceSource
	}
	r.WattsPerGPU = p.Watts(busy)
	r.MWh = r.WattsPerGPU * float64(gpus) * r.Seconds / 3.6e9
	return r, nil
}
