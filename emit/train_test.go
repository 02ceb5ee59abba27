package emit

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/layout"
)

// torchtitan v0.2.2's job config sections and fields mrep writes (torchtitan/config/job_config.py
// @v0.2.2: Model, Parallelism, Training, ActivationCheckpoint, Compile, Float8Linear, MXLinear).
var torchtitanFields = map[string][]string{
	"model": {"hf_assets_path", "converters"},
	"parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree", "pipeline_parallel_degree",
		"pipeline_parallel_schedule", "pipeline_parallel_microbatch_size", "context_parallel_degree", "expert_parallel_degree", "enable_async_tensor_parallel"},
	"training":               {"local_batch_size", "global_batch_size", "seq_len", "mixed_precision_param"},
	"activation_checkpoint":  {"mode", "selective_ac_option"},
	"compile":                {"enable"},
	"quantize.linear.float8": {"recipe_name", "enable_fsdp_float8_all_gather", "precompute_float8_dynamic_scale_for_fsdp"},
	"quantize.linear.mx":     {"recipe_name"},
}

var denseLayout = layout.Layout{TP: 4, PP: 4, VP: 5, CP: 2, DP: 2, MBS: 1, GBS: 128, Seq: 8192, ZeRO: 1, Recompute: "selective", TPOverlap: true}
var moeLayout = layout.Layout{TP: 1, PP: 16, VP: 1, CP: 1, DP: 16, EP: 8, MBS: 1, GBS: 1024, Seq: 4096, ZeRO: 1, Recompute: "full", RecomputeLayers: 2, Dispatcher: "deepep", A2AOverlap: "1f1b", Replicas: 2}

// The written layouts match their goldens, use only documented names, and carry the planned
// degrees and batches.
func TestEmittedTraining(t *testing.T) {
	for _, c := range []struct {
		name   string
		t      Training
		wantMg []string
		wantTT []string
		wantPy []string
	}{
		{"dense", Training{Model: "meta-llama/Llama-3.1-70B", Name: "Llama-3.1-70B-Instruct", Title: "dense", Layout: denseLayout, Layers: 80},
			[]string{"--tensor-model-parallel-size 4", "--pipeline-model-parallel-size 4", "--num-layers-per-virtual-pipeline-stage 4", "--context-parallel-size 2", "--sequence-parallel", "--recompute-granularity selective", "--use-distributed-optimizer"},
			[]string{"tensor_parallel_degree = 4", "pipeline_parallel_schedule = \"Interleaved1F1B\"", "data_parallel_shard_degree = 2", "mode = \"selective\"",
				"selective_ac_option = \"op\"", "enable_async_tensor_parallel = true", "[compile]\nenable = true", "CONFIG_FILE="},
			[]string{"import llama3_70b as base", "p.tensor_parallel_degree = 4", "p.pipeline_parallel_schedule = \"Interleaved1F1B\"", "p.data_parallel_shard_degree = 2",
				"p.context_parallel_degree = 2", "p.num_pp_microbatches = 64", "t.num_tokens_per_microbatch_per_dp_rank = 8192 ", "t.num_tokens_per_train_step = 1048576 ",
				"config.activation_checkpoint = SelectiveAC.Config()", "config.compile.enable = True", "config.compile.enable_async_tensor_parallel = True", "MODULE=train_torchtitan CONFIG=mrep_plan"}},
		{"moe", Training{Model: "deepseek-ai/DeepSeek-V3", Name: "DeepSeek-V3", Title: "moe", Layout: moeLayout, Layers: 61, FP8: "fp8-blockwise"},
			[]string{"--expert-model-parallel-size 8", "--moe-flex-dispatcher-backend deepep", "--overlap-moe-expert-parallel-comm", "--recompute-method block", "--recompute-num-layers 2", "--fp8-recipe blockwise",
				"--decoder-first-pipeline-num-layers 1"},
			[]string{"expert_parallel_degree = 8", "data_parallel_replicate_degree = 2", "data_parallel_shard_degree = 8", "mode = \"full\"", "[quantize.linear.float8]",
				"converters = [\"quantize.linear.float8\"]", "pipeline_parallel_microbatch_size = 1", "local_batch_size = 64"},
			[]string{"import deepseek_v3_671b as base", "p.expert_parallel_degree = 8", "p.data_parallel_replicate_degree = 2", "p.data_parallel_shard_degree = 8",
				"config.activation_checkpoint = FullAC.Config()", "Float8LinearConverter.Config(recipe_name=\"rowwise\"", "p.num_pp_microbatches = 64", "t.num_tokens_per_train_step = 4194304 "}},
	} {
		for _, fw := range []string{"megatron", "torchtitan@0.2.2", "torchtitan"} {
			fw, release, _ := strings.Cut(fw, "@")
			tr := c.t
			tr.Release = release
			fs, err := WriteTraining(fw, "train", tr)
			if err != nil {
				t.Fatal(err)
			}
			n := fs.Names[0]
			body := fs.Contents[n]
			golden(t, filepath.Join("train-"+c.name, n), body)
			want := c.wantMg
			switch {
			case fw == "torchtitan" && release == "0.2.2":
				want = c.wantTT
				checkTOML(t, n, body)
			case fw == "torchtitan":
				want = c.wantPy
				checkTorchtitanModule(t, n, body)
			default:
				checkMegatron(t, n, body)
			}
			for _, w := range want {
				if !strings.Contains(body, w) {
					t.Errorf("%s %s lacks %q:\n%s", c.name, fw, w, body)
				}
			}
		}
	}
	if _, err := WriteTraining("deepspeed", "x", Training{Layout: denseLayout}); err == nil {
		t.Error("an unknown framework must be refused")
	}
}

// megatronArgs is every option Megatron-LM's parser accepts at d98e8a6, transcribed from its
// source by emit/sources/megatron_args.py (explicit add_argument calls and the dataclass fields
// ArgumentGroupFactory turns into options).
func megatronArgTable(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "megatron_args_d98e8a6.txt"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "--") {
			known[l] = true
		}
	}
	if len(known) < 800 {
		t.Fatalf("%d options in the Megatron-LM table: truncated?", len(known))
	}
	return known
}

// checkMegatron checks every option inside the argument arrays against Megatron-LM's parser
// (the torchrun line's own options are torchrun's).
func checkMegatron(t *testing.T, name, body string) {
	t.Helper()
	known := megatronArgTable(t)
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "  --") {
			continue
		}
		for _, m := range optRe.FindAllStringSubmatch(line, -1) {
			if !known[m[1]] {
				t.Errorf("%s: %s is not an option of Megatron-LM's parser (d98e8a6)", name, m[1])
			}
		}
	}
}

func checkTOML(t *testing.T, name, body string) {
	t.Helper()
	section := ""
	for _, line := range strings.Split(body, "\n") {
		l := strings.TrimSpace(line)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "[") {
			section = strings.Trim(l, "[]")
			if _, ok := torchtitanFields[section]; !ok {
				t.Errorf("%s: [%s] is not a torchtitan section mrep means to write", name, section)
			}
			continue
		}
		k, _, ok := strings.Cut(l, "=")
		k = strings.TrimSpace(k)
		found := false
		for _, f := range torchtitanFields[section] {
			found = found || f == k
		}
		if !ok || !found {
			t.Errorf("%s: %q is not a field of [%s]", name, l, section)
		}
	}
}

// torchtitanTable is what a config module may name at b5bcd76, transcribed from torchtitan's
// source by emit/sources/torchtitan_fields.py: "[section] name" and "[section] name = 'value'".
func torchtitanTable(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "torchtitan_b5bcd76.txt"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "[") {
			known[l] = true
		}
	}
	if len(known) < 100 {
		t.Fatalf("%d names in the torchtitan table: truncated?", len(known))
	}
	return known
}

// checkTorchtitanModule checks every name a written config module uses against torchtitan's
// own: the configuration it starts from and the model registry, every field it sets on
// Trainer.Config and its parallelism, training and compile sections, the activation
// checkpointing classes and the converters' fields and Literal values.
func checkTorchtitanModule(t *testing.T, name, body string) {
	t.Helper()
	known := torchtitanTable(t)
	need := func(entry, line string) {
		if !known[entry] {
			t.Errorf("%s: %q is not torchtitan's (no %s at b5bcd76)", name, line, entry)
		}
	}
	fromRe := regexp.MustCompile(`^from torchtitan\.models\.(\w+)\.config_registry import (\w+) as base$`)
	regRe := regexp.MustCompile(`^from torchtitan\.models\.(\w+) import model_registry$`)
	setRe := regexp.MustCompile(`^\s+(p|t|config|config\.compile)\.(\w+) = (.*)$`)
	acRe := regexp.MustCompile(`(FullAC|SelectiveAC|MemoryBudgetAC)\.Config\(\)`)
	convRe := regexp.MustCompile(`(\w+Converter)\.Config\(([^)]*)\)`)
	argRe := regexp.MustCompile(`(\w+)=("[^"]*"|\[[^]]*\]|\w+)`)
	sections := map[string]string{"p": "parallelism", "t": "training", "config": "trainer", "config.compile": "compile"}
	sets := 0
	for _, line := range strings.Split(body, "\n") {
		if m := fromRe.FindStringSubmatch(line); m != nil {
			need("[registry] "+m[1]+"."+m[2], line)
		}
		if m := regRe.FindStringSubmatch(line); m != nil {
			need("[model_registry] "+m[1], line)
		}
		if m := setRe.FindStringSubmatch(line); m != nil && m[2] != "parallelism" && m[2] != "training" {
			sets++
			sec := sections[m[1]]
			need("["+sec+"] "+m[2], line)
			if v := strings.TrimSpace(strings.SplitN(m[3], "#", 2)[0]); strings.HasPrefix(v, `"`) && sec != "trainer" && m[2] != "pipeline_parallel_schedule" {
				need("["+sec+"] "+m[2]+" = '"+strings.Trim(v, `"`)+"'", line)
			}
		}
		for _, m := range acRe.FindAllStringSubmatch(line, -1) {
			need("[activation_checkpoint] "+m[1], line)
		}
		for _, m := range convRe.FindAllStringSubmatch(line, -1) {
			need("[quantization] "+m[1], line)
			for _, a := range argRe.FindAllStringSubmatch(m[2], -1) {
				need("[quantization] "+m[1]+"."+a[1], line)
				if strings.HasPrefix(a[2], `"`) {
					need("[quantization] "+m[1]+"."+a[1]+" = '"+strings.Trim(a[2], `"`)+"'", line)
				}
			}
		}
	}
	if sets < 10 {
		t.Errorf("%s: %d settings found: the check read nothing", name, sets)
	}
}

// A model torchtitan ships no configuration for gets a module that refuses to run as it is and
// still lists what mrep timed; the release is the user's to pick, an unknown one refused.
func TestTorchtitanModuleReleases(t *testing.T) {
	fs, err := WriteTraining("torchtitan", "train", Training{Model: "acme/odd", Name: "odd-model", Title: "odd", Layout: denseLayout, Layers: 80})
	if err != nil {
		t.Fatal(err)
	}
	body := fs.Contents["train_torchtitan.py"]
	if !strings.Contains(body, `raise NotImplementedError("torchtitan has no configuration for odd-model`) || !strings.Contains(body, "p.tensor_parallel_degree = 4") {
		t.Errorf("unknown model:\n%s", body)
	}
	if _, err := WriteTraining("torchtitan", "train", Training{Name: "Llama-3.1-8B", Layout: denseLayout, Layers: 80, Release: "0.1"}); err == nil ||
		!strings.Contains(err.Error(), `torchtitan "0.1": mrep writes for 0.3, 0.2.2`) {
		t.Errorf("unknown release: %v", err)
	}
	if r, err := ResolveRelease("torchtitan", "v0.2.2"); err != nil || r.Name != "0.2.2" {
		t.Errorf("v0.2.2: %+v %v", r, err)
	}
}

// Megatron-LM's validate_args rules (megatron/training/arguments.py @d98e8a6), each checked on
// what mrep writes:
//   - the layers (with the embedding and loss where counted) divisible by PP, each stage's by
//     VP: 126 layers on PP16 VP8 count the embedding and loss (128 = 16 x 8), 61 on PP16 take a
//     one-layer first stage, 61 on PP16 VP2 has no split and is refused;
//   - --overlap-param-gather only with the distributed optimizer or Megatron-FSDP;
//   - CUDA_DEVICE_MAX_CONNECTIONS=1 with TP or CP > 1 before Blackwell, unset with Megatron-FSDP;
//   - ZeRO-3 as Megatron-FSDP with its required flags, not the distributed optimizer alone.
func TestMegatronValidateArgsRules(t *testing.T) {
	write := func(tr Training) (string, error) {
		fs, err := WriteTraining("megatron", "x", tr)
		if err != nil {
			return "", err
		}
		return fs.Contents[fs.Names[0]], nil
	}
	has := func(body string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("lacks %q:\n%s", w, body)
			}
		}
	}
	lacks := func(body string, bad ...string) {
		t.Helper()
		for _, w := range bad {
			if strings.Contains(body, w) {
				t.Errorf("has %q:\n%s", w, body)
			}
		}
	}
	l405 := layout.Layout{TP: 8, PP: 16, VP: 8, CP: 1, DP: 8, MBS: 1, GBS: 512, Seq: 8192, ZeRO: 1}
	body, err := write(Training{Model: "meta-llama/Llama-3.1-405B", Layout: l405, Layers: 126, Chip: "H100-SXM"})
	if err != nil {
		t.Fatal(err)
	}
	has(body, "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split", "--num-layers-per-virtual-pipeline-stage 1",
		"export CUDA_DEVICE_MAX_CONNECTIONS=1", "--use-distributed-optimizer", "--overlap-param-gather")
	checkMegatron(t, "405b", body)

	// the same on GB200: Blackwell drops the connections rule
	body, _ = write(Training{Layout: l405, Layers: 126, Chip: "GB200"})
	lacks(body, "CUDA_DEVICE_MAX_CONNECTIONS=1")

	// module recompute in Megatron's names, and the CPU offload of some layers' activations
	lmod := layout.Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 64, MBS: 2, GBS: 256, Seq: 8192, ZeRO: 3, OffloadActivations: 40}
	body, err = write(Training{Layout: lmod, Layers: 80, Chip: "GB200"})
	if err != nil {
		t.Fatal(err)
	}
	has(body, "--cpu-offloading-num-layers 40")
	checkMegatron(t, "offload", body)
	lmod.OffloadActivations, lmod.Recompute = 0, "selective:act,mlp"
	body, _ = write(Training{Layout: lmod, Layers: 48, Chip: "GB200", MoE: true})
	has(body, "--recompute-granularity selective", "--recompute-modules mlp moe_act")
	lacks(body, "moe moe_act") // Megatron's mlp is the dense layers' MLP, as mrep times it; moe would recompute the MoE layers too
	checkMegatron(t, "modules", body)
	lmod.Recompute = "selective:mla_up_proj"
	body, _ = write(Training{Layout: lmod, Layers: 61, Chip: "GB200", MoE: true})
	has(body, "--recompute-modules mla_up_proj")

	// a full-iteration CUDA graph: Megatron's NaN check off (validate_args asserts it), and an
	// MoE model's experts given static shapes (its MoE README), saying what that drops
	lmod.Recompute, lmod.CUDAGraph = "", true
	body, _ = write(Training{Layout: lmod, Layers: 48, Chip: "GB200", MoE: true})
	has(body, "--cuda-graph-impl full_iteration", "--no-check-for-nan-in-loss-and-grad", "--moe-expert-capacity-factor 1.0",
		"--moe-pad-expert-input-to-capacity", "tokens beyond an expert's capacity are dropped")
	checkMegatron(t, "graph", body)
	body, _ = write(Training{Layout: lmod, Layers: 80, Chip: "GB200"})
	has(body, "--cuda-graph-impl full_iteration")
	lacks(body, "capacity")
	for _, fw := range []string{"torchtitan@0.2.2", "torchtitan"} {
		fw, release, _ := strings.Cut(fw, "@")
		fs, err := WriteTraining(fw, "x", Training{Layout: lmod, Layers: 80, Chip: "GB200", Release: release})
		if err != nil {
			t.Fatal(err)
		}
		if body := fs.Contents[fs.Names[0]]; !strings.Contains(body, "full-iteration CUDA graph, which torchtitan has no option for") {
			t.Errorf("%s %s does not say it cannot write the graph:\n%s", fw, release, body)
		}
	}

	dsv3 := layout.Layout{TP: 1, PP: 16, VP: 1, CP: 1, DP: 16, EP: 8, MBS: 1, GBS: 1024, Seq: 4096, ZeRO: 1}
	body, err = write(Training{Layout: dsv3, Layers: 61, Chip: "H100-SXM"})
	if err != nil {
		t.Fatal(err)
	}
	has(body, "--decoder-first-pipeline-num-layers 1")
	lacks(body, "--num-layers-per-virtual-pipeline-stage", "CUDA_DEVICE_MAX_CONNECTIONS") // TP = CP = 1
	dsv3.VP = 2
	if _, err := write(Training{Layout: dsv3, Layers: 61}); err == nil || !strings.Contains(err.Error(), "61 layers over PP 16 x VP 2") {
		t.Errorf("61 layers over PP16 VP2 must be refused, naming the split: %v", err)
	}

	ddp := layout.Layout{TP: 2, PP: 1, VP: 1, CP: 1, DP: 4, MBS: 1, GBS: 8, Seq: 4096, ZeRO: 0}
	body, _ = write(Training{Layout: ddp, Layers: 32, Chip: "H100-SXM"})
	has(body, "--overlap-grad-reduce")
	lacks(body, "--overlap-param-gather", "--use-distributed-optimizer")

	z3 := layout.Layout{TP: 2, PP: 1, VP: 1, CP: 1, DP: 4, MBS: 1, GBS: 8, Seq: 4096, ZeRO: 3}
	body, _ = write(Training{Layout: z3, Layers: 32, Chip: "H100-SXM"})
	has(body, "unset CUDA_DEVICE_MAX_CONNECTIONS", "--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads_params",
		"--no-gradient-accumulation-fusion", "--use-distributed-optimizer", "--ckpt-format fsdp_dtensor", "--overlap-param-gather")
	lacks(body, "export CUDA_DEVICE_MAX_CONNECTIONS=1")
	checkMegatron(t, "zero3", body)
}

// A hostile model id (quotes, backslashes, control characters, a newline that would start a
// TOML key) stays one TOML basic string: escaped as TOML escapes them, never Go's \x.
func TestTorchtitanHostileModelID(t *testing.T) {
	id := "evil\"name\\\x1b[31m\nenable = true\x00"
	mod, err := WriteTraining("torchtitan", "x", Training{Model: id, Title: id + `"""`, Name: id, Layout: denseLayout, Layers: 80})
	if err != nil {
		t.Fatal(err)
	}
	py := mod.Contents[mod.Names[0]]
	if want := `config.hf_assets_path = "./assets/hf/\x1b[31m\x0aenable = true\x00"`; !strings.Contains(py, want) || strings.Count(py, `"""`) != 2 {
		t.Errorf("want %s, and one docstring, in:\n%s", want, py)
	}
	fs, err := WriteTraining("torchtitan", "x", Training{Model: id, Title: id, Layout: denseLayout, Layers: 80, Release: "0.2.2"})
	if err != nil {
		t.Fatal(err)
	}
	body := fs.Contents[fs.Names[0]]
	for i := 0; i < len(body); i++ {
		if c := body[i]; (c < 0x20 && c != '\n') || c == 0x7f {
			t.Fatalf("raw control byte %#x at %d:\n%q", c, i, body)
		}
	}
	want := `hf_assets_path = "evil\"name\\\u001B[31m\u000Aenable = true\u0000"`
	if !strings.Contains(body, want) {
		t.Errorf("want %s in:\n%s", want, body)
	}
	checkTOML(t, "hostile", body)
}

// What the frameworks have no option for is said where it is written: DualPipe to Megatron-LM
// (the nearest overlap written beside the comment), the dispatcher and the all-to-all overlap to
// torchtitan.
func TestTrainingSaysWhatItCannotWrite(t *testing.T) {
	l := moeLayout
	l.A2AOverlap = "dualpipe"
	fs, err := WriteTraining("megatron", "x", Training{Model: "deepseek-ai/DeepSeek-V3", Layout: l, Layers: 61})
	if err != nil {
		t.Fatal(err)
	}
	body := fs.Contents[fs.Names[0]]
	if !strings.Contains(body, "# mrep timed DeepSeek's DualPipe") || !strings.Contains(body, "--overlap-moe-expert-parallel-comm") {
		t.Errorf("dualpipe:\n%s", body)
	}
	checkMegatron(t, "dualpipe", body)
	// activation_func_fp8_input_store is a TransformerConfig field Megatron-LM's parser excludes
	fp8 := moeLayout
	fp8.ActFP8InputStore = true
	fs, err = WriteTraining("megatron", "x", Training{Model: "deepseek-ai/DeepSeek-V3", Layout: fp8, Layers: 61})
	if err != nil {
		t.Fatal(err)
	}
	body = fs.Contents[fs.Names[0]]
	if !strings.Contains(body, "# mrep counted activation_func_fp8_input_store=True") || strings.Contains(body, "fp8-input-store") {
		t.Errorf("fp8 input store:\n%s", body)
	}
	checkMegatron(t, "fp8 input store", body)
	// so is fp8_dot_product_attention
	fa := moeLayout
	fa.Precision, fa.FP8Attention = "mxfp8", true
	fs, err = WriteTraining("megatron", "x", Training{Model: "deepseek-ai/DeepSeek-V3", Layout: fa, Layers: 61})
	if err != nil {
		t.Fatal(err)
	}
	body = fs.Contents[fs.Names[0]]
	if !strings.Contains(body, "# mrep timed fp8_dot_product_attention=True") || strings.Contains(body, "--fp8-dot-product-attention") {
		t.Errorf("fp8 attention:\n%s", body)
	}
	checkMegatron(t, "fp8 attention", body)
	fs, err = WriteTraining("torchtitan", "x", Training{Model: "deepseek-ai/DeepSeek-V3", Name: "DeepSeek-V3", Layout: l, Layers: 61})
	if err != nil {
		t.Fatal(err)
	}
	py := fs.Contents[fs.Names[0]]
	if !strings.Contains(py, "# mrep timed the deepep dispatcher") || !strings.Contains(py, "# mrep timed the dualpipe all-to-all overlap") {
		t.Errorf("torchtitan:\n%s", py)
	}
}

// The experts' fused grouped MLP is an environment switch Megatron reads
// (NVTE_CUTEDSL_FUSED_GROUPED_MLP, experts.py _is_fused_impl_supported), written as an export
// where the layout asks for it and only then.
func TestEmittedFusedGroupedMLP(t *testing.T) {
	l := denseLayout
	for _, on := range []bool{false, true} {
		l.FusedGroupedMLP = on
		fs, err := WriteTraining("megatron", "train", Training{Model: "meta-llama/Llama-3.1-70B", Name: "Llama-3.1-70B-Instruct", Title: "fused", Layout: l, Layers: 80})
		if err != nil {
			t.Fatal(err)
		}
		body := fs.Contents[fs.Names[0]]
		checkMegatron(t, fs.Names[0], body)
		if got := strings.Contains(body, "export NVTE_CUTEDSL_FUSED_GROUPED_MLP=1"); got != on {
			t.Errorf("fused grouped MLP %v: exported %v:\n%s", on, got, body)
		}
	}
}

// Megatron's LM head under MXFP8 (fp8_output_proj, a TransformerConfig field its parser takes as
// --fp8-output-proj) is written where the layout asks for it, and only then.
func TestEmittedFP8OutputProj(t *testing.T) {
	l := denseLayout
	l.Precision = "mxfp8"
	for _, on := range []bool{false, true} {
		l.FP8OutputProj = on
		fs, err := WriteTraining("megatron", "train", Training{Model: "meta-llama/Llama-3.1-70B", Name: "Llama-3.1-70B-Instruct", Title: "mx", Layout: l, Layers: 80, FP8: "mxfp8"})
		if err != nil {
			t.Fatal(err)
		}
		body := fs.Contents[fs.Names[0]]
		checkMegatron(t, fs.Names[0], body)
		if got := strings.Contains(body, "--fp8-output-proj"); got != on || !strings.Contains(body, "--fp8-recipe mxfp8") {
			t.Errorf("fp8_output_proj %v: written %v:\n%s", on, got, body)
		}
	}
}

// Megatron's legacy grouped GEMM (--moe-use-legacy-grouped-gemm, gone from Megatron-LM's parser
// at d98e8a6), Primus-Turbo's grouped GEMM and sync-free MoE (Primus's arguments) are none of
// them options stock Megatron-LM takes, so the script says mrep timed them rather than pass them.
func TestEmittedGroupedGEMM(t *testing.T) {
	l := moeLayout
	for _, c := range []struct {
		gg           string
		stage        int64
		legacy, note bool
	}{{"", 0, false, false}, {"legacy", 0, true, false}, {"turbo", 0, false, true}, {"turbo", 2, false, true}, {"legacy", 1, true, true}} {
		l.GroupedGEMM, l.SyncFreeMoE = c.gg, c.stage
		fs, err := WriteTraining("megatron", "train", Training{Model: "Qwen/Qwen3-30B-A3B", Name: "Qwen3-30B-A3B", Title: "gg", Layout: l, Layers: 48, MoE: true})
		if err != nil {
			t.Fatal(err)
		}
		body := fs.Contents[fs.Names[0]]
		checkMegatron(t, fs.Names[0], body)
		if got := strings.Contains(body, "# mrep timed Megatron's legacy grouped GEMM") || strings.Contains(body, "--moe_use_legacy_grouped_gemm True"); got != c.legacy {
			t.Errorf("grouped gemm %q: legacy note written %v:\n%s", c.gg, got, body)
		}
		if got := strings.Contains(body, "# mrep timed Primus-Turbo's MoE path"); got != c.note {
			t.Errorf("grouped gemm %q, stage %d: Primus note written %v", c.gg, c.stage, got)
		}
		if strings.Contains(body, "--use_turbo_grouped_gemm True") && !strings.Contains(body, "# mrep timed Primus-Turbo's MoE path (--use_turbo_grouped_gemm True") {
			t.Errorf("a Primus argument outside the note:\n%s", body)
		}
	}
	// the legacy path's experts stay 16-bit under an FP8 recipe: the script says so, and only then
	for _, prec := range []string{"", "fp8-cs"} {
		l.GroupedGEMM, l.SyncFreeMoE, l.Precision = "legacy", 0, prec
		fs, err := WriteTraining("megatron", "train", Training{Model: "Qwen/Qwen3-30B-A3B", Name: "Qwen3-30B-A3B", Title: "gg", Layout: l, Layers: 48, MoE: true, FP8: prec})
		if err != nil {
			t.Fatal(err)
		}
		body := fs.Contents[fs.Names[0]]
		checkMegatron(t, fs.Names[0], body)
		if got := strings.Contains(body, "experts' GEMMs ran 16-bit"); got != (prec != "") {
			t.Errorf("legacy under %q: 16-bit experts note written %v", prec, got)
		}
	}
	l.GroupedGEMM, l.Precision = "", moeLayout.Precision
	// the unfused SwiGLU is Megatron's own flag
	l.NoSwiGLUFusion = true
	fs, err := WriteTraining("megatron", "train", Training{Model: "Qwen/Qwen3-30B-A3B", Name: "Qwen3-30B-A3B", Title: "gg", Layout: l, Layers: 48, MoE: true})
	if err != nil {
		t.Fatal(err)
	}
	if body := fs.Contents[fs.Names[0]]; !strings.Contains(body, "--no-bias-swiglu-fusion") {
		t.Errorf("unfused SwiGLU not passed:\n%s", body)
	} else {
		checkMegatron(t, fs.Names[0], body)
	}
	l.NoSwiGLUFusion = false
	// DeepSeek-V3's FP8 dispatch has no Megatron argument: the script says what differs
	l.GroupedGEMM, l.SyncFreeMoE, l.FP8Dispatch, l.Precision = "", 0, true, "fp8-blockwise"
	fs, err = WriteTraining("megatron", "train", Training{Model: "Qwen/Qwen3-30B-A3B", Name: "Qwen3-30B-A3B", Title: "gg", Layout: l, Layers: 48, MoE: true, FP8: "fp8-blockwise"})
	if err != nil {
		t.Fatal(err)
	}
	if body := fs.Contents[fs.Names[0]]; !strings.Contains(body, "# mrep timed the forward dispatch in FP8") {
		t.Errorf("fp8 dispatch not named:\n%s", body)
	}
}
