package analyzer

import (
	"fmt"
	"math"
	"strings"

	"github.com/mrep-dev/mrep/kernels"
)

// Phase is what a step does.
type Phase string

// The phases.
const (
	Training Phase = "training"
	Prefill  Phase = "prefill"
	Decode   Phase = "decode"
)

// Phases in report order.
var Phases = []Phase{Training, Prefill, Decode}

// Scenario is the workload and system a step is costed under.
type Scenario struct {
	Batch int64 `json:"batch"`  // B: sequences per GPU step
	Seq   int64 `json:"seq"`    // S: tokens per sequence in training and prefill
	KVLen int64 `json:"kv_len"` // L: KV-cache length a decode step attends over
	// Prefix is the prompt tokens already in the KV cache when a prefill step runs (a later
	// chunk of a chunked prefill, or a cached prefix): the step's Seq queries attend over
	// Prefix + Seq keys, reading the prefix's K and V from the cache.
	Prefix int64 `json:"prefix,omitempty"`

	WeightBytes float64 `json:"weight_bytes"` // bytes per weight element
	ActBytes    float64 `json:"act_bytes"`    // bytes per activation element
	KVBytes     float64 `json:"kv_bytes"`     // bytes per KV-cache element
	GradBytes   float64 `json:"grad_bytes"`   // bytes per weight-gradient element (training)
	// The names the bytes above came from (SetPrecision, SetDTypes; "" where a caller set bytes
	// alone): what the user asked for, for anything that prints the scenario back as flags.
	WeightDType DType `json:"-"`
	ActDType    DType `json:"-"`
	KVDType     DType `json:"-"`
	GradDType   DType `json:"-"`

	ComputeDType string `json:"compute_dtype"` // which chip peak applies: bf16, fp8, ...

	TP int64 `json:"tp"` // tensor parallel: heads, FFN width and vocab split TP ways
	EP int64 `json:"ep"` // expert parallel (with DP = EP): E/EP experts per GPU
	// ETP is expert tensor parallel: how many ways each routed expert's weights are split,
	// independent of the attention's TP (0: as TP). Attention TP8 with experts EP8 x ETP1 on
	// the same 8 GPUs is Megatron's MoE layout.
	ETP int64 `json:"etp,omitempty"`
	// BalancedRouting: the tokens of a step are dealt to the experts round-robin, so T tokens
	// of top-k touch min(E, T*k) experts (a kernel benchmark's "balanced" routing). Otherwise
	// each token picks its k experts at random and T of them touch E*(1-(1-k/E)^T) on average
	// (DistinctExperts), as live traffic does.
	BalancedRouting bool `json:"-"`
	// CP is context parallel (training, prefill): each GPU holds S/CP of every sequence's
	// tokens (load-balanced for causal attention) and gathers the K/V of the others.
	CP int64 `json:"cp,omitempty"`

	Recompute string `json:"recompute"`  // training: a mode ParseRecompute reads (none, selective[:MODS], op, full)
	GradAccum int64  `json:"grad_accum"` // training: microbatches per optimizer step
	// OptimizerStateBytes is the optimizer's per-parameter state beyond weights and gradients
	// (Adam mixed precision: fp32 master, m, v = 12 B; ZeRO, Rajbhandari et al. 2019).
	OptimizerStateBytes float64 `json:"optimizer_state_bytes"`
	// OptimizerFLOPs is the update's scalar work per parameter (0: Adam's AdamFlopsPerParam).
	OptimizerFLOPs float64 `json:"optimizer_flops,omitempty"`
	// CastBytes is what a low-precision training recipe moves per quantized activation element
	// (0: the low-precision copy's width, a cast fused into its neighbour): current scaling also
	// reads the 16-bit input for its amax, block-scaled recipes (MXFP8, DeepSeek's blockwise,
	// NVFP4) write row- and column-wise copies with their scales (layout.CastBytes).
	CastBytes float64 `json:"cast_bytes,omitempty"`
	// CastWeightBytes is what the recipe moves per weight element in every micro-batch to cast
	// the weights (0: Transformer Engine's way, each weight cast once per optimizer step and
	// cached across micro-batches, (WeightBytes + CastBytes) / GradAccum). torchao's
	// Float8Linear saves the 16-bit weight for the backward and casts it there again, so every
	// micro-batch pays an amax and a cast in the forward and the same in the backward
	// (layout.TorchAOWeightCastBytes).
	CastWeightBytes float64 `json:"cast_weight_bytes,omitempty"`
	// CastSequenceShards: under tensor parallelism the recipe casts each rank's sequence shard
	// of a linear's input before the all-gather, and of its output gradient before the
	// backward's (Transformer Engine with Megatron's sequence parallelism gathers FP8:
	// layernorm_linear.py's FP8 all-gather of ln_out). Otherwise a rank is charged the whole
	// input its GEMM reads and its own columns of the output gradient. torchao's float8
	// tensor-parallel styles cast the local shard before the gather too
	// (float8_tensor_parallel.py), but torchtitan's TP8 FP8 runs are slower than that count
	// predicts, by something mrep does not count (the amax all-reduce each sharded cast makes
	// is too small: a few hundred latency-bound all-reduces, about 1% of a Llama-3-8B TP8
	// micro-batch), and the whole-input count fits them.
	CastSequenceShards bool `json:"cast_sequence_shards,omitempty"`
	// LowPrecisionLMHead: the LM head trains in the recipe's low precision too (Megatron's
	// fp8_output_proj, under MXFP8 only). Otherwise it stays 16-bit: Megatron's output layer is
	// its own ColumnParallelLinear, outside Transformer Engine's FP8 autocast (megatron/core/
	// models/gpt/gpt_model.py), and torchtitan's float8 conversion skipped its "output" module
	// (hard-coded until May 2025, then filter_fqns = ["output"] as its float8.md configures it).
	LowPrecisionLMHead bool `json:"low_precision_lm_head,omitempty"`
	// BlockScaled: the recipe's low-precision GEMMs are block-scaled (MXFP8: an E8M0 scale per
	// 32 elements), which timing charges the chip's mxfp8_gemm_share (kernels.Kernel.BlockScaled).
	BlockScaled bool `json:"block_scaled,omitempty"`
	// FP8Attention: the attention core's matmuls run in the recipe's FP8 too (Megatron's
	// fp8_dot_product_attention, mrep's --fp8-dot-product-attention: Transformer Engine quantizes Q, K and V before cuDNN's FP8
	// kernel and the output gradient before its backward; block-scaled under an MXFP8 recipe,
	// per-tensor scaled otherwise). Training with an FP8 recipe only; timing takes the chip's
	// measured FP8 attention figures (chips.Efficiency.TrainAttnFrac).
	FP8Attention bool `json:"fp8_attention,omitempty"`
	// ExpertBiasFP32: the routed experts' output (down-projection) bias is added after the
	// grouped GEMM, not in its epilogue: each expert's slice of the output plus its bias scaled
	// by the tokens' router probabilities, in fp32, concatenated and cast back (Megatron's
	// TEGroupedMLP, whose linear_fc2 skips its bias add: _apply_bias in megatron/core/transformer/
	// moe/experts.py, core_r0.15.0 on; the packed CUDA-graph path moves the same fp32 tensors).
	// Training only; see expertBiasKernels for its bytes.
	ExpertBiasFP32 bool `json:"expert_bias_fp32,omitempty"`
	// EagerGLUClamp: a clamped GLU (Fingerprint.GLUClamp) clamps the routed experts' FC1 output
	// in eager PyTorch before the fused activation: Megatron's weighted_bias_quick_geglu_impl
	// (megatron/core/fusions/fused_bias_geglu.py, core_r0.15.0 on) chunks it, clamps each half
	// and concatenates them outside its compiled function. Training only; see clampKernels.
	EagerGLUClamp bool `json:"eager_glu_clamp,omitempty"`
	// HighPrecisionExperts: the routed experts' GEMMs stay in the 16-bit dtype under a
	// low-precision recipe, with no casts of their own: Megatron's legacy GroupedMLP
	// (--moe-use-legacy-grouped-gemm; removed upstream in bf8c7901, kept by Primus as
	// DeprecatedGroupedMLP) calls grouped_gemm's gmm on its 16-bit stacked weights, a kernel
	// with no FP8 path, while Transformer Engine's FP8 autocast covers the other linears.
	HighPrecisionExperts bool `json:"high_precision_experts,omitempty"`
	// UnfusedGLU: Megatron with bias_swiglu_fusion off runs a gated MLP's activation as eager
	// PyTorch ops (transformer/mlp.py glu: chunk, silu, multiply), and the routed experts then
	// multiply by the router weight in fp32 and cast back (moe/experts.py
	// activation_func_with_probs @d98e8a6) where the fused kernel makes one pass. Primus's Qwen3
	// configs turn the fusion off. Training only; see unfusedGLUKernels.
	UnfusedGLU bool `json:"unfused_glu,omitempty"`
	// EagerScaledRoPE: a YaRN-scaled rotary embedding (not MLA's) is applied to the queries and
	// keys in eager PyTorch (Megatron's _apply_rotary_pos_emb_bshd): Megatron-Bridge turns the
	// RoPE fusion off for any position embedding but plain rope (utils/fusions.py
	// validate_rope_fusion_compatibility; GPT-OSS's is "yarn"), and Megatron-Core 0.16 on refuses
	// the fused kernel when YaRN's concentration is not 1. Training only; see ropeKernels.
	EagerScaledRoPE bool `json:"eager_scaled_rope,omitempty"`
	// FusedGroupedMLP: the routed experts' activation runs in the grouped GEMMs' epilogues
	// (Transformer Engine's CuTe DSL fused grouped MLP, which Megatron takes when
	// NVTE_CUTEDSL_FUSED_GROUPED_MLP=1: the GLU and its router-probability scale in the FC1
	// kernel, its gradient in the FC2 input-gradient kernel, the FC2 bias scaled in its epilogue),
	// so the activation makes no pass of its own over HBM. Training only.
	FusedGroupedMLP bool `json:"fused_grouped_mlp,omitempty"`
	// AllLogits makes prefill compute the LM head at every position, as a plain Hugging Face
	// forward does (the exporter's traces); serving engines compute the last position only.
	AllLogits bool `json:"all_logits,omitempty"`
	// SeedTraining selects the seed report's compatibility model: training = prefill x
	// FlopsMult FLOPs and x BytesMult bytes, instead of forward + backward + optimizer.
	SeedTraining bool `json:"seed_training"`
}

// DefaultScenario is bf16 everywhere, B=1, S=L=2048, one GPU.
func DefaultScenario() Scenario {
	s := Scenario{Batch: 1, Seq: 2048, KVLen: 2048, ComputeDType: string(BF16), TP: 1, EP: 1, Recompute: "none", GradAccum: 1, OptimizerStateBytes: 12}
	s.SetDTypes(BF16, BF16, BF16, BF16)
	return s
}

// AttnDType is the precision recipe's attention core: flash kernels run QK^T and PV in 16-bit
// even when the linear layers run in fp8/fp4/int8 (Transformer Engine's FP8 recipe keeps
// attention, softmax and norms in BF16; inference engines of the measured rows do the same).
func (s Scenario) AttnDType() string {
	switch s.ComputeDType {
	case "fp8", "fp4", "int8":
		return "bf16"
	}
	return s.ComputeDType
}

// lowPrecisionTraining: FP8/FP4 training quantizes GEMM inputs every pass (cast + amax), which
// 16-bit training does not.
func (s Scenario) lowPrecisionTraining(ph Phase) bool {
	return ph == Training && (s.ComputeDType == "fp8" || s.ComputeDType == "fp4")
}

// MaxDegree bounds a parallel degree (a million GPUs in one group is beyond any machine) and
// MaxTokens the tokens of one step, so a hostile flag cannot overflow a count.
const (
	MaxDegree = 1 << 20
	MaxTokens = 1 << 40
)

// Validate checks a scenario.
func (s Scenario) Validate() error {
	switch {
	case s.Batch < 1 || s.Seq < 1 || s.KVLen < 1:
		return fmt.Errorf("batch, seq and kv-len must be >= 1 (got %d, %d, %d)", s.Batch, s.Seq, s.KVLen)
	case s.Prefix < 0 || s.Prefix > MaxTokens:
		return fmt.Errorf("prefix %d: want 0 to %d cached tokens", s.Prefix, int64(MaxTokens))
	case s.WeightBytes <= 0 || s.ActBytes <= 0 || s.KVBytes <= 0 || s.GradBytes <= 0:
		return fmt.Errorf("dtype byte widths must be positive")
	case s.CP < 0 || (s.CP > 1 && s.Seq%s.CP != 0):
		return fmt.Errorf("cp must divide seq (got cp %d, seq %d)", s.CP, s.Seq)
	case s.ETP < 0 || (s.ETP > 0 && s.TP%s.ETP != 0):
		return fmt.Errorf("etp %d must divide tp %d (an expert's shards sit inside the attention's TP group)", s.ETP, s.TP)
	case s.TP < 1 || s.EP < 1:
		return fmt.Errorf("tp and ep must be >= 1 (got %d, %d)", s.TP, s.EP)
	case s.TP > MaxDegree || s.EP > MaxDegree || s.CP > MaxDegree || s.Batch > MaxTokens || s.Seq > MaxTokens || s.KVLen > MaxTokens || s.Batch*s.Seq > MaxTokens:
		return fmt.Errorf("sizes beyond physical range: tp, ep and cp at most %d, batch x seq and kv-len at most %d tokens (got tp %d, ep %d, cp %d, batch %d, seq %d, kv-len %d)",
			MaxDegree, MaxTokens, s.TP, s.EP, s.CP, s.Batch, s.Seq, s.KVLen)
	case s.GradAccum < 1:
		return fmt.Errorf("grad_accum must be >= 1")
	}
	if _, err := ParseRecompute(s.Recompute); err != nil {
		return err
	}
	return nil
}

// Cost is additive work and traffic. Every field sums over ops, modules and terms.
type Cost struct {
	FTheory     float64 `json:"F_theory"`     // algorithmic FLOPs (model FLOPs)
	FTensorcore float64 `json:"F_tensorcore"` // the GEMM (tensor-core eligible) part of F_theory
	// FExecuted is what the kernels execute: F_theory with causal attention at its lower
	// triangle (and the LM head of prefill on the last token), plus recomputation.
	FExecuted float64 `json:"F_executed"`

	BytesWeights     float64 `json:"bytes_weights"`
	BytesActivations float64 `json:"bytes_activations"`
	BytesKV          float64 `json:"bytes_kv"`
	BytesTemporary   float64 `json:"bytes_temporary"`
	BytesNet         float64 `json:"bytes_net"`

	// FloorWeights and FloorKV are the compulsory HBM traffic: every active weight (and
	// gradient and optimizer state in training) once, and the KV cache once.
	FloorWeights float64 `json:"floor_weights"`
	FloorKV      float64 `json:"floor_kv"`
}

// BytesHBM is bytes_weights + bytes_activations + bytes_kv + bytes_temporary.
func (c Cost) BytesHBM() float64 {
	return c.BytesWeights + c.BytesActivations + c.BytesKV + c.BytesTemporary
}

// Add returns c + o.
func (c Cost) Add(o Cost) Cost {
	return Cost{c.FTheory + o.FTheory, c.FTensorcore + o.FTensorcore, c.FExecuted + o.FExecuted,
		c.BytesWeights + o.BytesWeights, c.BytesActivations + o.BytesActivations, c.BytesKV + o.BytesKV,
		c.BytesTemporary + o.BytesTemporary, c.BytesNet + o.BytesNet, c.FloorWeights + o.FloorWeights, c.FloorKV + o.FloorKV}
}

// Scale returns c with every field multiplied by k.
func (c Cost) Scale(k float64) Cost {
	return Cost{c.FTheory * k, c.FTensorcore * k, c.FExecuted * k, c.BytesWeights * k, c.BytesActivations * k,
		c.BytesKV * k, c.BytesTemporary * k, c.BytesNet * k, c.FloorWeights * k, c.FloorKV * k}
}

// stepShape is what a phase means for one GPU: tokens in the step and attention extents.
type stepShape struct {
	tokens  float64 // T: new tokens this GPU processes
	queries float64 // S per sequence (1 in decode)
	kvLen   float64 // keys each query attends over (full, FlopCounterMode convention)
	prefix  float64 // keys of each sequence already cached before this prefill step
	batch   float64
	decode  bool
	kvWrite bool // prefill writes the KV cache; training keeps K/V as activations
}

func shapeOf(ph Phase, s Scenario) stepShape {
	switch ph {
	case Decode:
		return stepShape{tokens: float64(s.Batch), queries: 1, kvLen: float64(s.KVLen), batch: float64(s.Batch), decode: true, kvWrite: true}
	case Prefill:
		q := float64(s.Seq) / float64(s.cp())
		pre := float64(s.Prefix)
		if s.cp() > 1 {
			pre = 0 // context parallel splits a whole prompt, not a chunk of one
		}
		return stepShape{tokens: float64(s.Batch) * q, queries: q, kvLen: float64(s.Seq) + pre, batch: float64(s.Batch), kvWrite: true, prefix: pre}
	}
	q := float64(s.Seq) / float64(s.cp())
	return stepShape{tokens: float64(s.Batch) * q, queries: q, kvLen: float64(s.Seq), batch: float64(s.Batch)}
}

func (s Scenario) cp() int64 { return max(s.CP, 1) }

// Etp is the effective expert tensor parallel (TP when unset).
func (s Scenario) Etp() int64 {
	if s.ETP > 0 {
		return s.ETP
	}
	return s.TP
}

// DistinctExperts is the expected number of distinct experts, of E, that T tokens each
// routing to k experts touch under uniform routing: E * (1 - (1 - k/E)^T).
func DistinctExperts(e, k, tokens float64) float64 {
	if e <= 0 {
		return 0
	}
	return e * (1 - math.Pow(1-k/e, tokens))
}

// opCost is one op's forward cost on one GPU and, for training, what its backward adds, with
// the kernels that execute them.
type opCost struct {
	fwd, bwd Cost
	// recompute is the extra forward work activation recomputation does (hardware FLOPs).
	recomputeSelective Cost
	params             float64 // trainable parameters this GPU updates (optimizer)

	fwdK, recK kernels.Kernel
	bwdK       [2]kernels.Kernel
	nBwd       int
	castK      kernels.Kernel // low-precision training: quantizing this GEMM's inputs
	// eagerK are eager PyTorch passes beside the op's own kernel (forward, backward; the
	// forward one re-runs with the op on recompute): a clamped GLU's clamp (clampKernels).
	eagerK [2]kernels.Kernel
}

// costOp models one op. Conventions (stated in the report's appendix):
//   - GEMM FLOPs 2*M*K*N; attention QK^T and PV over the full KV length (FlopCounterMode's
//     convention; the causal-executed count is F_executed); softmax 3 FLOPs per score.
//   - Weights cross HBM once per pass, divided by the profile's WRF; only the touched share of
//     routed experts and of embedding rows is read.
//   - GEMM inputs and outputs are activations (x act_fusion); elementwise traffic and naive
//     attention's score/prob matrices are temporaries (x elementwise).
//   - Inference prefill runs the LM head on each sequence's last token only.
//
// The kernels carry the same work with the profile's bytes raised to the compulsory floor:
// the time model never sees fewer bytes than a step must move.
// It writes into c (reused across ops: an opCost with its kernels is a kilobyte, and the
// report's grids cost hundreds of thousands of ops).
func costOp(op Op, fp Fingerprint, ph Phase, sh stepShape, s Scenario, p ExecProfile, c *opCost) {
	*c = opCost{}
	A, Wb, G := s.ActBytes, s.WeightBytes, s.GradBytes
	tp := float64(s.TP)
	wrf := p.WRF(op.Category)
	switch op.Kind {
	case OpGEMM:
		m := sh.tokens
		if op.Category == CatLMHead && ph == Prefill && !s.AllLogits {
			m = sh.batch // logits of the last position are all a prefill samples from
		}
		f := 2 * m * float64(op.Numel) / tp
		w := float64(op.Numel) * Wb / tp
		g := float64(op.Numel) * G / tp
		act := A * m * float64(op.In+op.Out)
		c.fwd = Cost{FTheory: f, FTensorcore: f, FExecuted: f, BytesWeights: w / wrf, BytesActivations: p.ActFusion * act / tp, FloorWeights: w}
		c.bwd = Cost{FTheory: 2 * f, FTensorcore: 2 * f, FExecuted: 2 * f, BytesWeights: w/wrf + g, BytesActivations: 2 * p.ActFusion * act / tp,
			FloorWeights: w + g}
		if !op.Tied {
			c.params = float64(op.Numel) / tp
		}
		in, out := float64(op.In), float64(op.Out)/tp
		dtype, quantized := s.ComputeDType, s.lowPrecisionTraining(ph)
		if quantized && op.Category == CatLMHead && !s.LowPrecisionLMHead {
			dtype, quantized = s.AttnDType(), false // the 16-bit LM head (LowPrecisionLMHead)
		}
		c.fwdK = gemmKernel(op, dtype, m, out, in, 1, f, math.Max(w/wrf, w)+p.ActFusion*act/tp)
		// backward: dgrad [M,N]x[N,K] and wgrad [K,M]x[M,N], each the forward's FLOPs
		half := p.ActFusion * act / tp
		c.bwdK[0] = gemmKernel(op, dtype, m, in, out, 1, f, math.Max(w/wrf, w)+half)
		c.bwdK[1] = gemmKernel(op, dtype, in, out, m, 1, f, g+half)
		c.nBwd = 2
		c.blockScaled(quantized && s.BlockScaled)
		if quantized {
			// the input (whole, as the layer reads it) and the output gradient (this rank's
			// columns); Transformer Engine under sequence parallelism casts each rank's
			// sequence shard before its all-gathers instead, so a rank casts 1/TP of both
			act := m * (in + out)
			if s.CastSequenceShards {
				act = m * (float64(op.In) + float64(op.Out)) / tp
			}
			c.castK = castKernel(op, act, float64(op.Numel)/tp, s)
		}
	case OpExperts:
		costExperts(op, fp, ph, sh, s, p, c)
	case OpEmbedding:
		rows := DistinctExperts(float64(op.Rows), 1, sh.tokens) // distinct rows gathered
		w := rows * float64(op.Width) * Wb / tp
		act := p.ActFusion * A * sh.tokens * float64(op.Width)
		c.fwd = Cost{BytesWeights: w / wrf, BytesActivations: act, FloorWeights: w}
		g := rows * float64(op.Width) * G / tp
		c.bwd = Cost{BytesWeights: g, BytesActivations: act, FloorWeights: g}
		if !op.Tied {
			c.params = float64(op.Numel) / tp
		}
		c.fwdK = kernels.Kernel{Name: op.Name, Category: string(op.Category), Kind: kernels.Memory, Count: 1, Bytes: math.Max(w/wrf, w) + act}
		c.bwdK[0] = kernels.Kernel{Name: op.Name, Category: string(op.Category), Kind: kernels.Memory, Count: 1, Bytes: g + act}
		c.nBwd = 1
	case OpElementwise:
		m := sh.tokens
		if op.PerAssignment && fp.MoE != nil {
			m = sh.tokens * float64(fp.MoE.TopK) // expert assignments this GPU processes (balanced, DP = EP)
		}
		div := 1.0
		if op.Category == CatDenseFFN || op.Category == CatSharedExperts || op.Category == CatRoutedExperts || op.Category == CatAttention {
			div = tp // activations inside a TP-split MLP or attention block are split too
		}
		f := m * float64(op.FlopsPerToken) / div
		tmp := p.Elementwise * A * m * float64(op.ElemsPerToken) / div
		w := float64(op.WeightElems) * Wb / div
		g := float64(op.WeightElems) * G / div
		c.fwd = Cost{FTheory: f, FExecuted: f, BytesWeights: w / wrf, BytesTemporary: tmp, FloorWeights: w}
		c.bwd = Cost{FTheory: f, FExecuted: f, BytesWeights: w/wrf + g, BytesTemporary: 2 * tmp, FloorWeights: w + g}
		if !op.Tied {
			c.params = float64(op.WeightElems) / div
		}
		// Residual adds fuse into the next norm and bias adds into the GEMM epilogue, as the
		// engines do: they move bytes but launch nothing of their own.
		launches := 1.0
		if op.Name == "residual_add" || op.ElemsPerToken == 0 {
			launches = 0
		}
		if op.PerAssignment && op.Name == "mlp_activation" && s.FusedGroupedMLP && ph == Training {
			// the fused grouped MLP's GLU lives in the FC1 epilogue (its gradient in FC2's):
			// the GEMMs already read and write what it needs, so it adds no pass and no launch
			tmp, launches = 0, 0
			c.fwd.BytesTemporary, c.bwd.BytesTemporary = 0, 0
		}
		c.fwdK = kernels.Kernel{Name: op.Name, Category: string(op.Category), Kind: kernels.Memory, Count: launches,
			VectorFLOPs: f, Bytes: math.Max(w/wrf, w) + tmp}
		c.bwdK[0] = kernels.Kernel{Name: op.Name, Category: string(op.Category), Kind: kernels.Memory, Count: launches,
			VectorFLOPs: f, Bytes: w + g + 2*tmp}
		c.nBwd = 1
		if op.PerAssignment && op.Name == "mlp_activation" && ph == Training && s.EagerGLUClamp && !s.FusedGroupedMLP && fp.GLUClamp > 0 {
			// the clamp's own passes, beside the fused activation (recomputed with it)
			c.eagerK = clampKernels(op, m*float64(op.ElemsPerToken)/3/div, A)
			c.fwd.BytesTemporary += c.eagerK[0].Bytes
			c.bwd.BytesTemporary += c.eagerK[1].Bytes
		}
		if op.Name == "mlp_activation" && ph == Training && s.UnfusedGLU && !(op.PerAssignment && s.FusedGroupedMLP) && gatedAct(op) {
			// the eager GLU's passes beyond the fused kernel's (recomputed with it)
			u := unfusedGLUKernels(op, m*float64(op.ElemsPerToken)/3/div, A, op.PerAssignment)
			for i := range u {
				if c.eagerK[i].Name == "" {
					c.eagerK[i] = u[i]
					continue
				}
				c.eagerK[i].Count += u[i].Count
				c.eagerK[i].Bytes += u[i].Bytes
				c.eagerK[i].VectorFLOPs += u[i].VectorFLOPs
			}
			c.fwd.BytesTemporary += u[0].Bytes
			c.bwd.BytesTemporary += u[1].Bytes
		}
	case OpAttnCore:
		costAttention(op, fp, ph, sh, s, p, c)
	}
	if op.Frozen && ph == Training {
		c.freeze(op, s, tp)
	}
}

// freeze drops what a frozen weight does not need in training: its gradient, its optimizer
// update and, for linear layers and experts, the weight-gradient GEMM (the input gradient is
// still computed, for the layers below). A quantized base (QLoRA) is stored in QuantBytes and
// dequantized to 16 bits before the forward and the input-gradient GEMM.
func (c *opCost) freeze(op Op, s Scenario, tp float64) {
	c.params = 0
	switch op.Kind {
	case OpGEMM, OpExperts:
		c.bwd = c.fwd // dgrad: the forward's FLOPs over the same weights
		c.nBwd = 1
		if op.QuantBytes > 0 && op.QuantNative {
			// an FP8/NVFP4 base: each pass reads the orientation it needs, as stored
			per := float64(op.Numel) / tp
			c.fwd.FloorWeights = per * op.QuantBytes / 2
			c.bwd.FloorWeights = per * op.QuantBytes / 2
		} else if op.QuantBytes > 0 {
			per := float64(op.Numel) / tp
			c.fwd.FloorWeights = per * op.QuantBytes
			c.bwd.FloorWeights = 0
			c.castK = kernels.Kernel{Name: op.Name + "_dequant", Category: string(op.Category), Kind: kernels.Memory,
				Count: 2, Bytes: 2 * per * (op.QuantBytes + s.WeightBytes)}
		}
	case OpEmbedding:
		c.bwd, c.nBwd = Cost{}, 0 // nothing below the embedding needs a gradient
	default:
		g := c.bwd.FloorWeights - c.fwd.FloorWeights
		c.bwd.BytesWeights -= g
		c.bwd.FloorWeights -= g
		if c.nBwd > 0 {
			c.bwdK[0].Bytes = math.Max(0, c.bwdK[0].Bytes-g)
		}
	}
}

// blockScaled marks a GEMM's forward, dgrad and wgrad kernels as block-scaled where on.
func (c *opCost) blockScaled(on bool) {
	c.fwdK.BlockScaled, c.bwdK[0].BlockScaled, c.bwdK[1].BlockScaled = on, on, on
}

func gemmKernel(op Op, dtype string, m, n, k, groups, flops, bytes float64) kernels.Kernel {
	return kernels.Kernel{Name: op.Name, Category: string(op.Category), Kind: kernels.GEMM, Count: 1,
		M: m, N: n, K: k, Groups: groups, FLOPs: flops, DType: dtype, Bytes: bytes}
}

func costExperts(op Op, fp Fingerprint, ph Phase, sh stepShape, s Scenario, p ExecProfile, c *opCost) {
	if fp.MoE == nil {
		return
	}
	A, Wb, G := s.ActBytes, s.WeightBytes, s.GradBytes
	E, k := float64(fp.MoE.RoutedExperts), float64(fp.MoE.TopK)
	ep := float64(s.EP)
	tp := float64(s.Etp())
	// With sequence parallel, each expert-TP group routes its share of the TP group's tokens
	// (all of them when ETP = TP); the EP group routes that share x EP tokens; this GPU holds
	// E/EP experts and, on average, receives tokens*k token-expert assignments (balanced
	// uniform routing).
	tokens := sh.tokens * tp / float64(s.TP)
	groupTokens := tokens * ep
	frac := DistinctExperts(E, k, groupTokens) / E // share of experts touched this step
	if s.BalancedRouting {
		frac = math.Min(1, groupTokens*k/E)
	}
	held := float64(op.Experts) / ep // experts of this weight on this GPU
	if op.Experts == 1 {             // one of E separate expert modules: held by one GPU of EP
		held = 1 / ep
	}
	perExpert := float64(op.Numel) / math.Max(float64(op.Experts), 1)
	assignments := tokens * k * held / (E / ep) // assignments to this weight's experts on this GPU
	if op.Experts == 1 {
		assignments = tokens * k / E
	}
	mEff := groupTokens * k / E / math.Max(frac, 1e-12) // tokens per touched expert
	f := 2 * assignments * perExpert / tp
	wTouched := held * frac * perExpert * Wb / tp
	act := A * assignments * float64(op.In+op.Out) / tp
	c.fwd = Cost{FTheory: f, FTensorcore: f, FExecuted: f, BytesWeights: wTouched / p.WRFMoE, BytesActivations: p.ActFusion * act, FloorWeights: wTouched}
	gTouched := held * frac * perExpert * G / tp
	c.bwd = Cost{FTheory: 2 * f, FTensorcore: 2 * f, FExecuted: 2 * f, BytesWeights: wTouched/p.WRFMoE + gTouched, BytesActivations: 2 * p.ActFusion * act,
		FloorWeights: wTouched + gTouched}
	c.params = held * perExpert / tp
	// One grouped GEMM over the touched experts: each a thin [M_eff, K] x [K, N] problem whose
	// small M leaves it reading its weights at HBM speed.
	groups := math.Max(held*frac, 1e-12)
	in, out := float64(op.In), float64(op.Out)/tp
	w := math.Max(wTouched/p.WRFMoE, wTouched)
	dtype, quantized := s.ComputeDType, s.lowPrecisionTraining(ph)
	if quantized && s.HighPrecisionExperts {
		dtype, quantized = s.AttnDType(), false // the legacy GroupedMLP's 16-bit gmm
	}
	c.fwdK = gemmKernel(op, dtype, mEff, out, in, groups, f, w+p.ActFusion*act)
	c.bwdK[0] = gemmKernel(op, dtype, mEff, in, out, groups, f, w+p.ActFusion*act)
	c.bwdK[1] = gemmKernel(op, dtype, in, out, mEff, groups, f, gTouched+p.ActFusion*act)
	c.fwdK.Grouped, c.bwdK[0].Grouped, c.bwdK[1].Grouped = true, true, true
	c.bwdK[0].Backward, c.bwdK[1].Backward = true, true
	c.nBwd = 2
	c.blockScaled(quantized && s.BlockScaled)
	if quantized {
		c.castK = castKernel(op, assignments*(in+out), held*perExpert/tp, s)
	}
	if ph == Training && s.ExpertBiasFP32 && !s.FusedGroupedMLP && outputBias(op) {
		// every token-expert assignment this GPU computes gets its expert's hidden-wide bias
		c.fwdK, c.bwdK[0] = expertBiasKernels(op, tokens*k*float64(fp.Hidden), E/ep)
		c.nBwd = 1
		c.fwd.BytesTemporary, c.bwd.BytesTemporary = c.fwdK.Bytes, c.bwdK[0].Bytes
		c.fwd.BytesActivations, c.bwd.BytesActivations = 0, 0
	}
}

// outputBias says an experts op is the routed experts' output bias: the [E, hidden] bias of the
// down projection (GPT-OSS's experts.down_proj_bias), which Megatron adds outside the GEMM.
func outputBias(op Op) bool {
	name := strings.ToLower(op.Name)
	return strings.HasSuffix(name, "bias") && (strings.Contains(name, "down") || strings.Contains(name, "fc2") || strings.Contains(name, "w2"))
}

// expertBiasKernels are the passes Megatron's TEGroupedMLP._apply_bias makes over the experts'
// output (elems: assignments x hidden) over the held experts' slices, as PyTorch runs them:
// forward, per expert b·p (write fp32), t + b·p (read 16-bit and fp32, write fp32), then the
// concatenation (read and write fp32) and the cast back (read fp32, write 16-bit): 28 bytes an
// element, 2 launches an expert and 2 more. Backward (autograd): the cast's gradient to fp32 (2
// + 4), the add's gradient for t back to 16-bit (4 + 2), and the products' gradients for the
// bias and the probabilities, each a full fp32 product then a reduction (3 x 4 each): 36 bytes
// an element, 4 launches an expert and 2 more. The 16-bit widths are the activations' (2 B).
func expertBiasKernels(op Op, elems, held float64) (fwd, bwd kernels.Kernel) {
	experts := math.Max(held, 1)
	fwd = kernels.Kernel{Name: op.Name + ".fp32", Category: string(op.Category), Kind: kernels.Memory,
		Count: 2*experts + 2, Bytes: 28 * elems, VectorFLOPs: 2 * elems, MemShare: EagerPassShare}
	bwd = kernels.Kernel{Name: op.Name + ".fp32", Category: string(op.Category), Kind: kernels.Memory,
		Count: 4*experts + 2, Bytes: 36 * elems, VectorFLOPs: 4 * elems, MemShare: EagerPassShare}
	return fwd, bwd
}

// clampKernels are an eager GLU clamp's passes over half elements per half (a: the activations'
// element size), as PyTorch runs Megatron's chunk, clamp, clamp and cat. Forward: each half's
// clamp reads and writes it, and the concatenation reads and writes both: 8 elements of a per
// element of a half, 3 launches. Backward (autograd): the cat's gradient is two views; the
// gate's clamp (max only) backward is where(x <= max, g, 0), a comparison (read x, write a
// 1-byte mask) and the select (read mask and g, write): 3a + 2 bytes, 2 launches; the linear
// half's (min and max) compares twice and ands the masks first: 4a + 6, 4 launches; the
// chunk's gradient concatenates the two halves: 4a, 1 launch. 11a + 8 bytes, 7 launches. Each
// runs at EagerPassShare of the chip's memory rate.
func clampKernels(op Op, half, a float64) [2]kernels.Kernel {
	k := kernels.Kernel{Name: op.Name + ".clamp", Category: string(op.Category), Kind: kernels.Memory, MemShare: EagerPassShare}
	fwd, bwd := k, k
	fwd.Count, fwd.Bytes, fwd.VectorFLOPs = 3, 8*a*half, 2*half
	bwd.Count, bwd.Bytes, bwd.VectorFLOPs, bwd.Backward = 7, (11*a+8)*half, 4*half, true
	return [2]kernels.Kernel{fwd, bwd}
}

// gatedAct says whether an activation op is a GLU's (actOp: it reads two halves and writes one,
// 3 elements and 5 FLOPs per output element).
func gatedAct(op Op) bool { return op.ElemsPerToken*5 == op.FlopsPerToken*3 }

// unfusedGLUKernels are the passes an eager GLU makes beyond the fused kernel's one (read both
// halves, write the product: 3eA bytes forward, twice that backward) over e output elements of
// A bytes. Forward: silu (read and write e), the multiply (read 2e, write e); the routed
// experts then scale by the fp32 router weight (read e, write e in fp32) and cast back (read 4
// bytes, write A): 7eA + 8e in all, 4 launches. Backward: the cast's and the scale's gradients
// (fp32 in, A out) and the router weight's gradient, the multiply's two gradients, silu's, and
// the concatenation of the halves' gradients (chunk's backward): 16eA + 12e, 7 launches. A
// dense or shared MLP makes the silu and multiply passes only (5eA and 13eA, 2 and 4 launches).
// The kernels returned carry the difference from the fused kernel: its bytes and its one
// launch each way are counted already.
func unfusedGLUKernels(op Op, e, a float64, routed bool) [2]kernels.Kernel {
	k := kernels.Kernel{Name: op.Name + ".unfused", Category: string(op.Category), Kind: kernels.Memory, MemShare: EagerPassShare}
	fwd, bwd := k, k
	fwd.Count, fwd.Bytes, fwd.VectorFLOPs = 1, 2*a*e, 4*e
	bwd.Count, bwd.Bytes, bwd.VectorFLOPs, bwd.Backward = 3, 7*a*e, 8*e, true
	if routed {
		fwd.Count, fwd.Bytes, fwd.VectorFLOPs = 3, (4*a+8)*e, 6*e
		bwd.Count, bwd.Bytes, bwd.VectorFLOPs = 6, (10*a+12)*e, 12*e
	}
	return [2]kernels.Kernel{fwd, bwd}
}

// EagerPassShare is the share of a device-to-device copy's rate eager PyTorch's passes over
// strided halves, last-dimension concatenations and fp32 broadcasts reach: measured on a lent
// H100 (calib/kernels_cudnn_h100.json, eager_passes: a 1 GiB copy at 2.43 TB/s counting both
// ways; GPT-OSS-120B's clamp over 16,384 assignments forward at 0.67 of it and backward 0.70,
// the fp32 expert bias forward at 0.73 of it, each by the bytes clampKernels and
// expertBiasKernels count). Replayed from CUDA graphs (eager_rope: the GPU's time alone), the
// clamp, the bias's forward and backward and the YaRN RoPE (ropeKernels) come out within
// -12..+4% of these bytes at this share of the chip's memory rate (go test ./calib -run
// MeasuredEager).
const EagerPassShare = 0.7

// castKernel is what low-precision training adds around a GEMM, as Transformer Engine runs
// it: the input (forward) and output-gradient (backward) quantization is fused into the
// neighbouring norm, activation or bias kernels, so it writes the low-precision copy (act
// elements) without a launch of its own; the weights are cast once per optimizer step and
// cached across micro-batches (read in 16-bit, written in low precision). A recipe that casts
// its weights in every micro-batch (torchao's) says so in CastWeightBytes.
func castKernel(op Op, act, weights float64, s Scenario) kernels.Kernel {
	low := DType(s.ComputeDType).Bytes() // the fp8/fp4 copy's element size
	perAct := low
	if s.CastBytes > 0 {
		perAct = s.CastBytes
	}
	w := weights * (s.WeightBytes + perAct) / float64(s.GradAccum)
	if s.CastWeightBytes > 0 {
		w = weights * s.CastWeightBytes
	}
	return kernels.Kernel{Name: op.Name + ".cast", Category: string(op.Category), Kind: kernels.Memory, Count: 0,
		Bytes: act*perAct + w}
}

// kvElems is KV-cache elements per token per layer on one GPU: GQA heads split across TP (a KV
// head is never split), the MLA latent is replicated on every TP rank.
func kvElems(fp Fingerprint, s Scenario) float64 {
	if fp.MLA != nil {
		return float64(fp.CKV)
	}
	heads := math.Max(1, float64(fp.KVHeads)/float64(s.TP))
	return 2 * heads * float64(fp.HeadDim)
}

// FlashBwdFactor is the backward's executed FLOPs over the forward's for flash kernels: they
// recompute the scores (QK^T) before dV, dP, dQ and dK, five GEMMs to the forward's two
// (Dao-AILab/flash-attention benchmarks: bwd = 2.5 x fwd).
const FlashBwdFactor = 2.5

func costAttention(op Op, fp Fingerprint, ph Phase, sh stepShape, s Scenario, p ExecProfile, c *opCost) {
	A := s.ActBytes
	h := float64(fp.Heads) / float64(s.TP)
	lk := sh.kvLen
	if op.Window > 0 && lk > float64(op.Window) && sh.decode {
		lk = float64(op.Window) // a sliding window caps what decode reads
	}
	dqk, dv := float64(fp.HeadDim), float64(fp.VHeadDim)
	if sh.decode && fp.MLA != nil {
		// Absorbed MLA decode attends in the latent space: scores over kv_lora_rank+rope dims,
		// values over kv_lora_rank (W_UK and W_UV fold into the q and o projections).
		dqk, dv = float64(fp.MLA.KVLoraRank+fp.MLA.QKRope), float64(fp.MLA.KVLoraRank)
	}
	scores := sh.batch * h * sh.queries * lk
	fTC := 2*scores*dqk + 2*scores*dv
	fSoftmax := 3 * scores
	// What a causal kernel executes: query i attends over i+1 keys (the lower triangle, with
	// the diagonal); a sliding window caps each row at the window.
	// With context parallel a GPU's S/CP queries are load-balanced chunks of the sequence, so it
	// executes the same causal share of its queries x S scores as the whole sequence does.
	exec := 1.0
	switch {
	case !sh.decode && sh.prefix > 0:
		// a chunk after a cached prefix: every query sees the whole prefix and, causally, its
		// own chunk up to itself (a sliding window caps both)
		q, p := sh.queries, sh.prefix
		if w := float64(op.Window); w > 0 && w < q+p {
			exec = math.Min(w, (q+1)/2+p) / sh.kvLen
		} else {
			exec = (p + (q+1)/2) / sh.kvLen
		}
	case !sh.decode && sh.queries > 1:
		q := sh.kvLen
		if w := float64(op.Window); w > 0 && w < q {
			exec = (w*(w+1)/2 + (q-w)*w) / (q * q)
		} else {
			exec = (q + 1) / (2 * q)
		}
	}
	kvTok := kvElems(fp, s) * s.KVBytes
	var kv, floorKV float64
	if sh.decode {
		kv = sh.batch*lk*kvTok + sh.batch*kvTok // read the cache, append this token
		floorKV = kv
	} else if sh.kvWrite {
		kv = sh.tokens*kvTok + sh.batch*sh.prefix*kvTok // write this chunk's K/V, read the cached prefix's
		floorKV = kv
	}
	// Q and O cross HBM; K and V are read from the cache in decode, from the projections'
	// outputs otherwise (those writes are the GEMMs'; these are the reads).
	qo := A * sh.tokens * h * (dqk + dv)
	kvRead := 0.0
	if !sh.decode {
		kvRead = A * sh.tokens * kvElems(fp, s)
	}
	var tmp float64
	if p.AttentionBytes == "naive" {
		tmp = p.Elementwise * A * scores * exec * 4 // write scores, read them, write probs, read them
	}
	act := p.ActFusion * (qo + kvRead)
	c.fwd = Cost{FTheory: fTC + fSoftmax, FTensorcore: fTC, FExecuted: exec * (fTC + fSoftmax),
		BytesActivations: act, BytesKV: kv, BytesTemporary: tmp, FloorKV: floorKV}
	// Backward: 2x the forward FLOPs (dQ, dK, dV, dP) as model FLOPs; a flash kernel executes
	// 2.5x, recomputing the scores. Q/K/V/O/dO read, dQ/dK/dV written.
	c.bwd = Cost{FTheory: 2 * (fTC + fSoftmax), FTensorcore: 2 * fTC, FExecuted: exec * FlashBwdFactor * (fTC + fSoftmax),
		BytesActivations: 2 * act, BytesTemporary: 2 * tmp}
	c.recomputeSelective = Cost{FExecuted: exec * (fTC + fSoftmax), BytesActivations: act, BytesTemporary: tmp}
	groupM := float64(fp.Heads) / float64(max(fp.KVHeads, 1))
	if fp.MLA != nil {
		groupM = h // every head on this GPU reads the one latent (it is replicated across TP)
	}
	c.fwdK = kernels.Kernel{Name: op.Name, Category: string(op.Category), Kind: kernels.Attention, Count: 1,
		FLOPs: exec * fTC, VectorFLOPs: exec * fSoftmax, DType: s.AttnDType(), Bytes: act + math.Max(kv, floorKV) + tmp,
		Batch: sh.batch, Heads: h, Queries: sh.queries, Decode: sh.decode, GroupM: groupM * sh.queries, HeadDim: (dqk + dv) / 2}
	if sh.decode || sh.kvWrite {
		c.fwdK.KVElem = s.KVBytes // the KV cache's element, which it reads (decode) or writes (prefill)
	}
	c.fwdK.Latent = fp.MLA != nil
	if w := float64(op.Window); w > 0 && !sh.decode && w < sh.kvLen {
		c.fwdK.Window = w
	}
	c.fwdK.Sink = fp.AttnSinks
	fp8 := ph == Training && s.FP8Attention && s.lowPrecisionTraining(ph) && s.ComputeDType == "fp8"
	if fp8 {
		c.fwdK.DType, c.fwdK.BlockScaled = "fp8", s.BlockScaled
	}
	c.bwdK[0] = c.fwdK
	c.bwdK[0].FLOPs, c.bwdK[0].VectorFLOPs = exec*FlashBwdFactor*fTC, exec*FlashBwdFactor*fSoftmax
	c.bwdK[0].Bytes, c.bwdK[0].Backward = 2*act+2*tmp, true
	c.nBwd = 1
	if fp8 {
		// Transformer Engine quantizes the kernel's 16-bit inputs in passes of their own: Q, K
		// and V before the forward, the output gradient before the backward (read in 16 bits,
		// written in 8 with their scales); the kernels then read the 8-bit copies
		elems := sh.tokens * h * (dqk + dv) // Q and the output gradient
		if fp.MLA != nil {
			elems += sh.tokens * h * (dqk + dv) // MLA's per-head K and V, up-projected from the latent
		} else {
			elems += sh.tokens * kvElems(fp, s)
		}
		c.castK = kernels.Kernel{Name: op.Name + ".quantize", Category: string(op.Category), Kind: kernels.Memory, Count: 2,
			Bytes: elems * (A + 1 + 1.0/32)}
	}

	c.recK = c.fwdK
	c.recK.Bytes = act + tmp
	if ph == Training && s.EagerScaledRoPE && fp.MLA == nil && strings.Contains(strings.ToLower(fp.PositionEncoding), "yarn") {
		kvh := math.Max(1, float64(fp.KVHeads)/float64(s.TP))
		c.eagerK = ropeKernels(op, sh.tokens*(h+kvh)*dqk, A)
		c.fwd.BytesTemporary += c.eagerK[0].Bytes
		c.bwd.BytesTemporary += c.eagerK[1].Bytes
	}
}

// ropeKernels are an eager rotary embedding's passes over elems query and key elements (a: the
// activations' element size), as PyTorch runs Megatron's _apply_rotary_pos_emb_bshd: forward
// t*cos (read and write), the rotated half's negation (half of it) and concatenation, its *sin,
// the sum (read two, write one) and the final concatenation with the empty pass-through part:
// 12 elements of a per element, 6 launches. Backward (autograd): g*sin, the negation's
// gradient, the chunk's concatenation, g*cos, their sum into t's gradient and the slice's
// scatter into a zeroed gradient: 13 elements of a, 7 launches. Each at EagerPassShare.
func ropeKernels(op Op, elems, a float64) [2]kernels.Kernel {
	k := kernels.Kernel{Name: op.Name + ".rope", Category: string(op.Category), Kind: kernels.Memory, MemShare: EagerPassShare}
	fwd, bwd := k, k
	fwd.Count, fwd.Bytes, fwd.VectorFLOPs = 6, 12*a*elems, 3*elems
	bwd.Count, bwd.Bytes, bwd.VectorFLOPs, bwd.Backward = 7, 13*a*elems, 4*elems, true
	return [2]kernels.Kernel{fwd, bwd}
}

// netKernels are the collectives one GPU takes part in per step: TP all-reduces after
// attention and MLP, EP dispatch and combine of routed tokens (the backward pass moves the
// gradients of the same tensors). They are serialized with the layer (exposed): the next GEMM
// needs their result. Activations travel in at least 16 bits (the engines reduce in bf16/fp16).
func netKernels(fp Fingerprint, moeLayers, layers float64, ph Phase, s Scenario) []kernels.Kernel {
	sh := shapeOf(ph, s)
	A := math.Max(s.ActBytes, 2)
	passes := 1.0
	if ph == Training {
		passes = 2
	}
	var ks []kernels.Kernel
	if s.TP > 1 {
		ks = append(ks, kernels.Kernel{Name: "tp_all_reduce", Category: "network", Kind: kernels.Collective, Coll: kernels.AllReduce,
			Count: passes * 2 * layers, Ranks: float64(s.TP), Message: sh.tokens * float64(fp.Hidden) * A, Exposed: 1})
	}
	if s.CP > 1 && ph != Decode && fp.Transformer {
		// each layer gathers the other chunks' K/V (and the backward reduce-scatters dK/dV); the
		// ring exchange overlaps attention compute, so only what outlasts compute is exposed
		kv := float64(s.Batch*s.Seq) * kvElems(fp, s) * math.Max(s.ActBytes, 2)
		ks = append(ks, kernels.Kernel{Name: "cp_kv_all_gather", Category: "network", Kind: kernels.Collective, Coll: kernels.AllGather,
			Count: passes * layers, Ranks: float64(s.CP), Message: kv, Exposed: 0})
	}
	if s.EP > 1 && fp.MoE != nil {
		ks = append(ks, kernels.Kernel{Name: "ep_all_to_all", Category: "network", Kind: kernels.Collective, Coll: kernels.AllToAll,
			Count: passes * 2 * moeLayers, Ranks: float64(s.EP), Message: sh.tokens * float64(fp.MoE.TopK) * float64(fp.Hidden) * A, Exposed: 1})
	}
	return ks
}

// SentBytes is what one GPU sends over its links for a collective kernel.
func SentBytes(k kernels.Kernel) float64 {
	return k.Count * kernels.RingFactor(k.Coll, k.Ranks) * k.Message
}

// KVBytesPerToken is the KV cache one token keeps on one GPU under the scenario's TP, summed
// over the layers (sliding-window layers count fully: a serving engine pages them per token).
func (m *Model) KVBytesPerToken(s Scenario) float64 {
	if !m.Fingerprint.Transformer {
		return 0
	}
	return kvElems(m.Fingerprint, s) * s.KVBytes * float64(m.Fingerprint.Layers)
}
