package emit

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/layout"
)

// The Megatron-LM arguments mrep writes (megatron/training/arguments.py's names) and the
// torchtitan job config fields (torchtitan/config/job_config.py's sections and fields).
var megatronOptions = []string{"--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--num-layers-per-virtual-pipeline-stage",
	"--context-parallel-size", "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--moe-token-dispatcher-type",
	"--moe-enable-deepep", "--overlap-moe-expert-parallel-comm", "--sequence-parallel", "--tp-comm-overlap", "--micro-batch-size",
	"--global-batch-size", "--seq-length", "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
	"--recompute-granularity", "--recompute-method", "--recompute-num-layers", "--bf16", "--fp8-format", "--fp8-recipe", "--fp8-param-gather",
	"--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers", "--nproc-per-node", "--nnodes"}

var torchtitanFields = map[string][]string{
	"model":                 {"hf_assets_path"},
	"parallelism":           {"data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree", "pipeline_parallel_degree", "pipeline_parallel_schedule", "context_parallel_degree", "expert_parallel_degree", "enable_async_tensor_parallel"},
	"training":              {"local_batch_size", "global_batch_size", "seq_len", "mixed_precision_param"},
	"activation_checkpoint": {"mode"},
	"compile":               {"enable"},
	"float8":                {"recipe_name"},
}

var denseLayout = layout.Layout{TP: 4, PP: 4, VP: 5, CP: 2, DP: 2, MBS: 1, GBS: 128, Seq: 8192, ZeRO: 1, Recompute: "selective", TPOverlap: true}
var moeLayout = layout.Layout{TP: 1, PP: 16, VP: 2, CP: 1, DP: 16, EP: 8, MBS: 1, GBS: 1024, Seq: 4096, ZeRO: 1, Recompute: "full", RecomputeLayers: 2, Dispatcher: "deepep", A2AOverlap: "1f1b", Replicas: 2}

// The written layouts match their goldens, use only documented names, and carry the planned
// degrees and batches.
func TestEmittedTraining(t *testing.T) {
	for _, c := range []struct {
		name   string
		t      Training
		wantMg []string
		wantTT []string
	}{
		{"dense", Training{Model: "meta-llama/Llama-3.1-70B", Title: "dense", Layout: denseLayout, Layers: 80},
			[]string{"--tensor-model-parallel-size 4", "--pipeline-model-parallel-size 4", "--num-layers-per-virtual-pipeline-stage 4", "--context-parallel-size 2", "--sequence-parallel", "--recompute-granularity selective", "--use-distributed-optimizer"},
			[]string{"tensor_parallel_degree = 4", "pipeline_parallel_schedule = \"Interleaved1F1B\"", "data_parallel_shard_degree = 2", "mode = \"selective\"", "enable_async_tensor_parallel = true"}},
		{"moe", Training{Model: "deepseek-ai/DeepSeek-V3", Title: "moe", Layout: moeLayout, Layers: 61, FP8: "fp8-blockwise"},
			[]string{"--expert-model-parallel-size 8", "--moe-enable-deepep", "--overlap-moe-expert-parallel-comm", "--recompute-method block", "--recompute-num-layers 2", "--fp8-recipe blockwise", "do not split evenly"},
			[]string{"expert_parallel_degree = 8", "data_parallel_replicate_degree = 2", "data_parallel_shard_degree = 8", "mode = \"full\"", "[float8]"}},
	} {
		for _, fw := range TrainFrameworks {
			fs, err := WriteTraining(fw, "train", c.t)
			if err != nil {
				t.Fatal(err)
			}
			n := fs.Names[0]
			body := fs.Contents[n]
			golden(t, filepath.Join("train-"+c.name, n), body)
			want := c.wantMg
			if fw == "torchtitan" {
				want = c.wantTT
				checkTOML(t, n, body)
			} else {
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

func checkMegatron(t *testing.T, name, body string) {
	t.Helper()
	known := map[string]bool{}
	for _, a := range megatronOptions {
		known[a] = true
	}
	for _, m := range optRe.FindAllStringSubmatch(body, -1) {
		if !known[m[1]] {
			t.Errorf("%s: %s is not a Megatron-LM argument mrep means to write", name, m[1])
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
