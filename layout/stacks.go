package layout

import (
	"fmt"
	"sort"
	"strings"
)

// This file is the fine-tuning stacks people run, as presets of what each holds per GPU: the
// precision policy of trainable parameters, the optimizer, activation checkpointing, how the
// loss holds the logits, offload, and the framework whose sharding and time model apply. Each
// preset cites the code that sets its defaults; flags given on the command line win.

// Loss modes (Layout.Loss).
const (
	LossEager   = "eager"
	LossChunked = "chunked"
	LossFused   = "fused"
)

// Losses lists the loss modes a layout accepts ("" is the framework's own).
var Losses = []string{LossEager, LossChunked, LossFused}

// Stack is a fine-tuning stack's defaults.
type Stack struct {
	Name, Title string
	// Source is where the defaults come from.
	Source string
	// Framework is whose sharding and time model apply (megatron, fsdp, deepspeed), and ZeRO the
	// sharding stage it runs on several GPUs (0: each GPU a full replica, PyTorch DDP).
	Framework string
	ZeRO      int
	// ParamDType of trainable parameters ("" mixed precision, bf16, fp32), Optimizer, Loss.
	ParamDType, Optimizer, Loss string
	// Recompute is the default activation checkpointing; QuantRecompute replaces it when the
	// base is quantized (QLoRA preparation turns checkpointing on).
	Recompute, QuantRecompute string
	// Compile: fused kernels (Triton or torch.compile) keep no eager intermediates.
	Compile bool
	// FP32Norms: eager RMSNorm modules that upcast keep an fp32 copy of their input.
	FP32Norms bool
	// OffloadCheckpoints and UpcastUnquantized as on Layout.
	OffloadCheckpoints, UpcastUnquantized bool
	// DataParallelOnly: the stack splits a model over GPUs only by sharding (DDP, ZeRO, FSDP);
	// it has no tensor, pipeline or context parallel a planner could choose.
	DataParallelOnly bool
}

// Stacks are the fine-tuning stacks mrep knows.
var Stacks = map[string]Stack{
	"hf": {Name: "hf", Title: "Hugging Face Trainer + PEFT (+ bitsandbytes for QLoRA)",
		Source: "transformers TrainingArguments (gradient_checkpointing off, optim adamw_torch, bf16 autocast), " +
			"peft tuners_utils _cast_adapter_dtype (autocast_adapter_dtype: adapters in fp32), " +
			"peft utils/other.py prepare_model_for_kbit_training (unquantized parameters to fp32, gradient checkpointing on), " +
			"transformers loss_utils ForCausalLMLoss (logits upcast to fp32), modeling_llama LlamaRMSNorm (fp32 upcast); DDP on several GPUs",
		Framework: DeepSpeed, ZeRO: 0, ParamDType: "fp32", Optimizer: "adamw", Loss: LossEager,
		Recompute: "none", QuantRecompute: "full", FP32Norms: true, UpcastUnquantized: true, DataParallelOnly: true},
	"torchtune": {Name: "torchtune", Title: "torchtune (single-device and FSDP2 recipes)",
		Source: "torchtune recipes/configs/*/*_lora*.yaml and *_full*.yaml (dtype bf16, enable_activation_checkpointing True, " +
			"loss CEWithChunkedOutputLoss, optimizer AdamW), torchtune/modules/rms_norm.py (fp32 upcast), recipes/lora_finetune_distributed.py (FSDP2)",
		Framework: FSDP, ZeRO: 3, ParamDType: "bf16", Optimizer: "adamw", Loss: LossChunked,
		Recompute: "full", QuantRecompute: "full", FP32Norms: true},
	"litgpt": {Name: "litgpt", Title: "Lightning LitGPT (finetune lora, full)",
		Source: "litgpt/finetune/lora.py and full.py (precision bf16-true, lm_head_chunk_size 128 with chunked_cross_entropy, " +
			"FSDPStrategy on several devices), litgpt/model.py RMSNorm (fp32 upcast)",
		Framework: FSDP, ZeRO: 3, ParamDType: "bf16", Optimizer: "adamw", Loss: LossChunked,
		Recompute: "none", QuantRecompute: "none", FP32Norms: true, DataParallelOnly: true},
	"unsloth": {Name: "unsloth", Title: "Unsloth",
		Source: "unsloth models/_utils.py Unsloth_Offloaded_Gradient_Checkpointer (use_gradient_checkpointing=\"unsloth\": layer inputs to host), " +
			"kernels/cross_entropy_loss.py (fused, gradient in place), kernels/rms_layernorm.py, swiglu.py, rope_embedding.py (Triton), " +
			"its notebooks' optim adamw_8bit and PEFT's fp32 adapters",
		Framework: DeepSpeed, ZeRO: 0, ParamDType: "fp32", Optimizer: "adam8bit", Loss: LossFused,
		Recompute: "full", QuantRecompute: "full", Compile: true, OffloadCheckpoints: true, DataParallelOnly: true},
	"nemo": {Name: "nemo", Title: "NeMo / Megatron-Bridge (SFT, LoRA)",
		Source: "Megatron-Core mixed precision (bf16 weights, fp32 main grads, distributed optimizer), fused vocab-parallel cross entropy; " +
			"megatron/bridge/peft/lora.py (adapters beside frozen linear_qkv, linear_proj, linear_fc1, linear_fc2)",
		Framework: Megatron, ZeRO: 1, Recompute: "none", QuantRecompute: "none"},
	"automodel": {Name: "automodel", Title: "NeMo AutoModel (PyTorch-native SFT and LoRA)",
		Source: "NVIDIA-NeMo/Automodel examples/llm_finetune/*_peft_benchmark.yaml @2013a4dd6 (FSDP2 over the data-parallel ranks, TP with " +
			"sequence parallel for the large models, activation checkpointing off on one GPU) and docs/performance-summary " +
			"('TE + triton' kernels: Transformer Engine linear, norm and RoPE kernels and Triton LoRA kernels, which fuse the elementwise ops eager PyTorch runs one by one)",
		Framework: FSDP, ZeRO: 3, Optimizer: "adamw", Recompute: "none", QuantRecompute: "full", Compile: true},
	"deepspeed": {Name: "deepspeed", Title: "DeepSpeed ZeRO (with the Hugging Face Trainer)",
		Source:    "DeepSpeed ZeRO (Rajbhandari et al. 2019: 2 + 2 + 12 bytes per parameter), its default 5e8-element buckets",
		Framework: DeepSpeed, ZeRO: 3, Optimizer: "adamw", Loss: LossEager, Recompute: "none", QuantRecompute: "full", FP32Norms: true, DataParallelOnly: true},
}

// StackNames lists the stacks, sorted.
func StackNames() []string {
	var out []string
	for n := range Stacks {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// LookupStack finds a stack by name (case-insensitive).
func LookupStack(name string) (Stack, error) {
	s, ok := Stacks[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return Stack{}, fmt.Errorf("stack %q: want one of %s", name, strings.Join(StackNames(), ", "))
	}
	return s, nil
}

// Knobs are the stack's settings as a training job's knobs.
func (s Stack) Knobs() Knobs {
	return Knobs{Framework: s.Framework, Optimizer: s.Optimizer, Compile: s.Compile, ParamDType: s.ParamDType, Loss: s.Loss,
		Stack: s.Name, OffloadCheckpoints: s.OffloadCheckpoints, UpcastUnquantized: s.UpcastUnquantized}
}

// Given says which of a job's settings its user (a flag, a row's field) stated; a stack fills
// in the others.
type Given struct{ Framework, Optimizer, Compile, OffloadCheckpoints bool }

// Fill puts the stack's defaults into k where g says the job left them unstated, and its
// precision policy (parameter dtype, loss, upcasting) always: the caller's --param-dtype and
// --loss override after. The one place a stack's knobs are applied (commands and rows alike);
// its ZeRO stage and checkpointing (DefaultRecompute) are the caller's to take, as they live
// in the plan's search and the scenario.
func (s Stack) Fill(k *Knobs, g Given) {
	def := s.Knobs()
	if !g.Framework {
		k.Framework = def.Framework
	}
	if !g.Optimizer {
		k.Optimizer = def.Optimizer
	}
	if !g.Compile {
		k.Compile = def.Compile
	}
	if !g.OffloadCheckpoints {
		k.OffloadCheckpoints = def.OffloadCheckpoints
	}
	k.ParamDType, k.Loss, k.Stack, k.UpcastUnquantized = def.ParamDType, def.Loss, def.Stack, def.UpcastUnquantized
}

// DefaultRecompute is the stack's checkpointing for a base that is quantized or not.
func (s Stack) DefaultRecompute(quantized bool) string {
	if quantized {
		return s.QuantRecompute
	}
	return s.Recompute
}

// fp32Norms: the layout's norms are eager modules that upcast (a stack's, not compiled).
func (l Layout) fp32Norms() bool {
	st, ok := Stacks[l.Stack]
	return ok && st.FP32Norms && !l.Compile
}
