package emit

import (
	"fmt"
	"strings"

	"github.com/mrep-dev/mrep/layout"
)

// torchtitanBases are the torchtitan configurations (torchtitan/models/FAMILY/config_registry.py
// at b5bcd76) a zoo model's run starts from: its model flavor, data and optimizer, which mrep does
// not plan; the layout, batch, checkpointing, compile and FP8 are then set to what mrep timed.
var torchtitanBases = map[string][2]string{
	"Llama-3.1-8B": {"llama3", "llama3_8b"}, "Llama-3.1-70B": {"llama3", "llama3_70b"}, "Llama-3.1-70B-Instruct": {"llama3", "llama3_70b"},
	"Llama-3.1-405B": {"llama3", "llama3_405b"}, "Qwen3-0.6B": {"qwen3", "qwen3_0_6b"}, "Qwen3-1.7B": {"qwen3", "qwen3_1_7b"},
	"Qwen3-14B": {"qwen3", "qwen3_14b"}, "Qwen3-30B-A3B": {"qwen3", "qwen3_30b_a3b"}, "Qwen3-32B": {"qwen3", "qwen3_32b"},
	"DeepSeek-V3": {"deepseek_v3", "deepseek_v3_671b"}, "gpt-oss-20b": {"gpt_oss", "gpt_oss_20b"}, "gpt-oss-120b": {"gpt_oss", "gpt_oss_120b"},
}

// torchtitanModule is a torchtitan config module for the layout: a function returning
// Trainer.Config (torchtitan/config/README.md at the release's commit), started from the model's
// own torchtitan configuration with every parallelism, batch and recompute setting mrep timed
// written over it. For a model torchtitan has no configuration for, the module says so when run
// and still lists the settings, to copy onto the user's own.
func torchtitanModule(t Training, r Release) string {
	l := t.Layout
	nodes := max(1, (l.GPUs()+7)/8)
	var b strings.Builder
	fmt.Fprintf(&b, "\"\"\"%s\n\ntorchtitan %s config module written by mrep for the layout it planned, checked against\n%s.\n"+
		"Launch from torchtitan's repository root, with this file's directory importable, on each of %d node(s) (%d GPUs):\n\n"+
		"    PYTHONPATH=/path/to/this/dir NGPU=%d MODULE=train_torchtitan CONFIG=mrep_plan ./run_train.sh\n\n"+
		"(across nodes, torchrun's --nnodes %d and rendezvous options in place of run_train.sh's).\n\"\"\"\n",
		pyDoc(oneLine(t.Title)), r.Name, pyDoc(r.Source), nodes, l.GPUs(), min(l.GPUs(), 8), nodes)
	base, known := torchtitanBases[t.Name]
	b.WriteString("from torchtitan.components.quantization import Float8LinearConverter, MXFP8LinearConverter\n")
	b.WriteString("from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC\n")
	if known {
		fmt.Fprintf(&b, "from torchtitan.models.%s import model_registry\n", base[0])
		fmt.Fprintf(&b, "from torchtitan.models.%s.config_registry import %s as base\n", base[0], base[1])
	}
	b.WriteString("\n\ndef mrep_plan():\n")
	if t.PlanID != "" {
		// into the training log, where mrep ingest reads the run back with no flag
		fmt.Fprintf(&b, "    print(%s, flush=True)\n", pyString("mrep-plan: "+t.planLine("fsdp")))
	}
	if fw := l.Framework; fw != "" && fw != layout.FSDP {
		fmt.Fprintf(&b, "    # mrep timed this layout under %s; torchtitan runs FSDP2 (parameters, gradients and optimizer\n"+
			"    # state sharded over the data-parallel ranks): plan with --framework fsdp to time what this runs.\n", pyDoc(oneLine(fw)))
	}
	if known {
		b.WriteString("    config = base()\n")
	} else {
		fmt.Fprintf(&b, "    # torchtitan ships no configuration for %s (torchtitan/models/*/config_registry.py): start\n"+
			"    # from your own (its model flavor, data and optimizer) and set the fields below on it.\n", pyDoc(oneLine(t.Name)))
		fmt.Fprintf(&b, "    raise NotImplementedError(%s)\n", pyString(fmt.Sprintf("torchtitan has no configuration for %s: start mrep_plan from your own", oneLine(t.Name))))
		b.WriteString("    config = ...  # your Trainer.Config; mrep's settings follow\n")
	}
	// hf_assets_path is a local directory of the checkpoint's tokenizer (and weights): the base's
	// (assets/hf/NAME), filled by torchtitan's own download script
	fmt.Fprintf(&b, "    # tokenizer from the base's hf_assets_path: python scripts/download_hf_assets.py --repo_id %s --assets tokenizer\n", pyDoc(oneLine(t.Model)))
	if !known {
		fmt.Fprintf(&b, "    config.hf_assets_path = %s\n", pyString("./assets/hf/"+pathBase(t.Model)))
	}
	shard, replicate := l.DP, int64(1)
	if l.Replicas > 1 {
		replicate, shard = l.Replicas, l.DP/l.Replicas
	}
	b.WriteString("\n    p = config.parallelism\n")
	fmt.Fprintf(&b, "    p.data_parallel_replicate_degree = %d\n", replicate)
	fmt.Fprintf(&b, "    p.data_parallel_shard_degree = %d\n", shard)
	if l.NoReshard {
		b.WriteString("    p.fsdp_reshard_after_forward = \"never\"\n")
	}
	fmt.Fprintf(&b, "    p.tensor_parallel_degree = %d\n", l.TP)
	fmt.Fprintf(&b, "    p.context_parallel_degree = %d\n", l.CP)
	fmt.Fprintf(&b, "    p.expert_parallel_degree = %d\n", max(l.EP, 1))
	if l.EP > 1 && (l.Dispatcher == "deepep" || l.Dispatcher == "hybridep") {
		fmt.Fprintf(&b, "    # mrep timed the %s dispatcher: it is a setting of the model's MoE config, not of the job (see the\n"+
			"    # *_hybridep configurations in torchtitan's deepseek_v3 config_registry.py)\n", l.Dispatcher)
	}
	if l.EP > 1 && l.A2AOverlap != "" && l.A2AOverlap != "none" {
		fmt.Fprintf(&b, "    # mrep timed the %s all-to-all overlap, which torchtitan has no option for: its all-to-all is exposed\n", pyDoc(l.A2AOverlap))
	}
	if l.CUDAGraph {
		b.WriteString("    " + noGraph + "\n")
	}
	fmt.Fprintf(&b, "    p.pipeline_parallel_degree = %d\n", l.PP)
	if l.PP > 1 {
		schedule := "1F1B"
		if l.VP > 1 {
			schedule = "Interleaved1F1B"
		}
		fmt.Fprintf(&b, "    p.pipeline_parallel_schedule = %s\n", pyString(schedule))
		// every micro-batch of a step in one pipeline pass, as mrep timed it (no accumulation
		// around the pipeline)
		fmt.Fprintf(&b, "    p.num_pp_microbatches = %d\n", max(l.GBS/max(l.MBS*l.DP, 1), 1))
	}
	b.WriteString("\n    t = config.training\n")
	fmt.Fprintf(&b, "    t.num_tokens_per_microbatch_per_dp_rank = %d  # a micro-batch of %d x %d tokens\n", l.MBS*l.Seq, l.MBS, l.Seq)
	fmt.Fprintf(&b, "    t.num_tokens_per_train_step = %d  # the global batch, %d sequences\n", l.GBS*l.Seq, l.GBS)
	fmt.Fprintf(&b, "    t.max_context_length = %d\n", l.Seq)
	b.WriteString("    t.mixed_precision_param = \"bfloat16\"\n\n")
	switch l.Recompute {
	case "full":
		b.WriteString("    config.activation_checkpoint = FullAC.Config()\n")
	case "op", "selective":
		if l.Recompute == "selective" {
			b.WriteString("    # mrep timed Megatron's selective (attention core) checkpointing; torchtitan's nearest is per-op\n")
		}
		b.WriteString("    config.activation_checkpoint = SelectiveAC.Config()\n")
	default:
		b.WriteString("    config.activation_checkpoint = None\n")
	}
	asyncTP := l.TPOverlap && l.TP > 1
	compile := l.Compile || asyncTP || t.FP8 == "mxfp8" // async TP and MXFP8 linears need torch.compile
	fmt.Fprintf(&b, "    config.compile.enable = %s\n", pyBool(compile))
	fmt.Fprintf(&b, "    config.compile.enable_async_tensor_parallel = %s\n", pyBool(asyncTP))
	switch t.FP8 {
	case "fp8-cs", "fp8-ds", "fp8-blockwise":
		if t.FP8 == "fp8-blockwise" {
			b.WriteString("    # torchtitan's nearest to 128-element blocks: row-wise scaling\n")
		} else {
			b.WriteString("    # mrep timed per-tensor scaling; torchtitan's float8 converter has row-wise scaling only\n")
		}
		fmt.Fprintf(&b, "    config.model_spec = model_registry(\n        config.model_spec.flavor,\n        converters=[Float8LinearConverter.Config(recipe_name=\"rowwise\", filter_fqns=[\"lm_head\"], model_compile_enabled=%s)],\n    )\n", pyBool(compile))
	case "mxfp8":
		b.WriteString("    config.model_spec = model_registry(\n        config.model_spec.flavor,\n        converters=[MXFP8LinearConverter.Config(model_compile_enabled=True)],\n    )\n")
	}
	b.WriteString("    return config\n")
	return b.String()
}

func pyBool(v bool) string {
	if v {
		return "True"
	}
	return "False"
}

// pyString is s as a Python string literal: backslash and quote escaped, control characters as
// \xNN, the rest as is (Python 3 source is UTF-8).
func pyString(s string) string { return quoted(s, "\\x%02x") }

// pyDoc keeps text inside a docstring or comment: no backslash escapes, no closing quotes.
func pyDoc(s string) string {
	return strings.NewReplacer(`\`, "/", `"""`, `'''`).Replace(s)
}

// pathBase is the last element of a Hugging Face id or path ("meta-llama/Llama-3.1-8B" gives
// "Llama-3.1-8B"), as torchtitan's download script names the directory.
func pathBase(id string) string {
	if i := strings.LastIndexAny(id, "/\\"); i >= 0 {
		id = id[i+1:]
	}
	if id == "" || id == "." || id == ".." {
		return "model"
	}
	return id
}
