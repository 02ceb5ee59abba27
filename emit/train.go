package emit

import (
	"fmt"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/internal/shell"
	"github.com/mrep-dev/mrep/layout"
)

// TrainFrameworks are the frameworks a training layout can be written for.
var TrainFrameworks = []string{"megatron", "torchtitan"}

// Training is a planned training layout and what it trains.
type Training struct {
	Model string // the Hugging Face id or path (torchtitan's hf_assets_path; a comment for Megatron)
	Name  string // the model as mrep names it (the zoo's name): torchtitan's config to start from
	// Release is the framework's release to write for (ResolveRelease; "": the newest checked).
	Release string
	// PlanID names the plan (PlanID): the written file prints it, with what runs, as a line
	// of the training log, so `mrep ingest LOG` reads the run back with no flag.
	PlanID string
	Title  string
	Chip   string // the chip it runs on: Megatron's CUDA_DEVICE_MAX_CONNECTIONS rule depends on its generation
	Layout layout.Layout
	Layers int64
	FP8    string // the recipe: "", fp8-cs, fp8-ds, fp8-blockwise, mxfp8
	// MoE: the model routes tokens to experts.
	MoE bool
}

// WriteTraining is the framework's files for t: Megatron-LM's pretrain_gpt.py arguments, or a
// torchtitan config module (0.3 and later; a job TOML for 0.2.2).
func WriteTraining(framework, prefix string, t Training) (Files, error) {
	l := t.Layout
	if strings.HasPrefix(t.Model, "-") {
		return Files{}, fmt.Errorf("model %q starts with '-': a launcher would read it as an option; give --model-id a path (./%s) or a Hugging Face id", oneLine(t.Model), oneLine(t.Model))
	}
	if l.TP < 1 || l.PP < 1 || l.DP < 1 || l.MBS < 1 || l.GBS < 1 || l.Seq < 1 {
		return Files{}, fmt.Errorf("layout %s MBS %d GBS %d: every degree and batch must be >= 1", l, l.MBS, l.GBS)
	}
	var f Files
	switch framework {
	case "megatron":
		split, ok := l.MegatronSplit(t.Layers)
		if !ok {
			return Files{}, fmt.Errorf("layout %s: Megatron-LM splits no pipeline this way (%d layers over PP %d x VP %d; its validate_args wants the layers, "+
				"with the embedding and loss where they count, divisible by PP and each stage's by VP)", l, t.Layers, l.PP, l.VP)
		}
		t.Layout = split
		f.add(prefix+"-megatron.sh", megatronArgs(t))
	case "torchtitan":
		r, err := ResolveRelease("torchtitan", t.Release)
		if err != nil {
			return Files{}, err
		}
		if r.Name == "0.2.2" {
			f.add(prefix+"-torchtitan.toml", torchtitanTOML(t))
			break
		}
		// a Python module: its name must be importable (no hyphen)
		f.add(strings.ReplaceAll(prefix, "-", "_")+"_torchtitan.py", torchtitanModule(t, r))
	default:
		return Files{}, fmt.Errorf("framework %q: want megatron or torchtitan", framework)
	}
	return f, nil
}

// blackwellOrLater says whether the chip's compute capability is 10 or more, where Megatron-LM
// drops its CUDA_DEVICE_MAX_CONNECTIONS=1 requirement (arguments.py: get_device_arch_version).
func blackwellOrLater(chip string) bool {
	c := strings.ToUpper(chip)
	for _, p := range []string{"B200", "B300", "GB200", "GB300", "RTX-PRO-6000"} {
		if strings.HasPrefix(c, p) {
			return true
		}
	}
	return false
}

// megatronArgs are Megatron-LM's arguments for the layout, each as megatron/training/arguments.py
// (@d98e8a6) names and validates it; the split is MegatronSplit's.
// noGraph is what a torchtitan file says of a layout mrep timed from a full-iteration CUDA graph.
const noGraph = "# mrep timed Megatron's full-iteration CUDA graph, which torchtitan has no option for: its eager step issues every kernel from the host"

func megatronArgs(t Training) string {
	l := t.Layout
	var b strings.Builder
	b.WriteString("#!/usr/bin/env bash\n")
	fmt.Fprintf(&b, "# %s\n# Megatron-LM arguments for the layout mrep planned (model: %s); add your model, data and\n# tokenizer arguments and launch with torchrun on %d GPUs.\n", oneLine(t.Title), oneLine(t.Model), l.GPUs())
	if l.EP > 1 && l.A2AOverlap == "dualpipe" {
		// DeepSeek-V3's DualPipe is its own pipeline schedule, not one of Megatron-LM's
		b.WriteString("# mrep timed DeepSeek's DualPipe (the expert all-to-all hidden by a bidirectional pipeline); Megatron-LM has no\n" +
			"# such schedule: the nearest, --overlap-moe-expert-parallel-comm, is written, and hides less (plan with --a2a-overlap 1f1b to time it).\n")
	}
	if t.PlanID != "" {
		fmt.Fprintf(&b, "echo %s  # read back by mrep ingest from the training log\n", shell.Quote("mrep-plan: "+t.planLine("megatron")))
	}
	fsdp := l.Stage() >= 2
	switch {
	case fsdp:
		// Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS is not 1 (arguments.py)
		b.WriteString("unset CUDA_DEVICE_MAX_CONNECTIONS  # Megatron-FSDP requires it unset or > 1\n")
	case (l.TP > 1 || l.CP > 1) && !blackwellOrLater(t.Chip) && (l.A2AOverlap == "1f1b" || l.A2AOverlap == "dualpipe"):
		b.WriteString("# CUDA_DEVICE_MAX_CONNECTIONS: 1 favours TP/CP overlap, 32 the expert all-to-all overlap (Megatron warns either way)\n")
	case (l.TP > 1 || l.CP > 1) && !blackwellOrLater(t.Chip):
		b.WriteString("export CUDA_DEVICE_MAX_CONNECTIONS=1  # required with TP or CP > 1 before Blackwell\n")
	}
	if l.FusedGroupedMLP {
		// an environment switch, not an argument: megatron/core/transformer/moe/experts.py
		// _is_fused_impl_supported reads it (Transformer Engine >= 2.14 with its CuTe DSL ops)
		b.WriteString("export NVTE_CUTEDSL_FUSED_GROUPED_MLP=1  # the experts' fused grouped MLP (Transformer Engine >= 2.14)\n")
	}
	if l.FP8Attention {
		// a TransformerConfig field pretrain_gpt.py's parser leaves out (_add_network_size_args'
		// exclude list @d98e8a6); Megatron-Bridge sets it as mixed_precision.fp8_dot_product_attention
		b.WriteString("# mrep timed fp8_dot_product_attention=True (the attention core in the recipe's FP8): pretrain_gpt.py has no\n" +
			"# flag for it; set mixed_precision.fp8_dot_product_attention in a Megatron-Bridge config, or expect 16-bit attention\n")
	}
	switch {
	case l.GroupedGEMM == "turbo" || l.SyncFreeMoE > 0:
		// Primus's own arguments (primus/configs/modules/megatron/primus_turbo.yaml): stock
		// Megatron-LM has neither
		fmt.Fprintf(&b, "# mrep timed Primus-Turbo's MoE path (--use_turbo_grouped_gemm %s --turbo_sync_free_moe_stage %d%s): these are\n"+
			"# Primus's arguments, not Megatron-LM's; run them under Primus (primus-cli train pretrain), or expect Megatron's own grouped GEMM\n",
			map[bool]string{true: "True", false: "False"}[l.GroupedGEMM == "turbo"], l.SyncFreeMoE, map[bool]string{true: " --moe_use_legacy_grouped_gemm True", false: ""}[l.GroupedGEMM == "legacy"])
	case l.GroupedGEMM == "legacy":
		// Megatron-LM removed its legacy GroupedMLP and the flag (arguments.py @d98e8a6 has
		// neither); Primus's Megatron keeps it
		b.WriteString("# mrep timed Megatron's legacy grouped GEMM (--moe-use-legacy-grouped-gemm, a launch per expert): this Megatron-LM\n" +
			"# no longer has it (Primus's Megatron does); it runs Transformer Engine's GroupedLinear, with the same launches\n")
		if l.LegacyExperts16() {
			// grouped_gemm's gmm has no FP8 path (layout.Layout.LegacyExperts16)
			b.WriteString("# under the legacy grouped GEMM the experts' GEMMs ran 16-bit, as mrep timed them; GroupedLinear quantizes them to the recipe\n")
		}
	}
	if l.FP8Dispatch {
		// Megatron hands DeepEP the 16-bit hidden (fused_a2a.py @d98e8a6); no argument asks for
		// DeepSeek-V3's FP8 dispatch
		b.WriteString("# mrep timed the forward dispatch in FP8 (DeepSeek-V3's stack): Megatron's DeepEP sends 16-bit tokens, so expect\n" +
			"# a larger exchange than timed\n")
	}
	if l.ActFP8InputStore {
		// a TransformerConfig field Megatron-LM's arguments exclude ("no CLI argument exists for
		// these", training/arguments.py _add_network_size_args @core_v0.17.0)
		b.WriteString("# mrep counted activation_func_fp8_input_store=True (the SwiGLU's input kept in FP8): pretrain_gpt.py has no\n" +
			"# flag for it; set model.activation_func_fp8_input_store in a Megatron-Bridge config, or expect more activation memory\n")
	}
	b.WriteString("PARALLEL_ARGS=(\n")
	arg := func(s string) { fmt.Fprintf(&b, "  %s\n", s) }
	arg(fmt.Sprintf("--tensor-model-parallel-size %d", l.TP))
	arg(fmt.Sprintf("--pipeline-model-parallel-size %d", l.PP))
	if l.EmbeddingInPipe {
		arg("--account-for-embedding-in-pipeline-split")
	}
	if l.LossInPipe {
		arg("--account-for-loss-in-pipeline-split")
	}
	uneven := l.FirstStageLayers > 0 || l.LastStageLayers > 0
	if l.FirstStageLayers > 0 {
		arg(fmt.Sprintf("--decoder-first-pipeline-num-layers %d", l.FirstStageLayers))
	}
	if l.LastStageLayers > 0 {
		arg(fmt.Sprintf("--decoder-last-pipeline-num-layers %d", l.LastStageLayers))
	}
	if l.VP > 1 {
		if uneven { // uneven stages take the virtual degree itself
			arg(fmt.Sprintf("--num-virtual-stages-per-pipeline-rank %d", l.VP))
		} else {
			units := t.Layers + boolInt(l.EmbeddingInPipe) + boolInt(l.LossInPipe)
			arg(fmt.Sprintf("--num-layers-per-virtual-pipeline-stage %d", units/(l.PP*l.VP)))
		}
	}
	if l.CP > 1 {
		arg(fmt.Sprintf("--context-parallel-size %d", l.CP))
	}
	if l.EP > 1 {
		arg(fmt.Sprintf("--expert-model-parallel-size %d", l.EP))
		if l.ETP > 0 {
			arg(fmt.Sprintf("--expert-tensor-parallel-size %d", l.ETP))
		}
		switch l.Dispatcher {
		case "deepep", "hybridep": // the flex dispatcher's backends (--moe-enable-deepep is deprecated)
			arg("--moe-token-dispatcher-type flex")
			arg("--moe-flex-dispatcher-backend " + l.Dispatcher)
		default:
			arg("--moe-token-dispatcher-type alltoall")
		}
		if l.A2AOverlap == "1f1b" || l.A2AOverlap == "dualpipe" {
			arg("--overlap-moe-expert-parallel-comm")
		}
	}
	if l.TP > 1 && !l.NoSP {
		arg("--sequence-parallel")
	}
	if l.TPOverlap {
		arg("--tp-comm-overlap")
	}
	if l.NoSwiGLUFusion {
		arg("--no-bias-swiglu-fusion")
	}
	if l.CUDAGraph {
		// the step replayed from one graph; Megatron refuses it with its NaN check on
		// (validate_args), and an MoE layer is capturable only with static shapes (its MoE
		// README): an expert capacity with padding, which drops the tokens beyond it
		arg("--cuda-graph-impl full_iteration")
		arg("--no-check-for-nan-in-loss-and-grad")
		if t.MoE {
			b.WriteString("  # tokens beyond an expert's capacity are dropped: mrep timed the experts dropless and balanced\n")
			arg("--moe-expert-capacity-factor 1.0")
			arg("--moe-pad-expert-input-to-capacity")
		}
	}
	b.WriteString(")\nBATCH_ARGS=(\n")
	arg(fmt.Sprintf("--micro-batch-size %d", l.MBS))
	arg(fmt.Sprintf("--global-batch-size %d", l.GBS))
	arg(fmt.Sprintf("--seq-length %d", l.Seq))
	b.WriteString(")\nMEMORY_ARGS=(\n")
	if l.Stage() >= 1 {
		arg("--use-distributed-optimizer")
	}
	if fsdp {
		// ZeRO-2/3 in Megatron is Megatron-FSDP: its user guide's required flags
		// (docs/discussions/megatron-fsdp-user-guide)
		arg("--use-megatron-fsdp")
		arg(map[int]string{2: "--data-parallel-sharding-strategy optim_grads", 3: "--data-parallel-sharding-strategy optim_grads_params"}[min(l.Stage(), 3)])
		arg("--no-gradient-accumulation-fusion")
		arg("--ckpt-format fsdp_dtensor")
	}
	arg("--overlap-grad-reduce")
	if l.Stage() >= 1 { // validate_args: only with the distributed optimizer or Megatron-FSDP
		arg("--overlap-param-gather")
	}
	if l.BF16Grads {
		arg("--grad-reduce-in-bf16")
	}
	switch l.Recompute {
	case "full":
		arg("--recompute-granularity full")
		if l.RecomputeLayers > 0 { // the first N layers of each stage, as mrep timed
			arg("--recompute-method block")
			arg(fmt.Sprintf("--recompute-num-layers %d", l.RecomputeLayers))
		} else { // every layer, one at a time
			arg("--recompute-method uniform")
			arg("--recompute-num-layers 1")
		}
	case "selective":
		arg("--recompute-granularity selective")
	default:
		if mods := megatronRecomputeModules(l.Recompute); len(mods) > 0 {
			arg("--recompute-granularity selective")
			arg("--recompute-modules " + strings.Join(mods, " "))
		}
	}
	if l.OffloadActivations > 0 {
		// Transformer Engine's CPU offload of that many layers' activations (Megatron sets
		// cpu_offloading from it; Megatron-Bridge: model.cpu_offloading_num_layers)
		arg(fmt.Sprintf("--cpu-offloading-num-layers %d", l.OffloadActivations))
	}
	b.WriteString(")\nPRECISION_ARGS=(\n  --bf16\n")
	switch t.FP8 {
	case "fp8-cs":
		arg("--fp8-format hybrid")
		arg("--fp8-recipe tensorwise")
	case "fp8-ds":
		arg("--fp8-format hybrid")
		arg("--fp8-recipe delayed")
	case "fp8-blockwise":
		arg("--fp8-format e4m3")
		arg("--fp8-recipe blockwise")
	case "mxfp8":
		arg("--fp8-format e4m3")
		arg("--fp8-recipe mxfp8")
	}
	if l.FP8ParamGather {
		arg("--fp8-param-gather")
	}
	if l.FP8OutputProj {
		arg("--fp8-output-proj")
	}

	b.WriteString(")\n")
	fmt.Fprintf(&b, "# torchrun --nproc-per-node 8 --nnodes %d pretrain_gpt.py \"${PARALLEL_ARGS[@]}\" \"${BATCH_ARGS[@]}\" \"${MEMORY_ARGS[@]}\" \"${PRECISION_ARGS[@]}\" ...\n", max(1, l.GPUs()/8))
	return b.String()
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// torchtitanTOML is torchtitan v0.2.2's job config (torchtitan/config/job_config.py @v0.2.2:
// its sections and fields; run_train.sh reads the file from CONFIG_FILE). Releases from 0.3 take
// Python config modules instead: the comment says so.
func torchtitanTOML(t Training) string {
	l := t.Layout
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n# torchtitan v0.2.2 job config for the layout mrep planned: merge it into your model's TOML\n"+
		"# (model name and flavor, data) and launch with CONFIG_FILE=that.toml NGPU=8 ./run_train.sh on each\n"+
		"# of %d nodes (%d GPUs). torchtitan 0.3 and later read Python config modules, not TOML.\n", oneLine(t.Title), max(1, l.GPUs()/8), l.GPUs())
	shard := l.DP
	replicate := int64(1)
	if l.Replicas > 1 {
		replicate, shard = l.Replicas, l.DP/l.Replicas
	}
	var converters []string
	switch t.FP8 {
	case "fp8-cs", "fp8-ds", "fp8-blockwise":
		converters = append(converters, "quantize.linear.float8")
	case "mxfp8":
		converters = append(converters, "quantize.linear.mx")
	}
	fmt.Fprintf(&b, "\n[model]\nhf_assets_path = %s\n", tomlString(t.Model))
	if len(converters) > 0 {
		fmt.Fprintf(&b, "converters = [%s]\n", tomlString(converters[0]))
	}
	b.WriteString("\n[parallelism]\n")
	fmt.Fprintf(&b, "data_parallel_replicate_degree = %d\n", replicate)
	fmt.Fprintf(&b, "data_parallel_shard_degree = %d\n", shard)
	fmt.Fprintf(&b, "tensor_parallel_degree = %d\n", l.TP)
	fmt.Fprintf(&b, "pipeline_parallel_degree = %d\n", l.PP)
	if l.PP > 1 {
		schedule := "1F1B"
		if l.VP > 1 {
			schedule = "Interleaved1F1B"
		}
		fmt.Fprintf(&b, "pipeline_parallel_schedule = %q\n", schedule)
		// the local batch splits into micro-batches of this size: GA of them, as mrep timed
		fmt.Fprintf(&b, "pipeline_parallel_microbatch_size = %d\n", l.MBS)
	}
	fmt.Fprintf(&b, "context_parallel_degree = %d\n", l.CP)
	if l.EP > 1 {
		fmt.Fprintf(&b, "expert_parallel_degree = %d\n", l.EP)
	}
	if l.TPOverlap && l.TP > 1 {
		b.WriteString("enable_async_tensor_parallel = true  # needs [compile] enable (set below)\n")
	}
	if l.CUDAGraph {
		b.WriteString(noGraph + "\n")
	}
	b.WriteString("\n[training]\n")
	local := l.MBS // without pipelining torchtitan accumulates global / (local x DP) steps
	if l.PP > 1 {
		local = l.GBS / max(l.DP, 1) // pipelining: one step, the local batch in micro-batches
	}
	fmt.Fprintf(&b, "local_batch_size = %d\n", local)
	fmt.Fprintf(&b, "global_batch_size = %d\n", l.GBS)
	fmt.Fprintf(&b, "seq_len = %d\n", l.Seq)
	b.WriteString("mixed_precision_param = \"bfloat16\"\n")
	b.WriteString("\n[activation_checkpoint]\n")
	switch l.Recompute {
	case "full":
		b.WriteString("mode = \"full\"\n")
	case "op", "selective":
		b.WriteString("mode = \"selective\"\nselective_ac_option = \"op\"\n")
		if l.Recompute == "selective" {
			b.WriteString("# mrep timed Megatron's selective (attention core) checkpointing; torchtitan's nearest is per-op\n")
		}
	default:
		b.WriteString("mode = \"none\"\n")
	}
	fmt.Fprintf(&b, "\n[compile]\nenable = %t\n", l.Compile || l.TPOverlap && l.TP > 1)
	switch t.FP8 {
	case "fp8-cs", "fp8-ds":
		b.WriteString("\n[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\nenable_fsdp_float8_all_gather = true\nprecompute_float8_dynamic_scale_for_fsdp = true\n")
	case "fp8-blockwise":
		b.WriteString("\n[quantize.linear.float8]\nrecipe_name = \"rowwise\"  # torchtitan's nearest to 128-element blocks\n")
	case "mxfp8":
		b.WriteString("\n[quantize.linear.mx]\nrecipe_name = \"mxfp8_cublas\"\n")
	}
	return b.String()
}

// tomlString is s as a TOML basic string: backslash and quote escaped, control characters as
// \uXXXX (TOML has no \x escape, so Go's %q would not parse).
func tomlString(s string) string { return quoted(s, "\\u%04X") }

// quoted is s in double quotes, backslash and quote escaped and each control character written
// with control (a format taking the rune): the one escaper of the TOML and Python files.
func quoted(s, control string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, control, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// planLine is the plan as the training log's "mrep-plan:" line says it: KEY=VALUE pairs that
// measure reads back (the layout, batches, precision and where it ran).
func (t Training) planLine(framework string) string {
	l := t.Layout
	dtype := "bf16"
	if t.FP8 != "" {
		dtype = "fp8"
	}
	pairs := []string{"plan=" + t.PlanID, "model=" + metaValue(t.Name), "chip=" + metaValue(t.Chip), fmt.Sprintf("gpus=%d", l.GPUs()),
		fmt.Sprintf("tp=%d", l.TP), fmt.Sprintf("pp=%d", l.PP), fmt.Sprintf("ep=%d", max(l.EP, 1)), fmt.Sprintf("cp=%d", max(l.CP, 1)),
		fmt.Sprintf("seq=%d", l.Seq), fmt.Sprintf("gbs=%d", l.GBS), fmt.Sprintf("mbs=%d", l.MBS), "framework=" + framework, "dtype=" + dtype}
	if t.FP8 != "" {
		pairs = append(pairs, "recipe="+metaValue(t.FP8))
	}
	return strings.Join(pairs, " ")
}

// megatronRecomputeModules are Megatron's --recompute-modules (TransformerConfig.recompute_modules
// @d98e8a6: core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts) for mrep's
// selective:MOD[,MOD] mode: mrep's act is Megatron's moe_act, and its mlp Megatron's mlp, the
// dense layers' MLP only (transformer_layer.py sets recompute_mlp on layers that are not MoE
// layers), as mrep times it.
func megatronRecomputeModules(mode string) []string {
	rc, err := analyzer.ParseRecompute(mode)
	if err != nil || rc.Mode != "selective" {
		return nil
	}
	var out []string
	for _, m := range analyzer.RecomputeModules {
		if !rc.Modules[m] {
			continue
		}
		switch m {
		case "act":
			out = append(out, "moe_act")
		default:
			out = append(out, m)
		}
	}
	return out
}
