package layout

import (
	"fmt"

	"github.com/mrep-dev/mrep/analyzer"
)

// This file is mrep's one memory model: what one GPU holds, for training on a layout and for
// inference (a serving replica or an analysed scenario). analyze, plan train, plan serve's KV
// capacity, calib and the report all ask it, so two commands cannot disagree on a fit.

// Memory is one GPU's resident bytes, each term visible. For training it is the fuller of the
// first and last pipeline stages (Stage); for inference, the KV cache and one step's transient
// activations replace gradients and optimizer state, and Margin is the engine's stated reserve.
type Memory struct {
	Stage         string  `json:"stage,omitempty"` // training: first, last or only
	Weights       float64 `json:"weights"`         // compute copy (and FP8 caches); a quantized frozen base
	MasterWeights float64 `json:"master_weights,omitempty"`
	Gradients     float64 `json:"gradients"`
	Optimizer     float64 `json:"optimizer_state"` // the optimizer's moments
	Activations   float64 `json:"activations"`     // saved for the backward, micro-batches in flight
	MoEBuffers    float64 `json:"moe_token_buffers,omitempty"`
	Logits        float64 `json:"logits"` // logits and loss of one micro-batch (the last stage)
	Transient     float64 `json:"working_set,omitempty"`
	CommBuffers   float64 `json:"comm_buffers,omitempty"`
	KV            float64 `json:"kv_cache,omitempty"`
	Allocator     float64 `json:"allocator,omitempty"` // caching-allocator reserve, fitted (AllocatorShare)
	Runtime       float64 `json:"runtime,omitempty"`   // CUDA context, workspaces, NCCL (RuntimeBytes)
	Margin        float64 `json:"reserve,omitempty"`   // inference: the engine's stated reserve
	Total         float64 `json:"total"`
	// Host is what offloading keeps in host memory instead (not in Total).
	Host float64 `json:"host,omitempty"`
}

// Term is one named line of a memory table.
type Term struct {
	Name  string  `json:"name"`
	Bytes float64 `json:"bytes"`
}

// Terms lists the memory's non-zero terms in a fixed order, for tables and verdicts.
func (m Memory) Terms() []Term {
	all := []Term{{"weights", m.Weights}, {"master weights", m.MasterWeights}, {"gradients", m.Gradients}, {"optimizer state", m.Optimizer},
		{"activations", m.Activations}, {"MoE token buffers", m.MoEBuffers}, {"logits", m.Logits}, {"working set", m.Transient},
		{"comm buffers", m.CommBuffers}, {"KV cache", m.KV}, {"allocator", m.Allocator}, {"CUDA/NCCL runtime", m.Runtime}, {"reserve", m.Margin}}
	var out []Term
	for _, t := range all {
		if t.Bytes > 0 {
			out = append(out, t)
		}
	}
	return out
}

// Allocated is what PyTorch's caching allocator hands out at the peak: the total less its own
// reserve and the runtime outside it. Reserved adds the reserve: what
// torch.cuda.max_memory_reserved reads (torchtitan's logged "memory").
func (m Memory) Allocated() float64 { return m.Total - m.Allocator - m.Runtime - m.Margin }

// Dynamic is what a training step allocates and frees every step (activations, MoE buffers,
// logits, the working set, communication buffers): the memory the allocator fragments.
func (m Memory) Dynamic() float64 {
	return m.Activations + m.MoEBuffers + m.Logits + m.Transient + m.CommBuffers
}

// Reserved is Allocated plus the allocator's reserve.
func (m Memory) Reserved() float64 { return m.Allocated() + m.Allocator }

// ActivationBytesPerLayer is Korthikanti et al. 2022's saved activations of one transformer
// layer for one micro-batch with tensor and sequence parallel, 34·s·b·h/t bytes (16-bit
// activations; flash attention keeps no s^2 scores), s being this GPU's tokens per sequence.
func ActivationBytesPerLayer(s, b, h, t float64) float64 { return 34 * s * b * h / t }

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

// KV memory fractions: what a serving engine's fraction is a fraction of.
const (
	// OfFree: of the memory left after the weights and the reserve (TensorRT-LLM's
	// kv_cache_free_gpu_mem_fraction).
	OfFree = ""
	// OfTotal: of the whole GPU, which must hold the weights, the reserve (activations, CUDA
	// graphs) and the KV cache (vLLM's gpu_memory_utilization).
	OfTotal = "total"
	// OfStatic: of the whole GPU for the weights and the KV pool; activations and graphs live in
	// the rest (SGLang's mem_fraction_static).
	OfStatic = "static"
)

// KVTokens is how many tokens of KV cache one GPU holds beside its share of the weights and the
// reserve, at the engine's memory fraction read as of says (OfFree, OfTotal, OfStatic), at the
// KV bytes one token keeps on this GPU (with PP stages, each GPU holds its stage's layers of
// every token).
func KVTokens(m *analyzer.Model, s analyzer.Scenario, stages int64, memBytes, reserve, fraction float64, of string) float64 {
	_, kv := KVPool(m, s, stages, memBytes, reserve, fraction, of)
	per := m.KVBytesPerToken(s) / float64(max(stages, 1))
	if kv <= 0 || per <= 0 {
		return 0
	}
	return kv / per
}

// KVPool is one GPU's weights and the KV cache pool beside them, in bytes, as the engine reads
// its memory fraction (of: "" the free memory after weights and reserve, OfTotal the whole GPU
// with weights and reserve inside, OfStatic the whole GPU with the weights inside). The pool is
// negative when the weights leave none.
func KVPool(m *analyzer.Model, s analyzer.Scenario, stages int64, memBytes, reserve, fraction float64, of string) (weights, kv float64) {
	w := weightsPerGPU(m, s, max(stages, 1))
	switch of {
	case OfTotal:
		kv = fraction*memBytes - w - reserve
	case OfStatic:
		kv = fraction*memBytes - w
	default:
		kv = fraction * (memBytes - w - reserve)
	}
	return w, kv
}

// Verdicts.
const (
	Fits     = "fits"
	Tight    = "tight"
	NoFit    = "does not fit"
	tightFmt = "within the memory model's ±%.0f%% measured uncertainty"
)

// Fit is a memory verdict: what one GPU holds against its capacity, and what it is for.
type Fit struct {
	What     string  `json:"what"`
	Memory   Memory  `json:"memory_per_gpu"`
	Capacity float64 `json:"capacity"`
	// Verdict is fits, tight (the capacity is within the model's measured uncertainty of the
	// total, either side) or does not fit.
	Status string `json:"verdict"`
	Fits   bool   `json:"fits"` // fits or tight: worth running
	// Over: the predicted total is above the capacity (a tight verdict from above): it may run,
	// but a planner ranks it after every layout under the capacity unless asked not to.
	Over bool `json:"over_capacity,omitempty"`
	// Uncertainty is the relative error the tight band spans.
	Uncertainty float64 `json:"uncertainty"`
}

// Check is the verdict of an inference memory on a GPU of capacity bytes: weights and KV cache
// are counted exactly and an engine's reserve is stated, so there is no tight band.
func Check(what string, mem Memory, capacity float64) Fit {
	return CheckWithin(what, mem, capacity, 0)
}

// CheckTraining is the verdict of a training memory, with the model's measured uncertainty
// (MemoryUncertainty) as the tight band either side of the capacity.
func CheckTraining(what string, mem Memory, capacity float64) Fit {
	return CheckWithin(what, mem, capacity, MemoryUncertainty)
}

// CheckWithin is the verdict with a stated relative uncertainty.
func CheckWithin(what string, mem Memory, capacity, uncertainty float64) Fit {
	f := Fit{What: what, Memory: mem, Capacity: capacity, Uncertainty: uncertainty}
	switch {
	case mem.Total*(1+uncertainty) <= capacity:
		f.Status = Fits
	case mem.Total*(1-uncertainty) <= capacity:
		f.Status = Tight
	default:
		f.Status = NoFit
	}
	f.Fits = f.Status != NoFit
	f.Over = mem.Total > capacity
	return f
}

// Headroom is the capacity left, negative when over.
func (f Fit) Headroom() float64 { return f.Capacity - f.Memory.Total }

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
	if parts == "" { // a model with nothing to hold (no parameters): say so, not "( GiB"
		parts = "nothing held"
	} else {
		parts += " GiB"
	}
	host := ""
	if f.Memory.Host > 0 {
		host = fmt.Sprintf("; %s GiB offloaded to host memory", gib(f.Memory.Host))
	}
	switch f.Status {
	case Fits:
		return fmt.Sprintf("%s fits, %s GiB of %s GiB per GPU (%s; headroom %s GiB%s)", f.What, gib(f.Memory.Total), gib(f.Capacity), parts, gib(f.Headroom()), host)
	case Tight:
		if f.Over {
			return fmt.Sprintf("%s is tight and over the capacity, %s GiB of %s GiB per GPU, "+tightFmt+": it may run (%s; %s GiB over%s)", f.What, gib(f.Memory.Total), gib(f.Capacity), 100*f.Uncertainty, parts, gib(-f.Headroom()), host)
		}
		return fmt.Sprintf("%s is tight, %s GiB of %s GiB per GPU, "+tightFmt+" (%s; headroom %s GiB%s)", f.What, gib(f.Memory.Total), gib(f.Capacity), 100*f.Uncertainty, parts, gib(f.Headroom()), host)
	}
	return fmt.Sprintf("%s does NOT fit, %s GiB of %s GiB per GPU (%s; %.2fx the memory%s)", f.What, gib(f.Memory.Total), gib(f.Capacity), parts, f.Memory.Total/f.Capacity, host)
}
