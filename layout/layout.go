// Package layout spreads a training step over a parallel layout: tensor (TP, with sequence
// parallel), pipeline (PP, interleaved with VP virtual stages), context (CP), data (DP, with
// the distributed optimizer) and expert parallel. It composes the counted step (analyzer) and
// the time model (a kernels.Predictor) into a step time on many GPUs; it never imports timing.
package layout

import (
	"fmt"
	"math"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/kernels"
	"github.com/mrep-dev/mrep/timing"
)

// Layout is how a training job is spread over GPUs.
type Layout struct {
	TP, PP, VP, CP, DP, EP int64
	ETP                    int64 // expert tensor parallel (0: TP): experts split EP x ETP ways
	MBS, GBS               int64 // micro-batch and global batch, in sequences
	Seq                    int64
	// DistOptimizer shards optimizer state (fp32 master, m, v) over DP (ZeRO-1, Megatron's
	// distributed optimizer): gradients are reduce-scattered and parameters all-gathered.
	DistOptimizer bool
	// ZeRO is the sharding stage over DP (Rajbhandari et al. 2019): 1 optimizer state (as
	// DistOptimizer), 2 also gradients, 3 also parameters (FSDP), which are then gathered for
	// every micro-batch's forward and backward.
	ZeRO      int
	Recompute string
	// RecomputeLayers is how many layers of a stage full recompute covers (0: all of them);
	// the others keep their activations and skip the extra forward.
	RecomputeLayers int64
	// NoSP turns Megatron's sequence parallel off (it is on with TP by default): norms and
	// dropout then keep full-sequence activations on every TP rank.
	NoSP bool

	// What each GPU holds (train_memory.go). Framework: megatron (""), fsdp or deepspeed.
	Framework string
	// Optimizer: adamw (""), adamw-bf16, adam8bit, adafactor or sgd.
	Optimizer string
	// Precision is the recipe's linear-layer format for memory and time: bf16 (""), fp8 or mxfp8.
	Precision string
	// OffloadOptimizer keeps master weights and optimizer state in host memory and updates them
	// there (ZeRO-Offload); OffloadParams streams ZeRO-3 weight shards from host (ZeRO-Infinity).
	OffloadOptimizer, OffloadParams bool
	// OffloadActivations is how many layers of a stage send their saved activations to host
	// memory during the forward (Megatron/Transformer Engine --cpu-offloading-num-layers).
	OffloadActivations int64
	// Compile: torch.compile fuses an eager model's elementwise ops (fsdp, deepspeed), so
	// their intermediates are not kept.
	Compile bool

	// Pipeline accounting (pipeline.go): Megatron's embedding and loss counted as layers, or
	// uneven first and last stages.
	EmbeddingInPipe, LossInPipe       bool
	FirstStageLayers, LastStageLayers int64
	// MTP is the depth of DeepSeek-V3's multi-token prediction: each module is one more
	// transformer layer and LM head pass on the last stage.
	MTP int64
	// MoE communication (moe.go): the token dispatcher (alltoall or deepep), how the expert
	// all-to-all overlaps computation (none, 1f1b or dualpipe) and the routed tokens' imbalance
	// (the busiest EP rank's tokens over the mean; 1: balanced, as forced in benchmarks).
	Dispatcher, A2AOverlap string
	Imbalance              float64
	// Routing is how a benchmark's forced balance picks each token's experts: "" random logits
	// (Megatron's moe_router_force_load_balancing: uniform, as a trained router spreads them), or
	// "even" (Primus's moe_router_force_load_balancing_type even: token t's k-th slot goes to
	// expert (t·topk + k) mod experts, so its top-k experts are consecutive and share a rank).
	// Only a deduplicating dispatcher (DeepEP, HybridEP) moves less for it.
	Routing string
	// FP8Dispatch: the forward dispatch travels in FP8 with 1x128 scales, as DeepSeek-V3's own
	// stack sends it through DeepEP (its report, section 3.3). Megatron's DeepEP and HybridEP
	// dispatch BF16 whatever the recipe (fused_a2a.py @d98e8a6; only its NCCL EP backend takes
	// moe_dispatch_fwd_dtype mxfp8), so this is off unless asked for.
	FP8Dispatch bool
	// NoSwiGLUFusion: Megatron's --no-bias-swiglu-fusion (bias_swiglu_fusion false, as Primus's
	// Qwen3 configs set it): the gated MLPs' activation runs as eager ops, and the routed experts'
	// scale by the router weight in fp32 and cast back (analyzer.Scenario's UnfusedGLU), keeping
	// the silu output and the product for the backward.
	NoSwiGLUFusion bool
	// CUDAGraph: Megatron's full-iteration CUDA graph (--cuda-graph-impl full_iteration): each
	// step replays one captured graph, so the host issues no kernels and its pace never bounds
	// the step (an eager MoE layer's host work, MoELaunchUs, goes with it). An MoE model's
	// layers are capturable only with static shapes (Megatron's MoE README: an expert capacity
	// factor with padding, or the paged stash): mrep times them dropless and balanced, as run.
	CUDAGraph bool
	// GroupedGEMM is how Megatron issues the routed experts' GEMMs: "" (Transformer Engine's
	// GroupedLinear) and "legacy" (Megatron's legacy GroupedMLP, --moe-use-legacy-grouped-gemm,
	// multi-stream on ROCm) launch one GEMM per local expert and linear; "turbo" (Primus-Turbo's
	// grouped GEMM, --use_turbo_grouped_gemm) runs all local experts in one launch and quantizes
	// each linear's whole input at once (Primus's moe-training guide: "processes all experts in
	// one launch instead of multi-stream"). Only the host's launches differ: the GPU's work is the
	// same GEMMs.
	GroupedGEMM string
	// SyncFreeMoE is Primus-Turbo's sync-free MoE stage (--turbo_sync_free_moe_stage 0-3). Stage 1
	// fuses the router and the permutation; the dispatch still waits on the host for its received
	// counts. From stage 2 the dispatch (Turbo DeepEP on worst-case buffers) and the grouped GEMM
	// (Turbo's) size themselves on the device, so no MoE layer's forward copies its token counts
	// to the host and the host issues ahead of the GPU: the layers' synchronized phases
	// (moeHostPace) give way to max(host, GPU) over the micro-batch.
	SyncFreeMoE int64
	// NoReshard: FSDP2's reshard_after_forward=False: each micro-batch gathers a layer's weights
	// once and keeps them to its backward (torchtitan's choice under pipelining); memory holds the
	// stage's gathered weights and gradients.
	NoReshard bool
	// TPOverlap: the TP/SP collectives run chunked beside the GEMMs they feed (Megatron's
	// --tp-comm-overlap with userbuffers, torchtitan's async TP), hidden up to the GEMMs' time.
	TPOverlap bool
	// FP8ParamGather: Megatron's --fp8-param-gather keeps the linear weights in FP8 only (the
	// master weights stay fp32), and gathers them in FP8. BF16Grads: grad_reduce_in_fp32 off,
	// the main gradients kept and reduced in bf16.
	FP8ParamGather, BF16Grads bool
	// FP8OutputProj: Megatron's fp8_output_proj, the LM head under MXFP8 too; without it the
	// LM head trains in 16-bit under every low-precision recipe (analyzer.Scenario's
	// LowPrecisionLMHead says why).
	FP8OutputProj bool
	// FP8Attention: Megatron's fp8_dot_product_attention (a TransformerConfig field, no pretrain_gpt.py
	// flag; Megatron-Bridge's mixed_precision.fp8_dot_product_attention), the attention core's matmuls in the
	// recipe's FP8 too (MXFP8 under mxfp8, per-tensor scaled under fp8-cs and fp8-ds; Megatron
	// passes fp8_dpa to Transformer Engine for those three recipes only). analyzer.Scenario's
	// FP8Attention says what it moves.
	FP8Attention bool
	// FusedGroupedMLP: Megatron's routed experts run Transformer Engine's CuTe DSL fused grouped
	// MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1, Megatron-Bridge's cutedsl_fused_grouped_mlp): the
	// activation and the FC2 bias in the GEMMs' epilogues. Without it Megatron's TEGroupedMLP runs
	// its activation as a kernel of its own and adds an expert output bias in fp32 outside the
	// GEMM (analyzer.Scenario's ExpertBiasFP32 and FusedGroupedMLP say what each moves).
	FusedGroupedMLP bool
	// ActFP8InputStore: Megatron's activation_func_fp8_input_store (a TransformerConfig field,
	// set from Megatron-Bridge's model config: Megatron-LM's arguments exclude it). The SwiGLU's
	// input, the FC1 output, is saved for its backward as an e4m3 cast and cast back there
	// (fusions/fused_bias_swiglu.py @core_v0.17.0): 1 B an element instead of 2, in the dense
	// MLP, the shared experts and TEGroupedMLP's routed experts. Memory only: the casts ride in
	// the fused activation kernel. DeepSeek-V3's report keeps the same input in FP8.
	ActFP8InputStore bool
	// Replicas is HSDP's replication degree: shards within DP x CP / Replicas ranks, gradients
	// all-reduced across the Replicas groups (torchtitan's dp_replicate; TPU slices with
	// data parallel over the data-center network). 0 or 1: one shard group.
	Replicas int64

	// Fine-tuning stacks' memory mechanisms (stacks.go). ParamDType is what trainable parameters
	// are kept in: "" the framework's mixed precision (16-bit weights with fp32 master weights),
	// bf16 (pure bf16: weights, gradients and the optimizer's moments in bf16, no master copy;
	// torchtune's dtype bf16, LitGPT's bf16-true), fp32 (fp32 parameters and gradients under
	// autocast, no separate master: the Hugging Face Trainer's AMP, PEFT's fp32 adapters).
	ParamDType string
	// Loss is how the logits and loss are held: "" the framework's (Megatron fused, else an
	// eager fp32 loss over bf16 logits), eager, chunked (the LM head and an fp32 upcast a chunk
	// at a time: torchtune, LitGPT) or fused (logits in 16 bits, their gradient written in
	// place: Unsloth's cross-entropy kernel).
	Loss string
	// OffloadCheckpoints: with full recompute, each layer's saved input waits in host memory
	// (Unsloth's "unsloth" gradient checkpointing): the GPU holds one layer's worth in flight.
	OffloadCheckpoints bool
	// UpcastUnquantized: with a quantized base, the parameters left unquantized (embedding, LM
	// head, norms) are cast to fp32 (PEFT's prepare_model_for_kbit_training).
	UpcastUnquantized bool
	// Stack names the fine-tuning stack whose defaults these are ("" none), for labels.
	Stack string
}

// String is the layout's shape as tables, charts and notes name it: "TP4 PP4 VP5 CP2 DP2
// ZeRO-1", with EP and ETP when experts are spread, HSDP replicas, a framework other than
// Megatron, and an MoE's all-to-all schedule and dispatcher when not the defaults. The
// micro-batch and recompute mode are columns of their own where layouts are listed.
func (l Layout) String() string {
	s := fmt.Sprintf("TP%d PP%d VP%d CP%d DP%d", l.TP, l.PP, l.VP, l.CP, l.DP)
	if l.EP > 1 {
		s += fmt.Sprintf(" EP%d", l.EP)
	}
	if l.ETP > 0 && l.ETP != l.TP {
		s += fmt.Sprintf(" ETP%d", l.ETP)
	}
	s += fmt.Sprintf(" ZeRO-%d", l.Stage())
	if l.OffloadActivations > 0 {
		s += fmt.Sprintf(" act-offload %d", l.OffloadActivations)
	}
	if l.Replicas > 1 {
		s += fmt.Sprintf(" HSDP×%d", l.Replicas)
	}
	if l.Stack != "" {
		s += " " + l.Stack
	} else if l.Framework != "" && l.Framework != Megatron {
		s += " " + l.Framework
	}
	if l.EP > 1 && l.A2AOverlap != "" && l.A2AOverlap != OverlapNone {
		s += " a2a:" + l.A2AOverlap
	}
	if l.EP > 1 && l.Dispatcher != "" && l.Dispatcher != DispatchAllToAll {
		s += " " + l.Dispatcher
	}
	if l.EP > 1 && (l.GroupedGEMM == GroupedTurbo || l.GroupedGEMM == GroupedLegacy) {
		s += " gg:" + l.GroupedGEMM
	}
	if l.SyncFreeMoE > 0 {
		s += fmt.Sprintf(" sync-free:%d", l.SyncFreeMoE)
	}
	if l.EP > 1 && l.Routing == RoutingEven {
		s += " even-routing"
	}
	if l.CUDAGraph {
		s += " graphed"
	}
	return s
}

// Stage is the effective ZeRO stage (DistOptimizer alone is stage 1).
func (l Layout) Stage() int {
	if l.DistOptimizer && l.ZeRO < 1 {
		return 1
	}
	return l.ZeRO
}

func (l Layout) etp() int64 {
	if l.ETP > 0 {
		return l.ETP
	}
	return l.TP
}

// partialRecompute is the share of a stage's layers full recompute covers (1: all, or no
// partial recompute asked for).
func (l Layout) partialRecompute(layers int64) float64 {
	if l.Recompute != "full" || l.RecomputeLayers <= 0 || layers <= 0 {
		return 1
	}
	return math.Min(1, float64(l.RecomputeLayers)/float64(l.StageLayers(layers)))
}

// GPUs is TP x PP x CP x DP.
func (l Layout) GPUs() int64 { return l.TP * l.PP * l.CP * l.DP }

// GA is the gradient accumulation: micro-batches per optimizer step on each DP rank.
func (l Layout) GA() int64 { return l.GBS / (l.MBS * l.DP) }

// Validate checks the layout against the model, each error naming the constraint.
func (l Layout) Validate(fp analyzer.Fingerprint) error {
	switch {
	case l.TP < 1 || l.PP < 1 || l.VP < 1 || l.CP < 1 || l.DP < 1 || l.EP < 1 || l.MBS < 1 || l.GBS < 1 || l.Seq < 1:
		return fmt.Errorf("layout sizes must be >= 1 (tp %d, pp %d, vp %d, cp %d, dp %d, ep %d, mbs %d, gbs %d, seq %d)", l.TP, l.PP, l.VP, l.CP, l.DP, l.EP, l.MBS, l.GBS, l.Seq)
	case l.TP > analyzer.MaxDegree || l.PP > analyzer.MaxDegree || l.VP > analyzer.MaxDegree || l.CP > analyzer.MaxDegree || l.DP > analyzer.MaxDegree ||
		l.EP > analyzer.MaxDegree || l.GPUs() > analyzer.MaxDegree || l.GBS > analyzer.MaxTokens || l.Seq > analyzer.MaxTokens || l.GBS*l.Seq > analyzer.MaxTokens:
		return fmt.Errorf("layout beyond physical range: at most %d GPUs and degrees, %d tokens per step", analyzer.MaxDegree, analyzer.MaxTokens)
	case fp.Heads > 0 && fp.Heads%l.TP != 0:
		return fmt.Errorf("tp %d must divide the %d attention heads", l.TP, fp.Heads)
	case fp.KVHeads > 0 && fp.KVHeads%l.TP != 0 && l.TP%fp.KVHeads != 0:
		return fmt.Errorf("tp %d must divide the %d KV heads or be a multiple of them (KV heads are then replicated)", l.TP, fp.KVHeads)
	case l.Seq%l.CP != 0 || (l.CP > 1 && (l.Seq/l.CP)%2 != 0):
		return fmt.Errorf("cp %d must split seq %d into an even number of tokens per rank (two chunks each, for causal balance)", l.CP, l.Seq)
	case l.GBS%(l.MBS*l.DP) != 0:
		return fmt.Errorf("gbs %d must be divisible by mbs %d x dp %d", l.GBS, l.MBS, l.DP)
	case l.ZeRO < 0 || l.ZeRO > 3:
		return fmt.Errorf("zero stage %d: want 0, 1, 2 or 3", l.ZeRO)
	case l.ETP < 0 || (l.ETP > 0 && l.TP%l.ETP != 0):
		return fmt.Errorf("etp %d must divide tp %d", l.ETP, l.TP)
	case l.EP > 1 && l.EP*l.etp() > l.TP*l.CP*l.DP:
		return fmt.Errorf("ep %d x etp %d experts' shards need more GPUs than a pipeline stage's TP x CP x DP = %d", l.EP, l.etp(), l.TP*l.CP*l.DP)
	case fp.MoE != nil && fp.MoE.RoutedExperts%l.EP != 0:
		return fmt.Errorf("ep %d must divide the %d routed experts", l.EP, fp.MoE.RoutedExperts)
	case l.MTP < 0:
		return fmt.Errorf("mtp depth %d: want >= 0", l.MTP)
	case l.Replicas < 0 || (l.Replicas > 1 && (l.DP*l.CP)%l.Replicas != 0):
		return fmt.Errorf("hsdp replicas %d must divide dp %d x cp %d", l.Replicas, l.DP, l.CP)
	case l.Replicas > 1 && l.Stage() < 1:
		return fmt.Errorf("hsdp replicas shard within a group and replicate across: they need a sharding stage (zero >= 1 or fsdp)")
	}
	if fp.Layers > 0 {
		if err := l.validatePipeline(fp.Layers); err != nil {
			return err
		}
	}
	if err := l.validateMoE(fp); err != nil {
		return err
	}
	if l.ActFP8InputStore {
		switch {
		case l.framework() != Megatron:
			return fmt.Errorf("act-fp8-input-store is Megatron's activation_func_fp8_input_store: it needs --framework megatron (the run is %s)", l.framework())
		case !fp.GatedMLP || fp.GLUClamp > 0 || (fp.Activation != "" && fp.Activation != "silu" && fp.Activation != "swish"):
			// TransformerConfig.__post_init__: "Storing activation input in FP8 is supported only
			// for SwiGLU." (F.silu, gated); GPT-OSS's clamped GLU runs Megatron's quick_gelu
			return fmt.Errorf("act-fp8-input-store: Megatron stores the activation input in FP8 for SwiGLU only (the model's MLP is %s)", mlpKind(fp))
		}
	}
	if l.FP8Attention && (l.framework() != Megatron || !fp8AttentionRecipes[l.Precision]) {
		// a run file's row as much as a flag: attention in FP8 is Megatron's, under its FP8 recipes
		return fmt.Errorf("fp8 attention (fp8_dot_product_attention) runs Megatron's attention in the recipe's FP8: it needs the megatron framework and recipe fp8-cs, fp8-ds or mxfp8 (the run is %s, %s)", l.framework(), orBF16(l.Precision))
	}
	if l.OffloadActivations > 0 && l.framework() == Megatron {
		// Megatron's CPU offload (TransformerConfig.__post_init__ @d98e8a6) runs without
		// pipelining and without recompute, on fewer layers than the model has
		rc, _ := analyzer.ParseRecompute(l.Recompute)
		switch {
		case l.PP > 1:
			return fmt.Errorf("activation offload (--cpu-offloading-num-layers %d): Megatron offloads without pipeline parallelism (pp %d)", l.OffloadActivations, l.PP)
		case rc.Mode != "" && rc.Mode != "none":
			return fmt.Errorf("activation offload (--cpu-offloading-num-layers %d): Megatron offloads without activation recompute (recompute %s)", l.OffloadActivations, l.Recompute)
		case fp.Layers > 0 && l.OffloadActivations >= fp.Layers:
			return fmt.Errorf("activation offload of %d layers: Megatron offloads fewer layers than the model's %d", l.OffloadActivations, fp.Layers)
		}
	}
	return l.validateMemoryOptions()
}

// Step is a training step on the layout, and where its time goes. Seconds.
type Step struct {
	Layout     Layout  `json:"layout"`
	StepTime   float64 `json:"step_time"`
	Microbatch float64 `json:"microbatch_time"` // forward + backward of one micro-batch on the slowest stage
	Pipeline   float64 `json:"pipeline_time"`   // GA micro-batches plus the pipeline bubble
	Bubble     float64 `json:"bubble_time"`
	// Of the GA micro-batches: kernels (compute- and memory-bound, with launch latency) and the
	// exposed TP/SP, CP and EP collectives on the critical path.
	Kernels   float64 `json:"kernel_time"`
	LayerComm float64 `json:"layer_comm_exposed"`
	DPExposed float64 `json:"dp_exposed"` // gradient reduce-scatter and parameter all-gather not hidden
	Optimizer float64 `json:"optimizer_time"`
	// Offload is the exposed time of host offloading: the optimizer step on the CPU with its
	// gradient and weight transfers, weights streamed in, activations out and back.
	Offload float64 `json:"offload_time,omitempty"`
	// A2A is the slowest stage's expert all-to-all per micro-batch (MoE with EP > 1).
	A2A A2A `json:"a2a,omitempty"`
	// HostBound is how much of Kernels is the host issuing eager MoE layers' kernels slower than
	// the GPU runs them, the GPU idle after each forward layer's synchronization included (the
	// slowest stage, GA micro-batches; moeHostPace): what a CUDA graph would remove.
	HostBound float64 `json:"host_bound,omitempty"`
	// Casts is how much of Kernels is the low-precision recipe's casts (the fullest stage's
	// layers, GA micro-batches): what FP8 pays for its faster GEMMs (CastNote says how).
	Casts      float64 `json:"cast_time,omitempty"`
	TokensPerS float64 `json:"tokens_per_s"`
	// MFU with the report's F_theory (full-S^2 attention, as FlopCounterMode counts it), with
	// PaLM's 6N + 12·L·H·Q·T per token (MFU_6N), and HFU counting what the kernels execute
	// (recomputation included, causal attention halved).
	MFU   float64 `json:"MFU"`
	MFU6N float64 `json:"MFU_6N"`
	HFU   float64 `json:"HFU"`
	// Roofline is the ideal ceiling: GA micro-batches of the slowest stage at datasheet figures,
	// no bubble, no exposed communication. No run is faster.
	Roofline float64 `json:"T_roofline"`
}

// Train times one optimizer step of the layout. s carries the precision recipe; p is the
// chip's time model and peak the FLOP/s MFU is quoted against. domain is how many GPUs share
// the scale-up fabric: groups beyond it (DP groups spaced by TP x CP) cross the scale-out network.
func Train(m *analyzer.Model, s analyzer.Scenario, l Layout, p kernels.Predictor, peak float64, domain int64) (Step, error) {
	return NewTrainer(m, s, p, peak, domain).Train(l)
}

// Trainer times many layouts of one model: the counted micro-batch depends only on (TP, CP,
// EP, MBS, sequence, recompute, GA), so it is costed once per distinct key and reused, and
// evaluating a layout is a few predictions over tens of kernels.
type Trainer struct {
	// HostGBps is the host link per direction offloading uses (0: PCIeGen5GBps).
	HostGBps float64
	// Lanes are the time models of the training frameworks (the chip's lanes); a layout whose
	// framework has none is timed with the chip's own.
	Lanes  map[string]kernels.Predictor
	m      *analyzer.Model
	s      analyzer.Scenario
	p      kernels.Predictor
	peak   float64
	domain int64
	cache  map[stepKey]analyzer.Step
	// phaseCache holds each step's forward phases per time model (phases)
	phaseCache map[phaseKey]phaseTimes
}

type stepKey struct {
	tp, cp, ep, etp, mbs, seq, ga int64
	recompute, optimizer, recipe  string
	eager                         float64
	lowPrecisionLMHead            bool
	fusedGroupedMLP, biasFP32     bool
	eagerRoPE                     bool
	castAct, castWeights          float64 // the recipe's casts as the framework runs them (castBytes)
	fp8Attention                  bool
	unfusedGLU                    bool
	legacyExperts16               bool // the legacy GroupedMLP's 16-bit experts (LegacyExperts16)
}

// PCIeGen5GBps is a PCIe Gen5 x16 link per direction, 16 lanes x 32 GT/s x 128/130: the host
// link offloading uses where the chip names none.
const PCIeGen5GBps = 63

// NewTrainer prepares layouts of m for the time model p.
func NewTrainer(m *analyzer.Model, s analyzer.Scenario, p kernels.Predictor, peak float64, domain int64) *Trainer {
	return &Trainer{m: m, s: s, p: p, peak: peak, domain: domain, cache: map[stepKey]analyzer.Step{}}
}

// TrainerFor is the trainer every command builds for a chip target: its achievable time model
// and peak, its scale-up domain, the host link offloading uses, and the time models of the
// training frameworks fitted on it (the chip's lanes).
func TrainerFor(m *analyzer.Model, s analyzer.Scenario, t analyzer.Target) (*Trainer, error) {
	tr := NewTrainer(m, s, t.Predictor, t.Peak, int64(t.Chip.Efficiency.ScaleUpDomain))
	tr.HostGBps = t.Chip.HostGBps
	lanes, err := timing.Lanes(t.Chip, t.DType)
	if err != nil {
		return nil, err
	}
	tr.Lanes = lanes
	return tr, nil
}

// With is tr timing with another predictor on chip (a chip's other efficiency figures, as a
// fit tries them: p is already the framework's lane, so no lanes), sharing the counted steps:
// counting does not depend on the time model.
func (tr *Trainer) With(p kernels.Predictor, peak float64, chip chips.Chip) *Trainer {
	out := *tr
	out.p, out.peak, out.domain, out.Lanes = p, peak, int64(chip.Efficiency.ScaleUpDomain), nil
	out.HostGBps = chip.HostGBps // the host link activation offload uses (GB200's C2C, PCIe)
	return &out
}

// key is what the step of l depends on: layouts that share it share the step's kernels.
func (tr *Trainer) key(l Layout) stepKey {
	castAct, castWeights := l.castBytes()
	return stepKey{l.TP, l.CP, l.EP, l.ETP, l.MBS, l.Seq, l.GA(), l.Recompute, l.Optimizer, l.Precision, tr.eager(l), l.FP8OutputProj,
		l.FusedGroupedMLP, megatronBiasFP32(l), megatronRoPE(l), castAct, castWeights, l.FP8Attention, l.NoSwiGLUFusion, l.LegacyExperts16()}
}

// LegacyExperts16: Megatron's legacy GroupedMLP under a low-precision recipe runs the routed
// experts' GEMMs in 16 bits (analyzer.Scenario's HighPrecisionExperts): grouped_gemm's gmm has
// no FP8 path, so the experts keep no low-precision weight copies and quantize nothing.
func (l Layout) LegacyExperts16() bool {
	return l.GroupedGEMM == GroupedLegacy && l.lowPrecision()
}

// megatronBiasFP32: Megatron's unfused expert MLP adds an expert output bias in fp32 outside the
// GEMM (and clamps a clamped GLU's input in eager PyTorch: Scenario.EagerGLUClamp).
func megatronBiasFP32(l Layout) bool {
	return (l.Framework == "" || l.Framework == Megatron) && !l.FusedGroupedMLP
}

// megatronRoPE: Megatron applies a YaRN-scaled RoPE in eager PyTorch (Scenario.EagerScaledRoPE).
func megatronRoPE(l Layout) bool { return l.Framework == "" || l.Framework == Megatron }

func (tr *Trainer) step(l Layout) (analyzer.Step, error) {
	k := tr.key(l)
	eager, biasFP32, rope, castAct, castWeights := k.eager, k.biasFP32, k.eagerRoPE, k.castAct, k.castWeights
	if st, ok := tr.cache[k]; ok {
		return st, nil
	}
	sc := tr.s
	sc.Batch, sc.Seq, sc.TP, sc.CP, sc.EP, sc.ETP, sc.GradAccum = l.MBS, l.Seq, l.TP, l.CP, l.EP, l.ETP, l.GA()
	if l.Recompute != "" {
		sc.Recompute = l.Recompute
	}
	// the optimizer the memory model holds is the one the step updates: fp32 master weights
	// and its moments read and written, its FLOPs per parameter
	opt := l.optimizer()
	sc.OptimizerStateBytes, sc.OptimizerFLOPs = 4+opt.StateBytes, opt.FLOPs
	sc.CastBytes, sc.CastWeightBytes = castAct, castWeights
	sc.CastSequenceShards = l.framework() == Megatron && l.TP > 1 // Megatron's TP runs sequence-parallel
	sc.LowPrecisionLMHead, sc.BlockScaled = l.FP8OutputProj, l.Precision == "mxfp8"
	sc.FusedGroupedMLP = l.FusedGroupedMLP
	sc.FP8Attention = l.FP8Attention
	sc.ExpertBiasFP32 = biasFP32
	sc.EagerGLUClamp = biasFP32 // the same unfused expert MLP clamps a clamped GLU eagerly
	sc.EagerScaledRoPE = rope
	sc.UnfusedGLU = k.unfusedGLU
	sc.HighPrecisionExperts = k.legacyExperts16
	prof := analyzer.Achievable
	if eager > 1 {
		prof.Elementwise *= eager // eager PyTorch: each elementwise op its own kernel
	}
	st, err := tr.m.AnalyzeTotals(analyzer.Training, sc, prof)
	if err != nil {
		return st, err
	}
	tr.cache[k] = st
	return st, nil
}

// Train times one layout.
func (tr *Trainer) Train(l Layout) (Step, error) {
	m, peak := tr.m, tr.peak
	p := tr.predictor(l)
	if err := l.Validate(m.Fingerprint); err != nil {
		return Step{}, err
	}
	st := Step{Layout: l}
	step, err := tr.step(l)
	if err != nil {
		return st, err
	}
	sk := splitKernels(step)
	sk.fwd = tr.phases(l, p, sk)
	L := max(m.Fingerprint.Layers, 1)
	slow := tr.slowestStage(l, p, sk)
	mb := slow.t
	st.Microbatch = slow.mb
	st.A2A = slow.a2a
	if part := l.partialRecompute(L); part < 1 {
		// recompute only some layers: the extra forward scales with the share recomputed
		none := l
		none.Recompute, none.RecomputeLayers = "none", 0
		base, err := tr.Train(none)
		if err != nil {
			return st, err
		}
		st.Microbatch = base.Microbatch + part*(st.Microbatch-base.Microbatch)
	}
	ga := float64(l.GA())
	st.HostBound = ga * math.Min(slow.host, st.Microbatch)
	st.Casts = ga * castTime(p, sk.layers, l, L)
	if st.Microbatch > 0 {
		// the exposed collectives' share of a micro-batch: TP/SP and CP, and the all-to-all
		share := math.Min(1, (mb.TComm+slow.a2a.Exposed)/st.Microbatch)
		st.LayerComm = ga * st.Microbatch * share
		st.Kernels = ga*st.Microbatch - st.LayerComm
	}
	st.Bubble = l.bubble(slow, st.Microbatch)
	st.Pipeline = ga*st.Microbatch + st.Bubble

	st.DPExposed = tr.dataParallel(l, p, st.Microbatch, ga)
	// The optimizer: the analyzer amortized one Adam step over GA micro-batches for the
	// parameters of all layers on this TP rank; a stage holds 1/PP of them, and the
	// distributed optimizer updates 1/DP of those.
	shard := ga / float64(l.PP)
	if l.Stage() >= 1 {
		shard /= l.ShardGroup()
	}
	if l.A2AOverlap == OverlapDualPipe {
		shard *= 2 // two copies of the stage's parameters
	}
	opt := make([]kernels.Kernel, len(sk.opt))
	for i, k := range sk.opt {
		opt[i] = scaled(k, shard)
	}
	if len(opt) > 0 {
		st.Optimizer = p.Predict(opt).TEst
	}
	st.Offload = tr.offload(l, st.Microbatch)
	if l.cpuOptimizer() {
		st.Optimizer = 0 // the CPU updates; its time is in Offload
	}
	st.StepTime = st.Pipeline + st.DPExposed + st.Optimizer + st.Offload
	st.Roofline = ga * mb.TRoofline
	tokens := float64(l.GBS * l.Seq)
	st.TokensPerS = tokens / st.StepTime
	// model FLOPs of the whole step: one micro-batch's F_theory on this GPU x its share
	gpus := float64(l.GPUs())
	fPerSeq := step.Cost.FTheory * float64(l.TP*l.CP) / float64(l.MBS) // undo the TP and CP split
	st.MFU = fPerSeq * float64(l.GBS) / (gpus * peak * st.StepTime)
	fp := m.Fingerprint
	perToken := 6*m.Active + 12*float64(fp.Layers*fp.Heads*fp.HeadDim*l.Seq)
	st.MFU6N = perToken * tokens / (gpus * peak * st.StepTime)
	exec := step.Cost.FExecuted * float64(l.TP*l.CP) / float64(l.MBS)
	st.HFU = exec * float64(l.GBS) / (gpus * peak * st.StepTime)
	return st, nil
}

// dataParallel is the exposed time of the data-parallel collectives in one step.
//
// Gradients are reduce-scattered and parameters all-gathered over the shard group (DP x CP /
// Replicas: context-parallel ranks hold the same weights as their data-parallel peers, so
// Megatron's DP-with-CP group and torchtitan's dp_shard_cp mesh shard over both). Stage 0-2:
// once per step, overlapped with the last micro-batch's backward and the first's forward
// (Megatron's bucketed overlap). Stage 3 (FSDP, Megatron FSDP): every micro-batch gathers each
// layer's weights before its forward (and again before its backward when it reshards after the
// forward, as FSDP2 does without PP) and reduce-scatters its gradients after, one layer ahead of
// compute (prefetch), so only what outlasts the micro-batch and the first gather and last
// reduce-scatter, which nothing precedes or follows, are exposed. HSDP then all-reduces each
// shard's gradients across the Replicas groups once per step.
func (tr *Trainer) dataParallel(l Layout, p kernels.Predictor, microbatch, ga float64) float64 {
	shardN := l.ShardGroup()
	if l.DP*l.CP <= 1 {
		return 0
	}
	sp := tr.split(l)
	params := sp.Trainable
	gathered := params // ZeRO-3 gathers every weight, trainable or not
	if l.Stage() == 3 || l.framework() == FSDP {
		gathered = sp.Trainable + sp.Frozen
	}
	// the shard group's ranks are spaced by TP (Megatron's tp-cp-ep-dp order, torchtitan's mesh
	// with dp_shard inside dp_replicate): inside the scale-up domain while TP x group fits in it
	tier := kernels.ScaleUp
	if float64(l.TP)*shardN > float64(tr.domain) {
		tier = kernels.ScaleOut
	}
	// ranks of the group inside one domain: the domain's GPUs over the TP ranks between two of
	// the group's (its CP and DP ranks are all members; HSDP's replicas and PP stages are not)
	perDomain := math.Max(1, math.Min(shardN, math.Floor(float64(tr.domain)/float64(l.TP))))
	// the routed experts' gradients reduce (and, sharded, gather) over the expert data-parallel
	// group instead: the ranks holding the same experts, spaced by EP x ETP, none when EP spans
	// the data-parallel ranks (Megatron's expert_data_parallel_group)
	experts := tr.expertParams(l)
	eshard := l.ExpertShardGroup()
	espan := float64(max(l.EP, 1) * l.etp())
	etier := kernels.ScaleUp
	if espan*eshard > float64(tr.domain) {
		etier = kernels.ScaleOut
	}
	ePerDomain := math.Max(1, math.Min(eshard, math.Floor(float64(tr.domain)/espan)))
	coll := func(c kernels.Coll, msg, ranks float64, tier kernels.Tier) float64 {
		if experts <= 0 || params <= 0 {
			return tr.dpCollective(p, c, msg, ranks, tier, perDomain)
		}
		// msg is per parameter here: the dense share over the group, the experts' over theirs
		per := msg / params
		t := tr.dpCollective(p, c, per*(params-experts), ranks, tier, perDomain)
		if eshard > 1 {
			t += tr.dpCollective(p, c, per*experts, eshard, etier, ePerDomain)
		}
		return t
	}
	var exposed float64
	gradB, paramB := l.dpBytes()
	// Stage 0-2 overlap bucket by bucket: a bucket's collective starts when the backward has
	// produced its gradients (or, gathering, before the forward reaches its layers), so the
	// last bucket's reduction and the first bucket's gather are exposed however long the
	// micro-batch, and the rest hides behind the backward (2/3 of it) and the forward (1/3).
	nb := math.Max(1, math.Ceil(params/l.bucketParams(shardN)))
	overlap := func(comm, window float64) float64 {
		return math.Max(comm/nb, comm-(1-1/nb)*window)
	}
	rs, ag := coll(kernels.ReduceScatter, params*gradB, shardN, tier), coll(kernels.AllGather, gathered*paramB, shardN, tier)
	switch l.Stage() {
	case 0:
		exposed = overlap(coll(kernels.AllReduce, params*gradB, float64(l.DP*l.CP), tier), 2.0/3*microbatch)
	case 3:
		gathers := 2.0
		if l.keepGathered() {
			gathers = 1 // the stage stays gathered from the forward to the backward
		}
		layers := float64(l.StageLayers(max(tr.m.Fingerprint.Layers, 1)))
		perMB := gathers*ag + rs
		exposed = ga * (math.Max(0, perMB-microbatch) + (ag+rs)/layers)
	default:
		exposed = overlap(rs, 2.0/3*microbatch) + overlap(ag, 1.0/3*microbatch)
	}
	if r := float64(l.Replicas); r > 1 {
		// HSDP: each shard's gradients all-reduced across the replicas, over the scale-out
		// network (across nodes, or TPU slices over the data-center network)
		// (one rank of each replica group per domain: each all-reduces its own shard on its NIC)
		exposed += math.Max(0, tr.dpCollective(p, kernels.AllReduce, params*2/shardN, r, kernels.ScaleOut, 1)-2.0/3*microbatch)
	}
	return exposed
}

// dpBytes are the bytes per parameter of the data-parallel gradient reduction and parameter
// gather. Megatron reduces gradients in fp32 unless grad_reduce_in_fp32 is off (BF16Grads:
// arguments.py turns accumulate_allreduce_grads_in_fp32 on with --bf16; Megatron-Bridge's
// performance configs turn it off) and gathers FP8 parameters in one byte (FP8ParamGather);
// the others communicate in the 16-bit training dtype (DDP and DeepSpeed by default; FSDP's
// stage-3 traffic is ShardTraffic's).
func (l Layout) dpBytes() (grad, param float64) {
	grad, param = 2, 2
	if l.framework() == Megatron {
		if !l.BF16Grads {
			grad = 4
		}
		if l.FP8ParamGather {
			param = 1
		}
	}
	return grad, param
}

// bucketParams is how many parameters one data-parallel bucket holds: Megatron's
// max(40M, 1M x DP) (megatron/training/training.py, ddp_bucket_size unset), DeepSpeed's
// reduce_bucket_size of 5e8 elements, PyTorch DDP's 25 MiB of 16-bit gradients.
func (l Layout) bucketParams(dp float64) float64 {
	switch {
	case l.framework() == Megatron:
		return math.Max(40e6, 1e6*dp)
	case l.Stage() >= 1:
		return 5e8
	}
	return 25 << 20 / 2
}

// dpCollective is one data-parallel collective's time: msg bytes over ranks GPUs on tier, with
// perDomain of them in each scale-up domain (multi-rail rings across domains).
func (tr *Trainer) dpCollective(p kernels.Predictor, c kernels.Coll, msg, ranks float64, tier kernels.Tier, perDomain float64) float64 {
	if ranks <= 1 {
		return 0
	}
	return p.Predict([]kernels.Kernel{{Name: "dp", Category: "network", Kind: kernels.Collective, Coll: c, Count: 1,
		Ranks: ranks, Message: msg, Tier: tier, Exposed: 1, DomainRanks: perDomain}}).TEst
}

// eager is the elementwise byte multiplier of the layout's framework: eager PyTorch (fsdp or
// deepspeed without torch.compile) pays its lane's eager_elementwise; Megatron's and compiled
// models' fused kernels pay 1.
func (tr *Trainer) eager(l Layout) float64 {
	if l.framework() == Megatron || l.Compile {
		return 1
	}
	if e, ok := tr.predictor(l).(interface{ EagerElementwise() float64 }); ok {
		return max(e.EagerElementwise(), 1)
	}
	return 1
}

// ShardTraffic is what one GPU sends per decoder layer in the sharded data-parallel collectives
// of one micro-batch under ZeRO-3/FSDP: the layer's 16-bit weights all-gathered from the shard
// group and its gradients reduce-scattered to it, each (n-1)/n of the layer's bytes.
func ShardTraffic(m *analyzer.Model, l Layout) (allGather, reduceScatter float64) {
	n := l.ShardGroup()
	if n <= 1 {
		return 0, 0
	}
	sum := summarize(m)
	L := float64(max(m.Fingerprint.Layers, 1))
	var layer, trainable float64
	for e, div := range [3]float64{float64(l.TP), float64(l.EP * l.etp()), 1} {
		g := sum.layers[e]
		layer += (g.trainable + g.frozen + g.quantized) / div / L
		trainable += g.trainable / div / L
	}
	f := (n - 1) / n
	return 2 * layer * f, 2 * trainable * f
}

// keepGathered says whether FSDP keeps the stage's gathered weights from the forward to the
// backward: asked for, or under pipelining as torchtitan runs it.
func (l Layout) keepGathered() bool {
	return l.NoReshard || l.PP > 1 && l.framework() == FSDP
}

// predictor is the time model of the layout's framework (its lane), or the chip's.
func (tr *Trainer) predictor(l Layout) kernels.Predictor {
	if p, ok := tr.Lanes[l.framework()]; ok && p != nil {
		return p
	}
	return tr.p
}

// HostPace is the host's time per kernel of an eager MoE layer (seconds) in l's time model,
// and the kernels one MoE layer issues per micro-batch (Layout.MoELaunches): what a host-bound
// step is paced by. Zero where the time model has no host pace.
func (tr *Trainer) HostPace(l Layout) (launch, kernels float64) {
	h, ok := tr.predictor(l).(interface{ MoELaunch() float64 })
	if !ok || tr.m.Fingerprint.MoE == nil {
		return 0, 0
	}
	return h.MoELaunch(), l.MoELaunches(tr.m.Fingerprint)
}

// offload is the exposed time of host offloading in one step, at the host link's bandwidth:
//   - optimizer (ZeRO-Offload): this GPU's gradient shard out and its weights back in 16 bits,
//     and the CPU's Adam over the shard at host memory bandwidth, after the backward;
//   - parameters (ZeRO-Infinity): the stage's weights streamed in for every micro-batch's
//     forward and backward, hidden behind that micro-batch's compute;
//   - activations (Transformer Engine CPU offload): the offloaded layers' activations out in
//     the forward and back in the backward, hidden behind the other layers' compute.
func (tr *Trainer) offload(l Layout, microbatch float64) float64 {
	bw := tr.HostGBps
	if bw <= 0 {
		bw = PCIeGen5GBps
	}
	bw *= 1e9
	var t float64
	sp := tr.split(l)
	ga := float64(l.GA())
	if l.cpuOptimizer() {
		shard := sp.Trainable
		if l.Stage() >= 1 {
			shard /= l.ShardGroup()
		}
		t += 2*2*shard/bw + shard*HostAdamBytesPerParam/(HostMemGBpsPerGPU*1e9)
	}
	if l.OffloadParams {
		stream := 2 * 2 * (sp.Trainable + sp.Frozen) // the whole stage passes through, forward and backward
		t += ga * math.Max(0, stream/bw-microbatch)
	}
	if l.OffloadActivations > 0 {
		a := activationBytes(tr.m, l, true)
		perMB := a.offloaded / l.inFlight(true)
		L := max(tr.m.Fingerprint.Layers, 1)
		share := float64(min(l.OffloadActivations, l.StageLayers(L))) / float64(l.StageLayers(L))
		t += ga * math.Max(0, 2*perMB/bw-(1-share)*microbatch)
	}
	return t
}

// expertParams is the trainable routed-expert parameters per GPU, averaged over the pipeline
// stages as split's are.
func (tr *Trainer) expertParams(l Layout) float64 {
	if len(tr.m.Ops) == 0 {
		return 0
	}
	sum := summarize(tr.m)
	var n float64
	for _, g := range []paramGroup{sum.layers, sum.embedding, sum.head, sum.final} {
		n += g[1].trainable / float64(l.EP*l.etp()) / float64(l.PP)
	}
	return n
}

// split is one GPU's trainable and frozen parameters, the stages' average (as the time model's
// per-stage kernels are).
func (tr *Trainer) split(l Layout) analyzer.ParamSplit {
	if len(tr.m.Ops) == 0 {
		return analyzer.ParamSplit{Trainable: tr.m.ParamsPerGPU(l.TP, l.PP, l.EP, l.ETP)}
	}
	sum := summarize(tr.m)
	var s analyzer.ParamSplit
	for _, g := range []paramGroup{sum.layers, sum.embedding, sum.head, sum.final} {
		for e, div := range [3]float64{float64(l.TP), float64(l.EP * l.etp()), 1} {
			s.Trainable += g[e].trainable / div / float64(l.PP)
			s.Frozen += (g[e].frozen + g[e].quantized) / div / float64(l.PP)
		}
	}
	return s
}

// cpuOptimizer: the optimizer step runs on the host (ZeRO-Offload, or FSDP's CPU offload).
func (l Layout) cpuOptimizer() bool {
	return l.OffloadOptimizer || (l.OffloadParams && l.framework() == FSDP)
}

func scaled(k kernels.Kernel, f float64) kernels.Kernel {
	k.Count *= f
	k.FLOPs *= f
	k.VectorFLOPs *= f
	k.Bytes *= f
	return k
}

// AnalyzeFlags are the `mrep analyze --phase training` flags that time exactly this layout
// (defaults left out), as argument words (a flag, then its value), so a plan's row can be
// reproduced to the digit; the precision recipe, chip and dtypes are the command's own flags,
// given to both.
func (l Layout) AnalyzeFlags() []string {
	var f []string
	num := func(name string, v, def int64) {
		if v != def && v != 0 {
			f = append(f, "--"+name, fmt.Sprint(v))
		}
	}
	f = append(f, "--gpus", fmt.Sprint(l.GPUs()), "--gbs", fmt.Sprint(l.GBS), "-s", fmt.Sprint(l.Seq), "--mbs", fmt.Sprint(l.MBS))
	num("tp", l.TP, 1)
	num("pp", l.PP, 1)
	num("vp", l.VP, 1)
	num("cp", l.CP, 1)
	num("ep", l.EP, 1)
	if l.ETP > 0 && l.ETP != l.TP {
		f = append(f, "--etp", fmt.Sprint(l.ETP))
	}
	f = append(f, "--zero", fmt.Sprint(l.Stage()))
	if l.Recompute != "" && l.Recompute != "none" {
		f = append(f, "--recompute", l.Recompute)
	}
	num("recompute-layers", l.RecomputeLayers, 0)
	num("first-stage-layers", l.FirstStageLayers, 0)
	num("last-stage-layers", l.LastStageLayers, 0)
	if l.NoSP {
		f = append(f, "--no-sp")
	}
	for _, s := range []struct{ name, v string }{{"framework", l.Framework}, {"optimizer", l.Optimizer},
		{"dispatcher", l.Dispatcher}, {"a2a-overlap", l.A2AOverlap}, {"grouped-gemm", l.GroupedGEMM}, {"routing", l.Routing}} {
		if s.v != "" {
			f = append(f, "--"+s.name, s.v)
		}
	}
	num("offload-activations", l.OffloadActivations, 0)
	num("sync-free-moe", l.SyncFreeMoE, 0)
	num("mtp", l.MTP, 0)
	num("hsdp-replicas", l.Replicas, 1)
	for _, b := range []struct {
		name string
		on   bool
	}{{"compile", l.Compile}, {"pipeline-account", l.EmbeddingInPipe || l.LossInPipe}, {"fp8-param-gather", l.FP8ParamGather}, {"fp8-output-proj", l.FP8OutputProj}, {"fp8-dot-product-attention", l.FP8Attention}, {"fused-grouped-mlp", l.FusedGroupedMLP}, {"act-fp8-input-store", l.ActFP8InputStore},
		{"tp-overlap", l.TPOverlap}, {"no-reshard", l.NoReshard}, {"cuda-graph", l.CUDAGraph}, {"fp8-dispatch", l.FP8Dispatch}, {"no-bias-swiglu-fusion", l.NoSwiGLUFusion}} {
		if b.on {
			f = append(f, "--"+b.name)
		}
	}
	if l.Stack != "" {
		f = append(f, "--stack", l.Stack)
	}
	switch l.ParamDType {
	case "bf16", "fp32":
		f = append(f, "--param-dtype", l.ParamDType)
	default:
		if l.Stack != "" && Stacks[l.Stack].ParamDType != "" {
			f = append(f, "--param-dtype", "mixed")
		}
	}
	if l.Loss != "" {
		f = append(f, "--loss", l.Loss)
	}
	if l.OffloadCheckpoints {
		f = append(f, "--offload", "checkpoints")
	}
	if l.OffloadOptimizer {
		f = append(f, "--offload", "optimizer")
	}
	if l.OffloadParams {
		f = append(f, "--offload", "params")
	}
	return f
}

// RecipeOn says whether chip runs the low-precision recipe's GEMMs: the block-scaled formats
// (MXFP8's E8M0 scales per 32, NVFP4's E4M3 scales per 16) are tensor-core instructions of the
// generation that brought FP4 (Blackwell; CDNA4 for the MX formats), and NVFP4 is NVIDIA's
// format. Transformer Engine refuses MXFP8 and NVFP4 recipes before Blackwell; timing them on a
// Hopper would quote a speed no Hopper runs.
func RecipeOn(recipe string, chip chips.Chip) error {
	fp4 := chip.PeakTFLOPs["fp4"] > 0
	switch strings.ToLower(recipe) {
	case "mxfp8":
		if !fp4 {
			return fmt.Errorf("--recipe mxfp8: block-scaled MXFP8 GEMMs need Blackwell or CDNA4 tensor cores, and %s has none (use fp8-cs or fp8-blockwise there)", chip.Name)
		}
	case "nvfp4":
		if !fp4 || chip.Vendor != "NVIDIA" {
			return fmt.Errorf("--recipe nvfp4: NVFP4 GEMMs need NVIDIA Blackwell FP4 tensor cores, and %s has none", chip.Name)
		}
	}
	return nil
}

// mlpKind names a model's MLP in messages: its activation, gated or not.
func mlpKind(fp analyzer.Fingerprint) string {
	a := fp.Activation
	if fp.GLUClamp > 0 {
		a += fmt.Sprintf(" clamped at %g", fp.GLUClamp)
	}
	if a == "" {
		a = "of an unnamed activation"
	}
	if fp.GatedMLP {
		return "gated " + a
	}
	return "ungated " + a
}
