package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/layout"
	"github.com/mrep-dev/mrep/serve"
	"github.com/mrep-dev/mrep/timing"
)

// chipDB is the embedded chips plus the user's --chips-file.
func chipDB(c *cli.Context) (*chips.DB, error) {
	db := chips.Default()
	if p := c.String("chips-file"); p != "" {
		f, err := openRegular(p)
		if err != nil {
			return nil, cli.Exit(fmt.Sprintf("chips file: %v", err), exitFailure)
		}
		defer f.Close()
		user, err := chips.Parse(p, f)
		if err != nil {
			return nil, cli.Exit(err.Error(), exitFailure)
		}
		if err := db.Merge(user); err != nil {
			return nil, cli.Exit(fmt.Sprintf("chips file %s: %v", p, err), exitFailure)
		}
	}
	return db, nil
}

// newTarget is a chip and precision with the achievable time model.
func newTarget(chip chips.Chip, dtype string) (analyzer.Target, error) {
	tm, err := timing.New(chip, dtype)
	if err != nil {
		return analyzer.Target{}, err
	}
	return analyzer.NewTarget(chip, dtype, tm)
}

// scenarioFlags are shared by analyze, report and diff.
func scenarioFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringSliceFlag{Name: "chip", Value: cli.NewStringSlice("H100-SXM"), Usage: "`CHIP` target(s), as `mrep chips` lists them; repeat for several"},
		&cli.StringFlag{Name: "engine", Usage: "serving engine whose fitted figures time prefill and decode where a chip has them (chips.json efficiency.lanes): trtllm, vllm, sglang, atom (AMD's ATOM, Instinct only) (default: vllm on AMD chips, trtllm elsewhere); training keeps the chip's or its framework's"},
		&cli.Int64Flag{Name: "batch", Aliases: []string{"b"}, Value: 1, Usage: "B: sequences per GPU step"},
		&cli.Int64Flag{Name: "seq", Aliases: []string{"s"}, Value: 2048, Usage: "S: prefill/training tokens per sequence"},
		&cli.Int64Flag{Name: "kv-len", Aliases: []string{"l"}, Usage: "L: decode KV length (default: --seq)"},
		&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "compute precision (chip peak) and default for weights and activations: fp32, tf32, bf16, fp16, fp8, int8, fp4"},
		&cli.StringFlag{Name: "weight-dtype", Usage: "weight precision (default: --dtype)"},
		&cli.StringFlag{Name: "act-dtype", Usage: "activation precision (default: --dtype)"},
		&cli.StringFlag{Name: "kv-dtype", Usage: "KV-cache precision (default: --act-dtype)"},
		&cli.StringFlag{Name: "grad-dtype", Usage: "weight-gradient precision in training (default: bf16)"},
		&cli.StringSliceFlag{Name: "exec", Value: cli.NewStringSlice(analyzer.DefaultProfile), Usage: "exec profile(s): achievable (the prediction), naive, efficient (the seed's knobs) or a JSON `FILE` of profiles"},
		&cli.Int64Flag{Name: "tp", Value: 1, Usage: "tensor parallel size"},
		&cli.Int64Flag{Name: "ep", Value: 1, Usage: "expert parallel size (DP = EP)"},
		&cli.Int64Flag{Name: "etp", Usage: "expert tensor parallel: ways each expert is split (default --tp); --tp 8 --ep 8 --etp 1 puts attention TP8 and experts EP8 on the same 8 GPUs"},
		&cli.StringFlag{Name: "recompute", Value: "none", Usage: "training activation recomputation: none, selective (Megatron's core_attn), selective:MOD,... (core_attn, mlp, layernorm, act), op (torchtitan's per-op), full"},
		&cli.Int64Flag{Name: "grad-accum", Value: 1, Usage: "training microbatches per optimizer step"},
		&cli.BoolFlag{Name: "seed-training", Usage: "the seed's training model: prefill x 3 FLOPs, x 2 bytes"},
		&cli.StringFlag{Name: "system", Usage: "a system (dgx-h100, gb200-nvl72, ...): its chip, scale-up domain and links become a target"},
		&cli.Int64Flag{Name: "pp", Value: 1, Usage: "training layout: pipeline parallel stages"},
		&cli.Int64Flag{Name: "vp", Value: 1, Usage: "training layout: virtual stages per pipeline rank (interleaved 1F1B)"},
		&cli.Int64Flag{Name: "cp", Value: 1, Usage: "training layout: context parallel"},
		&cli.Int64Flag{Name: "dp", Value: 1, Usage: "training layout: data parallel (or give --gpus)"},
		&cli.Int64Flag{Name: "gpus", Usage: "training layout: GPUs in the job (DP = GPUs / (TP x PP x CP))"},
		&cli.IntFlag{Name: "zero", Value: 1, Usage: "training layout: ZeRO stage over DP (1 = distributed optimizer, 0 = none, 2, 3)"},
		&cli.Int64Flag{Name: "mbs", Usage: "training layout: micro-batch (default -b)"},
		&cli.Int64Flag{Name: "gbs", Usage: "training layout: global batch (default mbs x dp x grad-accum)"},
		&cli.BoolFlag{Name: "no-sp", Usage: "training layout: without Megatron sequence parallel"},
		&cli.Int64Flag{Name: "recompute-layers", Usage: "training layout: with --recompute full, how many layers of each stage recompute (default all)"},
		&cli.Int64Flag{Name: "first-stage-layers", Usage: "training layout: decoder layers on the first pipeline stage, the rest split evenly (Megatron's --decoder-first-pipeline-num-layers; plan train's uneven splits print it)"},
		&cli.Int64Flag{Name: "last-stage-layers", Usage: "training layout: decoder layers on the last pipeline stage (Megatron's --decoder-last-pipeline-num-layers)"},
	}, trainingFlags()...)
}

// trainingFlags are what a training job holds beyond its layout's shape (analyze with a layout,
// plan train): framework, optimizer, offload, compile, and the fine-tune (frozen parameters,
// LoRA, QLoRA).
func trainingFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "framework", Value: "megatron", Usage: "training framework, for what each GPU holds: megatron (bf16 weights, fp32 main grads, distributed optimizer), fsdp (PyTorch FSDP2 as torchtitan: fp32 shards over DP x CP), deepspeed (ZeRO's 2 + 2 + 12 bytes)"},
		&cli.StringFlag{Name: "optimizer", Value: "adamw", Usage: "optimizer: adamw, adamw-bf16 (bf16 moments), adam8bit, adafactor, sgd (momentum)"},
		&cli.StringSliceFlag{Name: "offload", Usage: "offload to host memory: optimizer (ZeRO-Offload: master weights and moments, updated by the CPU), params (ZeRO-Infinity, with ZeRO-3), checkpoints (with --recompute full: each layer's saved input, as Unsloth's gradient checkpointing)"},
		&cli.Int64Flag{Name: "offload-activations", Usage: "layers whose activations go to host memory (Megatron/Transformer Engine --cpu-offloading-num-layers; Megatron offloads only without pipelining or recompute)"},
		&cli.BoolFlag{Name: "compile", Usage: "torch.compile (fsdp, deepspeed): fused elementwise ops keep no intermediates"},
		&cli.StringSliceFlag{Name: "freeze", Usage: "freeze parameters whose module (or module.param) name matches the glob `PATTERN` (e.g. 'model.embed_tokens', 'model.layers.[0-9].*'): no gradients, no optimizer state, no weight-gradient GEMMs"},
		&cli.Int64Flag{Name: "lora-rank", Usage: "LoRA: adapters of rank `R` beside the targeted linear layers; everything else is frozen"},
		&cli.StringSliceFlag{Name: "lora-targets", Usage: "LoRA: glob `PATTERN`s of the module names that get adapters (default: every attention and MLP linear layer)"},
		&cli.BoolFlag{Name: "qlora", Usage: "QLoRA: the LoRA base in 4-bit NF4 with double quantization (0.52 B per weight), dequantized for each pass"},
		&cli.StringFlag{Name: "base-dtype", Usage: "LoRA: the frozen base's storage: bf16, fp8 (Transformer Engine FP8 parameters with their transpose: NeMo's FP8 LoRA recipes), fp4 (NVFP4), nf4 (as --qlora)"},
		&cli.Float64Flag{Name: "lora-dropout", Usage: "LoRA: dropout on the adapters' input (PEFT lora_dropout): each adapted layer saves its own dropped-out input and mask"},
		&cli.StringFlag{Name: "stack", Usage: "fine-tuning `STACK` whose defaults apply (flags given win): " + strings.Join(layout.StackNames(), ", ") + " (each preset's defaults and sources: layout/stacks.go and the README)"},
		&cli.StringFlag{Name: "param-dtype", Usage: "trainable parameters: mixed (16-bit weights, fp32 master and gradients: the framework's), bf16 (pure bf16, moments in bf16 too: torchtune, LitGPT bf16-true), fp32 (fp32 parameters under autocast: the Hugging Face Trainer, PEFT's adapters)"},
		&cli.StringFlag{Name: "loss", Usage: "how the loss holds the logits: eager (16-bit logits, an fp32 copy and log-softmax), chunked (torchtune, LitGPT), fused (Unsloth: 16-bit logits, gradient in place); default the framework's"},
		&cli.StringFlag{Name: "recipe", Usage: "low-precision recipe with --dtype fp8/fp4: fp8-ds (delayed scaling), fp8-cs (current scaling), fp8-blockwise (DeepSeek-V3's blocks), mxfp8, nvfp4"},
		&cli.StringFlag{Name: "a2a-overlap", Usage: "MoE expert all-to-all schedule: none, 1f1b (Megatron's --overlap-moe-expert-parallel-comm), dualpipe (DeepSeek-V3's bidirectional pipeline)"},
		&cli.StringFlag{Name: "dispatcher", Usage: "MoE token dispatcher: alltoall (NCCL: a copy per expert), deepep (DeepEP: one copy per rank and per node), hybridep (NVL72); both send BF16 tokens under Megatron (--fp8-dispatch for DeepSeek-V3's FP8 dispatch)"},
		&cli.Int64Flag{Name: "mtp", Usage: "multi-token-prediction modules trained on the last stage (DeepSeek-V3: 1)"},
		&cli.BoolFlag{Name: "pipeline-account", Usage: "count the embedding and the loss as pipeline layers (Megatron's --account-for-embedding/loss-in-pipeline-split)"},
		&cli.BoolFlag{Name: "fp8-param-gather", Usage: "Megatron --fp8-param-gather: FP8 parameters, no 16-bit copy of the linear weights"},
		&cli.BoolFlag{Name: "fp8-dot-product-attention", Usage: "Megatron's fp8_dot_product_attention (Megatron-Bridge's mixed_precision.fp8_dot_product_attention; no pretrain_gpt.py flag): the attention core's matmuls in the recipe's FP8 too (--recipe mxfp8, fp8-cs or fp8-ds), timed with cuDNN's measured FP8 attention where the chip has it"},
		&cli.BoolFlag{Name: "fp8-output-proj", Usage: "Megatron --fp8-output-proj: the LM head under MXFP8 too (--recipe mxfp8); without it the LM head trains in 16-bit under every low-precision recipe"},
		&cli.BoolFlag{Name: "fused-grouped-mlp", Usage: "megatron MoE: the experts' activation and output bias in the grouped GEMMs' epilogues (Transformer Engine's CuTe DSL fused grouped MLP, NVTE_CUTEDSL_FUSED_GROUPED_MLP=1); without it the activation is a kernel of its own and the output bias is added in fp32 outside the GEMM"},
		&cli.BoolFlag{Name: "act-fp8-input-store", Usage: "megatron: the SwiGLU's input saved for its backward in FP8 (TransformerConfig.activation_func_fp8_input_store, set in a Megatron-Bridge config; DeepSeek-V3 keeps it so): 1 B per element of the FC1 output instead of 2, unless the activation is recomputed"},
		&cli.BoolFlag{Name: "no-reshard", Usage: "fsdp: keep each layer gathered from the forward to the backward (FSDP2 reshard_after_forward=False)"},
		&cli.BoolFlag{Name: "tp-overlap", Usage: "TP collectives overlapped with the GEMMs (Megatron --tp-comm-overlap, torchtitan async TP)"},
		&cli.BoolFlag{Name: "cuda-graph", Usage: "megatron: the whole step replayed from one CUDA graph (--cuda-graph-impl full_iteration): the host issues no kernels, so its pace never bounds the step"},
		&cli.StringFlag{Name: "grouped-gemm", Usage: "megatron MoE: how the routed experts' GEMMs are issued: te (Transformer Engine's GroupedLinear) or legacy (--moe-use-legacy-grouped-gemm: 16-bit experts under an FP8 recipe), a launch per local expert; turbo (Primus-Turbo's --use_turbo_grouped_gemm), one launch for all (default: te)"},
		&cli.Int64Flag{Name: "sync-free-moe", Usage: "megatron MoE on ROCm: Primus-Turbo's sync-free MoE `STAGE` (--turbo_sync_free_moe_stage 0-3); from 2 (with --grouped-gemm turbo --dispatcher deepep) no MoE layer waits on the host, so the host issues its kernels ahead"},
		&cli.BoolFlag{Name: "fp8-dispatch", Usage: "MoE with --dispatcher deepep and an FP8 recipe: the forward dispatch in FP8 with 1x128 scales, as DeepSeek-V3's own stack sends it (Megatron's DeepEP and HybridEP send BF16)"},
		&cli.BoolFlag{Name: "no-bias-swiglu-fusion", Usage: "megatron: the gated MLPs' activation as eager ops, the routed experts' router-weight scale in fp32 (Megatron's --no-bias-swiglu-fusion; Primus's Qwen3 configs set it): more passes, and the silu output and product kept"},
		&cli.StringFlag{Name: "routing", Usage: "MoE benchmarks' forced balance: uniform (random logits, Megatron's moe_router_force_load_balancing) or even (Primus's round-robin: a token's top-k experts are consecutive, so DeepEP sends it to fewer ranks) (default: uniform)"},
		&cli.Int64Flag{Name: "hsdp-replicas", Usage: "HSDP: shard within DP x CP / `R` ranks and replicate across R groups (torchtitan dp_replicate; TPU slices over the data-center network)"},
	}
}

// readKnobs reads the training settings that change memory (and the offload's time).
func readKnobs(c *cli.Context, dtype string) (layout.Knobs, error) {
	k := layout.Knobs{Framework: strings.ToLower(c.String("framework")), Optimizer: strings.ToLower(c.String("optimizer")),
		OffloadActivations: c.Int64("offload-activations"), Compile: c.Bool("compile"),
		A2AOverlap: strings.ToLower(c.String("a2a-overlap")), Dispatcher: strings.ToLower(c.String("dispatcher")), MTP: c.Int64("mtp"),
		PipelineAccount: c.Bool("pipeline-account"), FP8ParamGather: c.Bool("fp8-param-gather"), FP8OutputProj: c.Bool("fp8-output-proj"), FP8Attention: c.Bool("fp8-dot-product-attention"), FusedGroupedMLP: c.Bool("fused-grouped-mlp"), ActFP8InputStore: c.Bool("act-fp8-input-store"), Replicas: c.Int64("hsdp-replicas"), TPOverlap: c.Bool("tp-overlap"), NoReshard: c.Bool("no-reshard"), CUDAGraph: c.Bool("cuda-graph"),
		GroupedGEMM: strings.ToLower(c.String("grouped-gemm")), SyncFreeMoE: c.Int64("sync-free-moe"), Routing: strings.ToLower(c.String("routing")), FP8Dispatch: c.Bool("fp8-dispatch"), NoSwiGLUFusion: c.Bool("no-bias-swiglu-fusion")}
	if strings.Contains(k.Framework, ",") || k.Framework == "all" {
		k.Framework = layout.Megatron // plan train searches the list (planFrameworks)
	}
	if name := c.String("stack"); name != "" {
		st, err := layout.LookupStack(name)
		if err != nil {
			return k, fmt.Errorf("--%w", err)
		}
		st.Fill(&k, layout.Given{Framework: c.IsSet("framework"), Optimizer: c.IsSet("optimizer"), Compile: c.IsSet("compile"),
			OffloadCheckpoints: c.IsSet("offload")})
	}
	if c.IsSet("param-dtype") {
		switch v := strings.ToLower(c.String("param-dtype")); v {
		case "mixed":
			k.ParamDType = ""
		case "bf16", "fp32":
			k.ParamDType = v
		default:
			return k, fmt.Errorf("--param-dtype %q: want mixed, bf16 or fp32", c.String("param-dtype"))
		}
	}
	if c.IsSet("loss") {
		k.Loss = strings.ToLower(c.String("loss"))
	}
	if dtype == "fp8" || dtype == "mxfp8" {
		k.Precision = dtype
	}
	if r := strings.ToLower(c.String("recipe")); r != "" {
		if dtype != "fp8" && dtype != "fp4" {
			return k, fmt.Errorf("--recipe %s needs --dtype fp8 or fp4 (the GEMMs' precision)", r)
		}
		k.Precision = r
	}
	for _, o := range c.StringSlice("offload") {
		for _, part := range strings.Split(o, ",") {
			switch strings.TrimSpace(strings.ToLower(part)) {
			case "optimizer":
				k.OffloadOptimizer = true
			case "params":
				k.OffloadParams = true
			case "checkpoints":
				k.OffloadCheckpoints = true
			case "":
			default:
				return k, fmt.Errorf("--offload %q: want optimizer, params or checkpoints", part)
			}
		}
	}
	return k, nil
}

// planFrameworks is the lanes plan train searches: --framework megatron,fsdp (or all).
func planFrameworks(c *cli.Context) []string {
	v := strings.ToLower(c.String("framework"))
	if v == "all" {
		return layout.Frameworks
	}
	if !strings.Contains(v, ",") {
		return nil
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// readFineTune reads the fine-tune flags.
func readFineTune(c *cli.Context) (analyzer.FineTune, error) {
	f := analyzer.FineTune{Freeze: c.StringSlice("freeze"), LoRARank: c.Int64("lora-rank"), LoRATargets: c.StringSlice("lora-targets"), QLoRA: c.Bool("qlora"),
		BaseDType: strings.ToLower(c.String("base-dtype")), LoRADropout: c.Float64("lora-dropout")}
	if f.BaseDType == "nf4" {
		f.QLoRA, f.BaseDType = true, ""
	}
	if err := f.Validate(); err != nil {
		return f, fmt.Errorf("fine-tune: %w", err)
	}
	return f, nil
}

// trainingModel is the model a training command plans: the dump's, with the fine-tune applied.
func trainingModel(c *cli.Context, m *analyzer.Model) (*analyzer.Model, error) {
	f, err := readFineTune(c)
	if err != nil {
		return nil, cli.Exit(err.Error(), exitFailure)
	}
	ft, err := m.WithFineTune(f)
	if err != nil {
		return nil, cli.Exit("fine-tune: "+err.Error(), exitFailure)
	}
	return ft, nil
}

// readPrecision reads the precision flags into s, each defaulting as its usage says: weights
// and activations to --dtype, the KV cache to the activations, weight gradients to bf16. A
// command without one of the flags gets its default.
func readPrecision(c *cli.Context, s *analyzer.Scenario) error {
	// a flag a command does not have reads as "", its default
	if err := s.SetPrecision(analyzer.Precision{Compute: c.String("dtype"), Weight: c.String("weight-dtype"),
		Act: c.String("act-dtype"), KV: c.String("kv-dtype"), Grad: c.String("grad-dtype")}); err != nil {
		return fmt.Errorf("--%w", err)
	}
	return nil
}

// scenarioOptions turns the flags into the analyzer's inputs.
type scenarioOptions struct {
	scenario analyzer.Scenario
	targets  []analyzer.Target
	profiles []analyzer.ExecProfile
	layout   *layout.Layout // a training layout, when one was asked for
	chips    *chips.DB
	chip     string // --chip when given explicitly (a measured run's device names its own otherwise)
}

// readLayout is the training layout the flags describe, nil when none was asked for.
func readLayout(c *cli.Context, s analyzer.Scenario) (*layout.Layout, error) {
	if !(c.IsSet("pp") || c.IsSet("vp") || c.IsSet("cp") || c.IsSet("dp") || c.IsSet("gpus") || c.IsSet("zero") || c.IsSet("mbs") || c.IsSet("gbs") || c.IsSet("recompute-layers") || c.IsSet("first-stage-layers") || c.IsSet("last-stage-layers") ||
		c.IsSet("framework") || c.IsSet("optimizer") || c.IsSet("offload") || c.IsSet("offload-activations") || c.IsSet("compile") ||
		c.IsSet("recipe") || c.IsSet("a2a-overlap") || c.IsSet("dispatcher") || c.IsSet("mtp") || c.IsSet("pipeline-account") ||
		c.IsSet("fp8-param-gather") || c.IsSet("fp8-output-proj") || c.IsSet("fp8-dot-product-attention") || c.IsSet("fused-grouped-mlp") || c.IsSet("act-fp8-input-store") || c.IsSet("hsdp-replicas") || c.IsSet("tp-overlap") || c.IsSet("no-reshard") ||
		c.IsSet("cuda-graph") || c.IsSet("grouped-gemm") || c.IsSet("sync-free-moe") || c.IsSet("routing") || c.IsSet("fp8-dispatch") || c.IsSet("no-bias-swiglu-fusion") || c.IsSet("stack") || c.IsSet("param-dtype") || c.IsSet("loss")) {
		return nil, nil
	}
	if fw := c.String("framework"); strings.Contains(fw, ",") || strings.EqualFold(fw, "all") {
		return nil, fmt.Errorf("--framework %q: a layout runs one framework (plan train searches several)", fw)
	}
	k, err := readKnobs(c, s.ComputeDType)
	if err != nil {
		return nil, err
	}
	zero, zeroSet := c.Int("zero"), c.IsSet("zero")
	if st, ok := layout.Stacks[k.Stack]; ok && !zeroSet {
		zero, zeroSet = st.ZeRO, true
	}
	l, err := layout.Spec{TP: s.TP, PP: c.Int64("pp"), VP: c.Int64("vp"), CP: c.Int64("cp"), DP: c.Int64("dp"), EP: s.EP, ETP: s.ETP,
		GPUs: c.Int64("gpus"), DPSet: c.IsSet("dp"), MBS: c.Int64("mbs"), GBS: c.Int64("gbs"), Batch: s.Batch, GradAccum: s.GradAccum, Seq: s.Seq,
		ZeRO: zero, ZeROSet: zeroSet, Recompute: s.Recompute, RecomputeLayers: c.Int64("recompute-layers"),
		FirstStageLayers: c.Int64("first-stage-layers"), LastStageLayers: c.Int64("last-stage-layers"),
		NoSP: c.Bool("no-sp")}.Layout(k)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

func readScenario(c *cli.Context) (scenarioOptions, error) {
	var o scenarioOptions
	s := analyzer.DefaultScenario()
	s.Batch, s.Seq, s.KVLen = c.Int64("batch"), c.Int64("seq"), c.Int64("kv-len")
	if s.KVLen == 0 {
		s.KVLen = s.Seq
	}
	var err error
	if err = readPrecision(c, &s); err != nil {
		return o, cli.Exit(err.Error(), exitFailure)
	}
	s.TP, s.EP, s.ETP = c.Int64("tp"), c.Int64("ep"), c.Int64("etp")
	s.Recompute, s.GradAccum, s.SeedTraining = c.String("recompute"), c.Int64("grad-accum"), c.Bool("seed-training")
	if name := c.String("stack"); name != "" && !c.IsSet("recompute") {
		// the stack's checkpointing (on for a quantized base where its preparation turns it on)
		if st, err := layout.LookupStack(name); err == nil {
			s.Recompute = st.DefaultRecompute(c.Bool("qlora") || (c.String("base-dtype") != "" && !strings.EqualFold(c.String("base-dtype"), "bf16")))
		}
	}
	if err := s.Validate(); err != nil {
		return o, cli.Exit("scenario: "+err.Error(), exitFailure)
	}
	o.scenario = s

	if o.layout, err = readLayout(c, s); err != nil {
		return o, cli.Exit(err.Error(), exitFailure)
	}
	if o.layout == nil && s.EP > 1 && s.ETP == 0 {
		// served: the TP group holds every expert, EP groups of TP/EP GPUs each (a training
		// layout keeps Megatron's default, ETP = TP, its EP spanning the data-parallel ranks)
		s.ETP = serve.InferenceETP(s.TP, s.EP)
		o.scenario = s
	}
	db, err := chipDB(c)
	if err != nil {
		return o, err
	}
	o.chips = db
	if c.IsSet("chip") {
		o.chip = c.StringSlice("chip")[0]
	}
	var chipList []chips.Chip
	if sys := c.String("system"); sys != "" {
		_, chip, err := db.System(sys)
		if err != nil {
			return o, cli.Exit(err.Error(), exitFailure)
		}
		chipList = append(chipList, chip)
	}
	if len(chipList) == 0 || c.IsSet("chip") {
		for _, name := range c.StringSlice("chip") {
			chip, err := db.Lookup(name)
			if err != nil {
				return o, cli.Exit(err.Error(), exitFailure)
			}
			chipList = append(chipList, chip)
		}
	}
	engine, err := serve.ParseEngine(c.String("engine"))
	if err != nil {
		return o, cli.Exit("--"+err.Error(), exitUsage)
	}
	for _, chip := range chipList {
		t, err := newTarget(chip, s.ComputeDType)
		if err != nil {
			return o, cli.Exit(err.Error(), exitFailure)
		}
		if c.IsSet("recipe") {
			if err := layout.RecipeOn(c.String("recipe"), chip); err != nil {
				return o, cli.Exit(err.Error()+" (--chip "+chip.Name+")", exitUsage)
			}
		}
		// prefill and decode are timed with the serving engine's figures where the chip has them
		if e := serve.Lane(engine, chip); chip.Efficiency.Lanes[e].Sources != nil {
			lc := chip
			lc.Efficiency = chip.Efficiency.Lane(e)
			if t.Serving, err = timing.New(lc, s.ComputeDType); err != nil {
				return o, cli.Exit(err.Error(), exitFailure)
			}
			t.ServingLane = e
		}
		o.targets = append(o.targets, t)
	}
	for _, e := range c.StringSlice("exec") {
		if p, ok := analyzer.Profiles[e]; ok {
			o.profiles = append(o.profiles, p)
			continue
		}
		f, err := openRegular(e)
		if err != nil {
			return o, cli.Exit(fmt.Sprintf("--exec %s: not naive or efficient, and not a readable profile file: %v", e, err), exitFailure)
		}
		ps, err := analyzer.ParseProfiles(e, f)
		f.Close()
		if err != nil {
			return o, cli.Exit(err.Error(), exitFailure)
		}
		o.profiles = append(o.profiles, ps...)
	}
	return o, nil
}
