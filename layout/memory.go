package layout

import (
	"fmt"

	"github.com/mrep-dev/mrep/analyzer"
)

// This file is mrep's one memory model: what one GPU holds, for training on a layout and for
// inference (a serving replica or an analysed scenario). analyze, plan train, plan serve's KV
// capacity, calib and the report all ask it, so two commands cannot disagree on a fit.

// Memory is one GPU's resident bytes, each term visible. For training it is the first
// pipeline stage (it holds the most micro-batches in flight); for inference, the KV cache and
// one step's transient activations replace gradients and optimizer state.
type Memory struct {
	Weights     float64 `json:"weights"`
	Gradients   float64 `json:"gradients"`
	Optimizer   float64 `json:"optimizer_state"` // fp32 master weights, Adam m and v
	Activations float64 `json:"activations"`
	KV          float64 `json:"kv_cache,omitempty"`
	Logits      float64 `json:"logits"` // the last stage's fp32 logits of one micro-batch
	Margin      float64 `json:"workspace_margin"`
	Total       float64 `json:"total"`
}

// Term is one named line of a memory table.
type Term struct {
	Name  string  `json:"name"`
	Bytes float64 `json:"bytes"`
}

// Terms lists the memory's non-zero terms in a fixed order, for tables and verdicts.
func (m Memory) Terms() []Term {
	all := []Term{{"weights", m.Weights}, {"gradients", m.Gradients}, {"optimizer state", m.Optimizer},
		{"activations", m.Activations}, {"KV cache", m.KV}, {"logits", m.Logits}, {"workspace margin", m.Margin}}
	var out []Term
	for _, t := range all {
		if t.Bytes > 0 {
			out = append(out, t)
		}
	}
	return out
}

// ActivationBytesPerLayer is Korthikanti et al. 2022's saved activations of one transformer
// layer for one micro-batch with tensor and sequence parallel, 34·s·b·h/t bytes (16-bit
// activations; flash attention keeps no s^2 scores), s being this GPU's tokens per sequence.
func ActivationBytesPerLayer(s, b, h, t float64) float64 { return 34 * s * b * h / t }

// TrainingMemory estimates one GPU's resident bytes on a training layout: 16-bit weights and
// gradients split over TP, PP and EP; optimizer state (12 B per parameter); ZeRO stages shard
// them over DP; saved activations of the layers of one stage times the micro-batches in flight
// on the first stage (1F1B keeps PP; interleaving adds (PP-1)/(PP·VP)); full recompute keeps
// only each layer's input (2·s·b·h/t); a stated margin of 10% plus 2 GiB for workspace and
// fragmentation.
func TrainingMemory(m *analyzer.Model, l Layout) Memory {
	p := m.ParamsPerGPU(l.TP, l.PP, l.EP, l.ETP)
	var mem Memory
	mem.Weights, mem.Gradients = 2*p, 2*p
	mem.Optimizer = 12 * p
	dp := float64(l.DP)
	switch l.Stage() { // ZeRO's table: 16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N
	case 3:
		mem.Weights /= dp
		fallthrough
	case 2:
		mem.Gradients /= dp
		fallthrough
	case 1:
		mem.Optimizer /= dp
	}
	s, b, h, t := float64(l.Seq/l.CP), float64(l.MBS), float64(m.Fingerprint.Hidden), float64(l.TP)
	perLayer := ActivationBytesPerLayer(s, b, h, t)
	if l.NoSP && l.TP > 1 {
		perLayer = s * b * h * (10 + 24/t) // Korthikanti Table 2, TP without SP (flash: no s^2 term)
	}
	if l.Recompute == "full" {
		part := l.partialRecompute(m.Fingerprint.Layers)
		perLayer = part*2*s*b*h/t + (1-part)*perLayer
	}
	layers := float64(l.StageLayers(max(m.Fingerprint.Layers, 1)))
	inFlight := float64(l.PP) * (1 + float64(l.PP-1)/float64(l.PP*l.VP))
	if ga := float64(l.GA()); inFlight > ga {
		inFlight = ga
	}
	mem.Activations = perLayer * layers * inFlight
	if l.PP == 1 { // one stage holds both ends: its micro-batch's fp32 logits too (vocab split over TP)
		mem.Logits = 4 * s * b * float64(m.Fingerprint.Vocab) / t
	}
	sub := mem.Weights + mem.Gradients + mem.Optimizer + mem.Activations + mem.Logits
	mem.Margin = 0.1*sub + 2*(1<<30)
	mem.Total = sub + mem.Margin
	return mem
}

// ScenarioLayout is the training layout an analysed scenario implies when no layout is given:
// its TP, CP and EP (experts spread over EP data-parallel ranks), one pipeline stage, its
// micro-batch and gradient accumulation, no optimizer sharding.
func ScenarioLayout(s analyzer.Scenario) Layout {
	ep := max(s.EP, 1)
	return Layout{TP: max(s.TP, 1), PP: 1, VP: 1, CP: max(s.CP, 1), DP: ep, EP: ep, ETP: s.ETP,
		MBS: max(s.Batch, 1), GBS: max(s.Batch, 1) * ep * max(s.GradAccum, 1), Seq: max(s.Seq, 1), Recompute: s.Recompute}
}

// weightsPerGPU is the inference weights one GPU holds: TP, EP x ETP and PP splits, in the
// scenario's weight precision.
func weightsPerGPU(m *analyzer.Model, s analyzer.Scenario, stages int64) float64 {
	return m.ParamsPerGPU(s.TP, stages, s.EP, s.ETP) * s.WeightBytes
}

// InferenceMemory is one GPU's resident bytes serving or analysing a scenario: its share of the
// weights (TP, EP x ETP, PP stages), the KV cache of s.Batch sequences of s.KVLen tokens (its
// stage's layers), the transient activations of the largest step (a prefill of s.Batch x s.Seq
// tokens: the residual stream, the normed input and the widest projection of one layer, and the
// last positions' fp32 logits), and reserve bytes the caller states (an engine's CUDA graphs and
// communication buffers; 0 for a bare analysis).
func InferenceMemory(m *analyzer.Model, s analyzer.Scenario, stages int64, reserve float64) Memory {
	stages = max(stages, 1)
	mem := Memory{Weights: weightsPerGPU(m, s, stages), Margin: reserve}
	mem.KV = float64(s.Batch*s.KVLen) * m.KVBytesPerToken(s) / float64(stages)
	fp := m.Fingerprint
	if fp.Transformer {
		tp := float64(max(s.TP, 1))
		wide := float64((fp.Heads + 2*fp.KVHeads) * fp.HeadDim)
		mlp := float64(fp.Intermediate)
		if fp.GatedMLP {
			mlp *= 2
		}
		if fp.MoE != nil {
			mlp *= float64(max(fp.MoE.TopK, 1))
		}
		wide = max(wide, mlp) / tp
		tokens := float64(max(s.Batch, 1) * max(s.Seq, 1))
		mem.Activations = tokens * (2*float64(fp.Hidden) + wide) * s.ActBytes
		mem.Logits = 4 * float64(max(s.Batch, 1)) * float64(fp.Vocab) / tp
	}
	mem.Total = mem.Weights + mem.KV + mem.Activations + mem.Logits + mem.Margin
	return mem
}

// KVTokens is how many tokens of KV cache one GPU holds beside its share of the weights and the
// reserve: the given fraction of what is left (a serving engine's KV memory fraction), at the
// KV bytes one token keeps on this GPU (with PP stages, each GPU holds its stage's layers of
// every token).
func KVTokens(m *analyzer.Model, s analyzer.Scenario, stages int64, memBytes, reserve, fraction float64) float64 {
	st := float64(max(stages, 1))
	free := memBytes - weightsPerGPU(m, s, max(stages, 1)) - reserve
	per := m.KVBytesPerToken(s) / st
	if free <= 0 || per <= 0 {
		return 0
	}
	return fraction * free / per
}

// Fit is a memory verdict: what one GPU holds against its capacity, and what it is for.
type Fit struct {
	What     string  `json:"what"`
	Memory   Memory  `json:"memory_per_gpu"`
	Capacity float64 `json:"capacity"`
	Fits     bool    `json:"fits"`
}

// Check is the verdict of mem on a GPU of capacity bytes.
func Check(what string, mem Memory, capacity float64) Fit {
	return Fit{What: what, Memory: mem, Capacity: capacity, Fits: mem.Total <= capacity}
}

// Verdict says whether it fits, by how much, and of what the total is made, in GiB.
func (f Fit) Verdict() string {
	gib := func(b float64) string { return fmt.Sprintf("%.1f", b/(1<<30)) }
	var parts string
	for i, t := range f.Memory.Terms() {
		if i > 0 {
			parts += ", "
		}
		v := gib(t.Bytes)
		if t.Bytes < 0.1*(1<<30) { // small terms keep a figure rather than read 0.0
			v = fmt.Sprintf("%.2g", t.Bytes/(1<<30))
		}
		parts += t.Name + " " + v
	}
	if f.Fits {
		return fmt.Sprintf("%s fits, %s GiB of %s GiB per GPU (%s GiB; headroom %s GiB)", f.What, gib(f.Memory.Total), gib(f.Capacity), parts, gib(f.Capacity-f.Memory.Total))
	}
	return fmt.Sprintf("%s does NOT fit, %s GiB of %s GiB per GPU (%s GiB; %.2fx the memory)", f.What, gib(f.Memory.Total), gib(f.Capacity), parts, f.Memory.Total/f.Capacity)
}
