package emit

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The options each engine documents (the names only), for the commands mrep writes:
//   - vLLM: `vllm serve` engine arguments (docs.vllm.ai, "Engine Arguments") and
//     `vllm bench serve` (benchmarks/README, "vllm bench serve --help").
//   - SGLang: server arguments (docs.sglang.ai, "Server Arguments") and sglang.bench_serving's
//     arguments (python/sglang/bench_serving.py).
//   - TensorRT-LLM: trtllm-serve's options (docs, "trtllm-serve"), the LLM API's fields for
//     --extra_llm_api_options (enable_attention_dp, enable_chunked_prefill, kv_cache_config.dtype and
//     free_gpu_memory_fraction, cuda_graph_config.enable_padding and max_batch_size), and
//     tensorrt_llm/serve/scripts/benchmark_serving.py.
var documented = map[string][]string{
	"vllm serve": {"--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size", "--enable-expert-parallel",
		"--max-num-seqs", "--max-num-batched-tokens", "--gpu-memory-utilization", "--max-model-len",
		"--kv-cache-dtype", "--quantization", "--speculative-config", "--port"},
	"vllm bench serve": {"--model", "--dataset-name", "--random-input-len", "--random-output-len", "--random-range-ratio",
		"--ignore-eos", "--num-prompts", "--max-concurrency", "--request-rate", "--port"},
	"python -m sglang.launch_server": {"--model-path", "--tp-size", "--dp-size", "--enable-dp-attention", "--ep-size", "--pp-size",
		"--max-running-requests", "--chunked-prefill-size", "--mem-fraction-static", "--context-length", "--kv-cache-dtype",
		"--quantization", "--port"},
	"python -m sglang.bench_serving": {"--backend", "--dataset-name", "--random-input-len", "--random-output-len",
		"--random-range-ratio", "--num-prompts", "--max-concurrency", "--request-rate", "--port"},
	"python -m atom.entrypoints.openai_server":    {},
	"python -m atom.benchmarks.benchmark_serving": {},
	"trtllm-serve": {"--backend", "--tp_size", "--pp_size", "--ep_size", "--max_batch_size", "--max_num_tokens", "--max_seq_len",
		"--kv_cache_free_gpu_memory_fraction", "--extra_llm_api_options", "--port"},
	"python -m tensorrt_llm.serve.scripts.benchmark_serving": {"--model", "--backend", "--dataset-name", "--random-input-len",
		"--random-output-len", "--random-ids", "--ignore-eos", "--num-prompts", "--max-concurrency", "--request-rate", "--port"},
}

var yamlKeys = []string{"enable_attention_dp", "enable_chunked_prefill", "kv_cache_config", "dtype", "free_gpu_memory_fraction", "cuda_graph_config", "enable_padding", "max_batch_size"}

// moe is a DeepSeek-style deployment: attention data-parallel over 8 GPUs beside EP8, FP8,
// 64 users per replica, two replicas.
var moe = Deployment{Model: "deepseek-ai/DeepSeek-V3", Title: "test deployment", TP: 1, EP: 8, PP: 1, Replicas: 2, MaxSeqs: 256,
	MaxTokens: 8192, KVFraction: 0.9, MaxLen: 3072, FP8Weights: true, FP8KV: true, ISL: 2000, OSL: 500, Users: 64}

// dense is a TP4 PP2 BF16 deployment under an open rate.
var dense = Deployment{Model: "meta-llama/Llama-3.1-70B-Instruct", Title: "dense test", TP: 4, EP: 1, PP: 2, Replicas: 1, MaxSeqs: 128,
	MaxTokens: 2048, KVFraction: 0.88, MaxLen: 4096, ISL: 3000, OSL: 300, Rate: 2.5}

// Every engine's files match their goldens; every option written is one the engine documents;
// the layout and limits mrep planned are the ones written.
func TestEmittedConfigurations(t *testing.T) {
	for _, c := range []struct {
		name string
		d    Deployment
	}{{"moe", moe}, {"dense", dense}} {
		for _, engine := range Engines {
			fs, err := Write(engine, "deploy-1", c.d)
			if engine == "atom" && c.d.PP > 1 {
				// ATOM has no pipeline stages: refused, naming why
				if !errors.Is(err, ErrNotExpressible) || !strings.Contains(err.Error(), "pipeline") {
					t.Errorf("%s on ATOM: %v", c.name, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			r, _ := ResolveRelease(engine, "")
			for _, n := range fs.Names {
				body := fs.Contents[n]
				golden(t, filepath.Join(c.name, n), body)
				if strings.HasSuffix(n, ".yml") {
					checkYAML(t, n, body, r)
					continue
				}
				checkOptions(t, n, body, engine, r)
			}
			all := strings.Join(func() []string {
				var v []string
				for _, n := range fs.Names {
					v = append(v, fs.Contents[n])
				}
				return v
			}(), "\n")
			for _, want := range wants(engine, c.d) {
				if !strings.Contains(all, want) {
					t.Errorf("%s %s: lacks %q", c.name, engine, want)
				}
			}
		}
	}
	if _, err := Write("tgi", "x", moe); err == nil {
		t.Error("an unknown engine must be refused")
	}
	bad := moe
	bad.KVFraction = 1.5
	if _, err := Write("vllm", "x", bad); err == nil {
		t.Error("a KV fraction above 1 must be refused")
	}
	evil := dense
	evil.Model = "x'; rm -rf / #"
	evil.Title = "line\nbreak\x1b[31m"
	fs, _ := Write("vllm", "x", evil)
	body := fs.Contents["x-vllm.sh"]
	if !strings.Contains(body, `MODEL=${MODEL:-'x'\''; rm -rf / #'}`) || strings.Contains(body, "\x1b") || strings.Contains(body, "\nbreak") && !strings.Contains(body, "# break") {
		t.Errorf("hostile names must stay quoted and on comment lines:\n%s", body)
	}
}

// wants are the planned values each engine's files must carry.
func wants(engine string, d Deployment) []string {
	switch engine {
	case "vllm":
		if d.DP() > 1 {
			return []string{"--data-parallel-size 8", "--enable-expert-parallel", "--max-num-seqs 32", "--kv-cache-dtype fp8", "--max-concurrency 64"}
		}
		return []string{"--tensor-parallel-size 4", "--pipeline-parallel-size 2", "--max-num-batched-tokens 2048", "--request-rate 2.5"}
	case "atom":
		if d.DP() > 1 {
			return []string{"--tensor-parallel-size 8", "--enable-dp-attention", "--enable-expert-parallel", "--max-num-seqs 32", "--kv_cache_dtype fp8", "--max-concurrency 64"}
		}
		return nil // dense: PP2, which ATOM cannot run (refused above)
	case "sglang":
		if d.DP() > 1 {
			return []string{"--tp-size 8", "--attn-dp-size 8", "--ep-size 8", "--max-running-requests 256", fmt.Sprintf("--chunked-prefill-size %d", 8*d.MaxTokens)}
		}
		return []string{"--tp-size 4", "--pp-size 2", "--chunked-prefill-size 2048", "--mem-fraction-static 0.88"}
	}
	if d.DP() > 1 {
		return []string{"--tp_size 8", "--ep_size 8", "enable_attention_dp: true", "dtype: fp8", "max_batch_size: 32", "--max_batch_size 32", "enable_chunked_prefill: true"}
	}
	return []string{"--tp_size 4", "--pp_size 2", "enable_attention_dp: false", "dtype: auto", "--max_num_tokens 2048"}
}

var optRe = regexp.MustCompile(`(?:^|\s)(--[a-z0-9_-]+)(?:\s+('[^']*'|[^\s-][^\s]*))?`)

// releaseTable is a release's transcribed table (emit/testdata/TABLE): section to names.
func releaseTable(t *testing.T, r Release) map[string]map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", r.Table))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	section := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "["):
			section = strings.Trim(l, "[]")
			out[section] = map[string]bool{}
		default:
			out[section][l] = true
		}
	}
	return out
}

// commandSections are, per engine, the table sections that hold each command's options, and the
// options whose values the table lists (option: section).
var commandSections = map[string]map[string]string{
	"sglang": {"python -m sglang.launch_server": "launch_server", "python -m sglang.bench_serving": "bench_serving"},
	"vllm":   {"vllm serve": "serve", "vllm bench serve": "bench serve"},
	"trtllm": {"trtllm-serve": "trtllm-serve", "python -m tensorrt_llm.serve.scripts.benchmark_serving": "benchmark_serving"},
	"atom":   {"python -m atom.entrypoints.openai_server": "openai_server", "python -m atom.benchmarks.benchmark_serving": "benchmark_serving"},
}
var valueSections = map[string]map[string]string{
	"sglang": {"--kv-cache-dtype": "kv-cache-dtype", "--quantization": "quantization", "--speculative-algorithm": "speculative-algorithm"},
	"vllm":   {"--kv-cache-dtype": "kv-cache-dtype", "--quantization": "quantization"},
	"atom":   {"--kv_cache_dtype": "kv_cache_dtype", "--method": "method"},
}

// minOptions guards against a truncated table: each command of the engine takes at least this
// many options (ATOM's server 41 at 0.1.5, the others hundreds).
var minOptions = map[string]int{"vllm": 50, "sglang": 50, "trtllm": 50, "atom": 30}

// checkOptions splits the script into its commands (the server's, the benchmark's) and checks
// each option against the release's table transcribed from the engine's source (or, for an
// engine without one, the names its documentation gives), and each value the table lists.
func checkOptions(t *testing.T, name, body, engine string, r Release) {
	t.Helper()
	joined := strings.ReplaceAll(strings.ReplaceAll(body, "\\\n#", " "), "\\\n", " ")
	found := 0
	var table map[string]map[string]bool
	if r.Table != "" {
		table = releaseTable(t, r)
	}
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		for cmd, opts := range documented {
			if !strings.HasPrefix(line, cmd+" ") {
				continue
			}
			found++
			known := map[string]bool{}
			for _, o := range opts {
				known[o] = true
			}
			source := "its documentation gives"
			if sec, ok := commandSections[engine][cmd]; ok && table != nil {
				known, source = table[sec], r.Table+" ["+sec+"] lists"
				if len(known) < minOptions[engine] {
					t.Fatalf("%s: %d options in %s [%s]: truncated?", name, len(known), r.Table, sec)
				}
			}
			for _, m := range optRe.FindAllStringSubmatch(line, -1) {
				if !known[m[1]] {
					t.Errorf("%s: %s %s is not an option %s", name, cmd, m[1], source)
				}
				if sec, ok := valueSections[engine][m[1]]; ok && table != nil && !table[sec][strings.Trim(m[2], "'")] {
					t.Errorf("%s: %s %s: %q is not a value %s [%s] lists", name, cmd, m[1], m[2], r.Table, sec)
				}
				if m[1] == "--speculative-config" && table != nil {
					var spec map[string]any
					if err := json.Unmarshal([]byte(strings.Trim(m[2], "'")), &spec); err != nil {
						t.Errorf("%s: --speculative-config %s: %v", name, m[2], err)
					}
					for k := range spec {
						if !table["speculative-config"][k] {
							t.Errorf("%s: --speculative-config key %q is not a field %s lists", name, k, r.Table)
						}
					}
					if !table["speculative-config method"][fmt.Sprint(spec["method"])] {
						t.Errorf("%s: --speculative-config method %v is not one %s lists", name, spec["method"], r.Table)
					}
				}
			}
		}
	}
	if found != 2 {
		t.Errorf("%s: %d commands recognised, want the server's and the benchmark's", name, found)
	}
}

// checkYAML checks each key of the LLM API options file against the release's table: the top
// level against [llm_api], a nested key against its section ([kv_cache_config], ...).
func checkYAML(t *testing.T, name, body string, r Release) {
	t.Helper()
	table := releaseTable(t, r)
	parent := ""
	keys := 0
	for _, line := range strings.Split(body, "\n") {
		l := strings.TrimSpace(line)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, _, ok := strings.Cut(l, ":")
		sec := "llm_api"
		if strings.HasPrefix(line, "  ") {
			sec = parent
			if parent == "speculative_config" {
				sec = "speculative_config MTP"
			}
		} else {
			parent = k
		}
		if !ok || !table[sec][k] {
			t.Errorf("%s: %q is not a field %s [%s] lists", name, l, r.Table, sec)
		}
		keys++
	}
	if keys < len(yamlKeys) {
		t.Errorf("%s: %d keys, want at least %d", name, keys, len(yamlKeys))
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./emit -update writes it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from its golden (go test ./emit -update to accept):\n%s", name, got)
	}
}

// Each release of each engine gets its own options, every one checked against that release's
// table: SGLang before 0.5.23 runs the attention data-parallel with --dp-size and
// --enable-dp-attention, from 0.5.23 with --attn-dp-size; MTP speculative decoding is written
// in each engine's own terms; what no option can carry (a draft model for a model without MTP
// heads, the FP4 checkpoint) is a note in the script and in Files.Notes.
func TestEmitReleasesAndFeatures(t *testing.T) {
	for _, engine := range Engines {
		for _, r := range Releases[engine] {
			d := moe
			d.Release, d.SpecTokens, d.MTP = r.Name, 2, true
			fs, err := Write(engine, "x", d)
			if err != nil {
				t.Fatalf("%s %s: %v", engine, r.Name, err)
			}
			all := ""
			for _, n := range fs.Names {
				all += fs.Contents[n]
				if strings.HasSuffix(n, ".yml") {
					checkYAML(t, n, fs.Contents[n], r)
				} else {
					checkOptions(t, engine+" "+r.Name, fs.Contents[n], engine, r)
				}
			}
			var want []string
			switch engine {
			case "sglang":
				want = []string{"--speculative-algorithm EAGLE", "--speculative-num-steps 2", "--speculative-num-draft-tokens 3"}
				if r.atLeast("0.5.23") {
					want = append(want, "--attn-dp-size 8")
				} else {
					want = append(want, "--dp-size 8", "--enable-dp-attention")
				}
			case "vllm":
				want = []string{`--speculative-config '{"method": "` + r.mtpMethod() + `", "num_speculative_tokens": 2}'`}
			case "trtllm":
				want = []string{"speculative_config:\n  decoding_type: MTP\n  max_draft_len: 2"}
			case "atom":
				want = []string{"--method mtp", "--num-speculative-tokens 2", "--enable-dp-attention"}
			}
			for _, w := range want {
				if !strings.Contains(all, w) {
					t.Errorf("%s %s lacks %q:\n%s", engine, r.Name, w, all)
				}
			}
			// ATOM alone has no option for FP8 weights: it reads them from the checkpoint
			if n := len(fs.Notes); engine != "atom" && n != 0 || engine == "atom" && (n != 1 || !strings.Contains(fs.Notes[0], "FP8 checkpoint")) {
				t.Errorf("%s %s: notes %v for what its options carry", engine, r.Name, fs.Notes)
			}
		}
		d := dense
		d.SpecTokens, d.FP4Weights = 3, true
		if engine == "atom" {
			d.PP = 1 // ATOM has no pipeline stages
		}
		fs, err := Write(engine, "x", d)
		if err != nil {
			t.Fatal(err)
		}
		body := fs.Contents[fs.Names[0]]
		if len(fs.Notes) != 2 || !strings.Contains(body, "# NOTE: the plan timed speculative decoding with 3 draft tokens") ||
			!strings.Contains(body, "# NOTE: the plan timed 4-bit (FP4) weights") || strings.Contains(body, "speculative") && strings.Contains(body, "--speculative") {
			t.Errorf("%s: notes %v\n%s", engine, fs.Notes, body)
		}
	}
	if _, err := Write("sglang", "x", Deployment{Release: "0.4"}); err == nil {
		t.Error("an unknown release must be refused")
	}
}

// EP groups inside a TP group have no vLLM options: refused as not expressible (the caller
// notes it), while SGLang and TensorRT-LLM write their ep sizes.
func TestVLLMRefusesExpertGroupsInsideTP(t *testing.T) {
	d := dense
	d.TP, d.EP, d.PP = 8, 2, 1
	if _, err := Write("vllm", "x", d); !errors.Is(err, ErrNotExpressible) || !strings.Contains(err.Error(), "EP2 x ETP4") {
		t.Errorf("vLLM TP8 EP2: %v, want not expressible, naming EP2 x ETP4", err)
	}
	for _, e := range []string{"sglang", "trtllm"} {
		fs, err := Write(e, "x", d)
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		if body := fs.Contents[fs.Names[0]]; !strings.Contains(body, "-size 2") && !strings.Contains(body, "--ep_size 2") {
			t.Errorf("%s lacks the EP size 2:\n%s", e, body)
		}
	}
}

// A model id an engine would read as an option is refused; control characters a name brings
// into a file are quoted in it and shown escaped when the files are printed.
func TestEmitHostileModelIDs(t *testing.T) {
	d := dense
	d.Model = "--trust-remote-code"
	if _, err := Write("vllm", "x", d); err == nil || !strings.Contains(err.Error(), "starts with '-'") {
		t.Errorf("a dash id: %v", err)
	}
	if _, err := WriteTraining("megatron", "x", Training{Model: "-x", Layout: denseLayout, Layers: 80}); err == nil {
		t.Error("a dash id for training must be refused")
	}
	d.Model = "evil\x1b[31m\x07name"
	fs, err := Write("sglang", "x", d)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteAll(&b, fs); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07") || !strings.Contains(b.String(), `evil\x1b[31m\x07name`) {
		t.Errorf("printed:\n%q", b.String())
	}
}
