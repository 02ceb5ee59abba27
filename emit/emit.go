// Package emit writes a planned deployment as something to run: the serving engine's launch
// command (and config file) for the layout and limits mrep planned, and the engine's own
// benchmark command for the planned workload, so a prediction can be checked on real GPUs.
// Each engine's options are the ones its documentation names: vLLM's `vllm serve` engine
// arguments and `vllm bench serve`, SGLang's server arguments and `sglang.bench_serving`,
// TensorRT-LLM's `trtllm-serve` options, its LLM API YAML and its benchmark_serving script.
package emit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/mrep-dev/mrep/internal/shell"
	"github.com/mrep-dev/mrep/serve"
)

// Engines are the engines a deployment can be written for.
var Engines = []string{"vllm", "sglang", "trtllm", "atom"}

// Deployment is what one replica of a planned deployment runs, and the load it was planned for.
type Deployment struct {
	// Model is what the engine loads: a Hugging Face id or a local path (a placeholder the
	// script lets MODEL override).
	Model string
	// Title says which deployment of which plan this is (a comment in the script).
	Title string
	// Layout: tensor-parallel and expert-parallel GPUs, pipeline stages. EP > TP is the
	// attention data-parallel over EP/TP groups beside experts over EP GPUs.
	TP, EP, PP int64
	Replicas   int64
	// Limits: sequences one replica runs, tokens per step, share of free memory for the KV
	// cache, the longest sequence (prompt + output).
	MaxSeqs, MaxTokens int64
	KVFraction         float64
	MaxLen             int64
	// FP8Weights: quantize the weights to FP8 (the checkpoint may already be); FP8KV: an FP8
	// KV cache.
	FP8Weights, FP8KV bool
	// The planned load: ISL/OSL, and a closed loop of Users or an open Rate (req/s) per
	// replica; neither: offline (a benchmark at the batch cap).
	ISL, OSL int64
	Users    float64
	Rate     float64
	// SpecTokens are the draft tokens per step the plan timed (0: none); MTP says the model
	// carries its own multi-token-prediction heads (num_nextn_predict_layers), the drafter the
	// engines run for it. Without them a separate draft model is needed, which mrep cannot name.
	SpecTokens int
	MTP        bool
	// FP4Weights: the plan timed 4-bit weights, which an engine loads from an FP4 checkpoint
	// (NVFP4, MXFP4) as stored: MODEL must be one.
	FP4Weights bool
	// Release is the engine release to write for (ResolveRelease; "": the newest checked).
	Release string
	// Meta are KEY=VALUE pairs the benchmark writes into its result file (vLLM's --metadata,
	// SGLang's --tag): the plan's id and what ran, so `mrep ingest` of the result needs no flags.
	Meta   []string
	result string // the benchmark's result file (set by Write)
}

// DP is the attention data-parallel groups of the replica.
func (d Deployment) DP() int64 {
	if d.EP > d.TP && d.TP > 0 {
		return d.EP / d.TP
	}
	return 1
}

// GPUs is one replica's GPUs.
func (d Deployment) GPUs() int64 { return max(d.TP, d.EP) * max(d.PP, 1) }

// Files is what an engine's emission writes: file name to contents (the launch script first),
// and Notes, what the plan depends on that the files cannot say in the engine's own options
// (each is also a comment in the script).
type Files struct {
	Names    []string
	Contents map[string]string
	Notes    []string
}

func (f *Files) add(name, body string) {
	if f.Contents == nil {
		f.Contents = map[string]string{}
	}
	f.Names = append(f.Names, name)
	f.Contents[name] = body
}

// ErrNotExpressible marks a planned layout the engine has no options for: the deployment is
// not written, and the caller says why.
var ErrNotExpressible = errors.New("the engine cannot run this layout")

// Write is the engine's files for d; prefix names them (deploy-1).
func Write(engine, prefix string, d Deployment) (Files, error) {
	if err := d.check(); err != nil {
		return Files{}, err
	}
	if engine == "vllm" && d.EP > 1 && d.EP < d.TP {
		// vLLM's experts are either tensor-split over the TP group (no --enable-expert-parallel)
		// or whole on each of TP x DP ranks (with it): it has no EP groups inside TP
		return Files{}, fmt.Errorf("%w: vLLM splits experts over all %d ranks or none, not EP%d x ETP%d; emit it for sglang or trtllm, or plan vLLM's own layouts",
			ErrNotExpressible, d.TP, d.EP, d.TP/d.EP)
	}
	if engine == "atom" && (d.PP > 1 || d.EP > 1 && d.EP < d.TP) {
		// ATOM 0.1.5 has no pipeline stages, and its experts are split over every rank
		// (--enable-expert-parallel) or tensor-split over all of them: no EP groups inside TP
		return Files{}, fmt.Errorf("%w: ATOM has no pipeline parallelism and no EP%d x ETP groups inside TP%d; emit it for sglang, or plan ATOM's own layouts",
			ErrNotExpressible, d.EP, d.TP)
	}
	if !slices.Contains(Engines, engine) {
		return Files{}, fmt.Errorf("engine %q: want vllm, sglang, trtllm or atom", engine)
	}
	r, err := ResolveRelease(engine, d.Release)
	if err != nil {
		return Files{}, err
	}
	var f Files
	f.Notes = d.unwritten(engine)
	d.result = prefix + "-" + engine + "-result.json"
	if len(d.Meta) > 0 {
		d.Meta = append(append([]string(nil), d.Meta...), "mrep_engine="+engine, "mrep_release="+r.Name)
	}
	if engine == "sglang" {
		d.result += "l" // one JSON line per run, appended
	}
	switch engine {
	case "vllm":
		f.add(prefix+"-vllm.sh", vllm(d, r))
	case "sglang":
		f.add(prefix+"-sglang.sh", sglang(d, r))
	case "trtllm":
		f.add(prefix+"-trtllm.sh", trtllm(d, r, prefix+"-trtllm.yml"))
		f.add(prefix+"-trtllm.yml", trtllmYAML(d))
	case "atom":
		f.add(prefix+"-atom.sh", atom(d, r))
	}
	return f, nil
}

// unwritten says what the plan timed that the engine's options cannot carry: the draft model
// of speculative decoding for a model without MTP heads, and the FP4 checkpoint 4-bit weights
// come from (the engines read its quantization from the checkpoint, not from an option).
func (d Deployment) unwritten(engine string) []string {
	var notes []string
	if d.SpecTokens > 0 && !d.MTP {
		notes = append(notes, fmt.Sprintf("the plan timed speculative decoding with %d draft tokens per step, but the model has no MTP heads of its own: "+
			"name a draft model in the %s options to run it (without one the engine decodes a token per step, slower than planned)", d.SpecTokens, engine))
	}
	if d.FP4Weights {
		notes = append(notes, "the plan timed 4-bit (FP4) weights: MODEL must be an FP4 checkpoint (NVFP4 or MXFP4), whose quantization the engine reads from its config")
	}
	if engine == "atom" && d.FP8Weights && !d.FP4Weights {
		notes = append(notes, "the plan timed FP8 weights: ATOM reads them from an FP8 checkpoint (MODEL), as AMD's recipes run")
	}
	return notes
}

// noteLines are the notes as comment lines of a script.
func (d Deployment) noteLines(engine string) string {
	var b strings.Builder
	for _, n := range d.unwritten(engine) {
		fmt.Fprintf(&b, "# NOTE: %s.\n", n)
	}
	return b.String()
}

func (d Deployment) check() error {
	switch {
	case strings.HasPrefix(d.Model, "-"):
		return fmt.Errorf("model %q starts with '-': the engine would read it as an option; give --model-id a path (./%s) or a Hugging Face id", oneLine(d.Model), oneLine(d.Model))
	case d.TP < 1 || d.EP < 1 || d.PP < 1:
		return fmt.Errorf("layout TP%d EP%d PP%d: every degree must be >= 1", d.TP, d.EP, d.PP)
	case d.MaxSeqs < 1 || d.MaxTokens < 1 || d.MaxLen < 2:
		return fmt.Errorf("limits: %d sequences, %d tokens per step, %d-token context: each must be positive", d.MaxSeqs, d.MaxTokens, d.MaxLen)
	case !(d.KVFraction > 0 && d.KVFraction < 1):
		return fmt.Errorf("KV fraction %g: want a share in (0, 1)", d.KVFraction)
	case d.ISL < 1 || d.OSL < 1:
		return fmt.Errorf("workload %d/%d: lengths must be >= 1", d.ISL, d.OSL)
	}
	return nil
}

// header is the script's opening: what it runs and what mrep predicted, MODEL overridable.
func header(d Deployment, engine string) string {
	var b strings.Builder
	b.WriteString("#!/usr/bin/env bash\n")
	for _, l := range strings.Split(d.Title, "\n") {
		fmt.Fprintf(&b, "# %s\n", oneLine(l))
	}
	fmt.Fprintf(&b, "# One replica on %d GPUs (TP%d", d.GPUs(), d.TP)
	if d.EP > 1 {
		fmt.Fprintf(&b, ", EP%d", d.EP)
	}
	if d.DP() > 1 {
		fmt.Fprintf(&b, ", attention data-parallel x%d", d.DP())
	}
	if d.PP > 1 {
		fmt.Fprintf(&b, ", PP%d", d.PP)
	}
	b.WriteString(")")
	if d.Replicas > 1 {
		fmt.Fprintf(&b, "; the plan runs %d replicas behind a load balancer, each started like this one", d.Replicas)
	}
	fmt.Fprintf(&b, ".\n# Written by mrep for %s. Start the server, then run the benchmark from another shell.\n", engine)
	b.WriteString("set -euo pipefail\n")
	fmt.Fprintf(&b, "MODEL=${MODEL:-%s}  # the model's Hugging Face id or local path\n", shell.Quote(d.Model))
	return b.String()
}

// atom is AMD's ATOM server (ROCm/ATOM) and its benchmark client, a port of vLLM's
// benchmark_serving.py: options as the release's table lists them (emit/testdata).
func atom(d Deployment, r Release) string {
	var b strings.Builder
	b.WriteString(header(d, "ATOM "+r.Name))
	b.WriteString(d.noteLines("atom"))
	args := []string{"python -m atom.entrypoints.openai_server --model \"$MODEL\"", fmt.Sprintf("--tensor-parallel-size %d", max(d.TP, d.EP))}
	if d.DP() > 1 {
		// ATOM flattens TP into data-parallel attention: one attention per GPU, the experts
		// over all of them (docs/distributed_guide.md)
		args = append(args, "--enable-dp-attention")
	}
	if d.EP > 1 {
		args = append(args, "--enable-expert-parallel")
	}
	// each data-parallel rank schedules its own sequences, as vLLM's do
	args = append(args, d.vllmLimits()...)
	if d.FP8KV {
		args = append(args, "--kv_cache_dtype fp8")
	}
	if d.SpecTokens > 0 && d.MTP {
		args = append(args, "--method mtp", fmt.Sprintf("--num-speculative-tokens %d", d.SpecTokens))
	}
	args = append(args, "--server-port 8000")
	b.WriteString(command(args))
	// ATOM's client draws lengths from [ratio x L, L]: 1 is the fixed lengths mrep planned
	bench := []string{"python -m atom.benchmarks.benchmark_serving --model \"$MODEL\"", "--backend vllm", "--dataset-name random",
		fmt.Sprintf("--random-input-len %d", d.ISL), fmt.Sprintf("--random-output-len %d", d.OSL), "--random-range-ratio 1", "--ignore-eos"}
	bench = append(bench, d.savedResult()...) // a port of vLLM's benchmark_serving.py
	b.WriteString(benchmark(d, "8000", bench...))
	return b.String()
}

// vllmLimits are the scheduler and memory limits as vLLM's server options name them (ATOM's,
// derived from vLLM, take the same): sequences per data-parallel rank, the token budget, the
// share of the GPU and the longest sequence.
func (d Deployment) vllmLimits() []string {
	return []string{fmt.Sprintf("--max-num-seqs %d", d.perRank()), fmt.Sprintf("--max-num-batched-tokens %d", d.MaxTokens),
		fmt.Sprintf("--gpu-memory-utilization %.2f", d.KVFraction), fmt.Sprintf("--max-model-len %d", d.MaxLen)}
}

// savedResult are the options of vLLM's benchmark client (and of the clients ported from it)
// that save its result with the plan's metadata, so mrep ingest reads it back with nothing else
// said (none when the plan has no metadata to carry).
func (d Deployment) savedResult() []string {
	if len(d.Meta) == 0 {
		return nil
	}
	return []string{"--save-result", "--result-filename " + shell.Quote(d.result), "--metadata " + strings.Join(quoteAll(d.Meta), " ")}
}

// load is the benchmark's load: users, a rate, or offline at the batch cap; and how many
// requests (ten per user, or enough for the steady state).
func (d Deployment) load() (concurrency int64, rate float64, prompts int64) {
	switch {
	case d.Rate > 0:
		return 0, d.Rate, int64(math.Max(100, math.Ceil(d.Rate*120)))
	case d.Users > 0:
		u := int64(math.Ceil(d.Users))
		return u, 0, 10 * u
	}
	return d.MaxSeqs, 0, 5 * d.MaxSeqs
}

func vllm(d Deployment, r Release) string {
	var b strings.Builder
	b.WriteString(header(d, "vLLM (V1 engine) "+r.Name))
	b.WriteString(d.noteLines("vllm"))
	args := []string{"vllm serve \"$MODEL\"", fmt.Sprintf("--tensor-parallel-size %d", d.TP)}
	if d.PP > 1 {
		args = append(args, fmt.Sprintf("--pipeline-parallel-size %d", d.PP))
	}
	if d.DP() > 1 {
		args = append(args, fmt.Sprintf("--data-parallel-size %d", d.DP()))
	}
	if d.EP > 1 {
		args = append(args, "--enable-expert-parallel")
	}
	// each data-parallel rank runs its own engine core and scheduler: --max-num-seqs and
	// --max-num-batched-tokens are per rank. The KV block size is the engine's (MLA forces 64).
	args = append(args, d.vllmLimits()...)
	if d.FP8KV {
		args = append(args, "--kv-cache-dtype fp8")
	}
	if d.FP8Weights && !d.FP4Weights {
		args = append(args, "--quantization fp8")
	}
	if d.SpecTokens > 0 && d.MTP {
		// the model's own MTP heads draft (vLLM's speculative decoding docs, "MTP")
		args = append(args, fmt.Sprintf(`--speculative-config '{"method": %q, "num_speculative_tokens": %d}'`, r.mtpMethod(), d.SpecTokens))
	}
	args = append(args, "--port 8000")
	b.WriteString(command(args))
	bench := []string{"vllm bench serve --model \"$MODEL\"", "--dataset-name random", fmt.Sprintf("--random-input-len %d", d.ISL),
		fmt.Sprintf("--random-output-len %d", d.OSL), "--random-range-ratio 0", "--ignore-eos"}
	bench = append(bench, d.savedResult()...)
	b.WriteString(benchmark(d, "8000", bench...))
	return b.String()
}

func sglang(d Deployment, r Release) string {
	var b strings.Builder
	b.WriteString(header(d, "SGLang "+r.Name))
	b.WriteString(d.noteLines("sglang"))
	args := []string{"python -m sglang.launch_server --model-path \"$MODEL\"", fmt.Sprintf("--tp-size %d", max(d.TP, d.EP))}
	if d.DP() > 1 {
		if r.atLeast("0.5.23") {
			// 0.5.23 deprecates --enable-dp-attention: the attention data-parallel size is its own
			// option, and --dp-size counts whole model replicas (arg_groups/parallel_hook.py)
			args = append(args, fmt.Sprintf("--attn-dp-size %d", d.DP()))
		} else {
			args = append(args, fmt.Sprintf("--dp-size %d", d.DP()), "--enable-dp-attention")
		}
	}
	if d.EP > 1 {
		args = append(args, fmt.Sprintf("--ep-size %d", d.EP))
	}
	if d.PP > 1 {
		args = append(args, fmt.Sprintf("--pp-size %d", d.PP))
	}
	// SGLang divides --chunked-prefill-size among the attention data-parallel ranks
	// (server_args.py, enable_dp_attention): the whole server's is the per-rank budget x DP
	args = append(args, fmt.Sprintf("--max-running-requests %d", d.MaxSeqs), fmt.Sprintf("--chunked-prefill-size %d", d.MaxTokens*d.DP()),
		fmt.Sprintf("--mem-fraction-static %.2f", d.KVFraction), fmt.Sprintf("--context-length %d", d.MaxLen))
	if d.FP8KV {
		args = append(args, "--kv-cache-dtype fp8_e4m3")
	}
	if d.FP8Weights && !d.FP4Weights {
		args = append(args, "--quantization fp8")
	}
	if d.SpecTokens > 0 && d.MTP {
		// the model's MTP heads through SGLang's EAGLE path, a chain of SpecTokens drafts (its
		// DeepSeek-V3 guide: --speculative-algorithm EAGLE, num-steps, eagle-topk 1, draft tokens)
		args = append(args, "--speculative-algorithm EAGLE", fmt.Sprintf("--speculative-num-steps %d", d.SpecTokens),
			"--speculative-eagle-topk 1", fmt.Sprintf("--speculative-num-draft-tokens %d", d.SpecTokens+1))
	}
	args = append(args, "--port 30000")
	b.WriteString(command(args))
	bench := []string{"python -m sglang.bench_serving --backend sglang", "--dataset-name random", fmt.Sprintf("--random-input-len %d", d.ISL),
		fmt.Sprintf("--random-output-len %d", d.OSL), "--random-range-ratio 1"}
	if len(d.Meta) > 0 {
		// --tag is written into each result line (benchmark/serving.py: "tag")
		bench = append(bench, "--output-file "+shell.Quote(d.result), "--tag "+shell.Quote(strings.Join(d.Meta, ";")))
	}
	b.WriteString(benchmark(d, "30000", bench...))
	return b.String()
}

func trtllm(d Deployment, r Release, yml string) string {
	var b strings.Builder
	b.WriteString(header(d, "TensorRT-LLM (PyTorch backend) "+r.Name))
	b.WriteString(d.noteLines("trtllm"))
	fmt.Fprintf(&b, "CONFIG=${CONFIG:-$(dirname \"$0\")/%s}  # the LLM API options written beside this script\n", shell.Quote(yml))
	args := []string{"trtllm-serve \"$MODEL\"", "--backend pytorch", fmt.Sprintf("--tp_size %d", max(d.TP, d.EP)), fmt.Sprintf("--pp_size %d", d.PP),
		fmt.Sprintf("--ep_size %d", d.EP), fmt.Sprintf("--max_batch_size %d", d.perRank()), fmt.Sprintf("--max_num_tokens %d", d.MaxTokens),
		fmt.Sprintf("--max_seq_len %d", d.MaxLen), fmt.Sprintf("--kv_cache_free_gpu_memory_fraction %.2f", d.KVFraction),
		"--extra_llm_api_options \"$CONFIG\"", "--port 8000"}
	b.WriteString(command(args))
	bench := []string{"python -m tensorrt_llm.serve.scripts.benchmark_serving --model \"$MODEL\"", "--backend openai", "--dataset-name random",
		fmt.Sprintf("--random-input-len %d", d.ISL), fmt.Sprintf("--random-output-len %d", d.OSL), "--random-ids", "--ignore-eos"}
	bench = append(bench, d.savedResult()...) // the script derives from vLLM's benchmark_serving.py
	b.WriteString(benchmark(d, "8000", bench...))
	return b.String()
}

// benchmark is the engine's benchmark command for d's load, as comment lines after the
// server's: the engine's own arguments, then the requests, the load and the server's port.
func benchmark(d Deployment, port string, args ...string) string {
	conc, rate, n := d.load()
	args = append(args, fmt.Sprintf("--num-prompts %d", n))
	if rate > 0 {
		args = append(args, fmt.Sprintf("--request-rate %g", rate))
	} else {
		args = append(args, fmt.Sprintf("--max-concurrency %d", conc))
	}
	args = append(args, "--port "+port)
	body := strings.TrimSuffix(command(args), "\n")
	return "\n# benchmark (another shell, once the server is up):\n# " + strings.ReplaceAll(body, "\n", "\n# ") + "\n"
}

func trtllmYAML(d Deployment) string {
	var b strings.Builder
	b.WriteString("# TensorRT-LLM LLM API options (trtllm-serve --extra_llm_api_options), written by mrep\n")
	fmt.Fprintf(&b, "enable_attention_dp: %t\n", d.DP() > 1)
	// prompts longer than max_num_tokens are prefilled in chunks, as mrep timed them (without
	// it TensorRT-LLM refuses them)
	b.WriteString("enable_chunked_prefill: true\n")
	b.WriteString("kv_cache_config:\n")
	if d.FP8KV {
		b.WriteString("  dtype: fp8\n")
	} else {
		b.WriteString("  dtype: auto\n")
	}
	fmt.Fprintf(&b, "  free_gpu_memory_fraction: %.2f\n", d.KVFraction)
	b.WriteString("cuda_graph_config:\n  enable_padding: true\n")
	fmt.Fprintf(&b, "  max_batch_size: %d\n", d.perRank())
	if d.SpecTokens > 0 && d.MTP {
		// the DeepSeek-R1 deployment guide's MTP block; at 44373a3 its draft depth is
		// max_draft_len (num_nextn_predict_layers is deprecated there and moved to it)
		fmt.Fprintf(&b, "speculative_config:\n  decoding_type: MTP\n  max_draft_len: %d\n", d.SpecTokens)
	}
	return b.String()
}

// perRank is TensorRT-LLM's max_batch_size: with the attention data-parallel each rank batches
// its own sequences (the DeepSeek-R1 guide's "max batch per rank").
func (d Deployment) perRank() int64 {
	return (d.MaxSeqs + d.DP() - 1) / d.DP()
}

func quoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = shell.Quote(x)
	}
	return out
}

// command lays out a command one argument per line.
func command(args []string) string {
	return strings.Join(args, " \\\n  ") + "\n"
}

// oneLine keeps a comment on its line: no control characters.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// WriteAll writes every file of fs to w, each under a heading with its name, in a fenced block
// (for a terminal or a markdown report). Control characters a hostile name carried into a file
// are shown as \xNN here (the files themselves keep them, quoted): a terminal never acts on them.
func WriteAll(w io.Writer, fs Files) error {
	for _, n := range fs.Names {
		lang := "sh"
		switch {
		case strings.HasSuffix(n, ".yml"):
			lang = "yaml"
		case strings.HasSuffix(n, ".py"):
			lang = "python"
		case strings.HasSuffix(n, ".toml"):
			lang = "toml"
		}
		if _, err := fmt.Fprintf(w, "\n`%s`:\n\n```%s\n%s```\n", n, lang, visibleText(fs.Contents[n])); err != nil {
			return err
		}
	}
	return nil
}

// For is what FromPlan writes for: the model id the engine loads, at most Top deployments,
// whether the model carries its own MTP heads, and the engine release ("": the newest checked).
type For struct {
	Model   string
	Top     int
	MTP     bool
	Release string
	// PlanID names the plan (PlanID) and Name the model as mrep names it: with them, each
	// benchmark writes what ran into its result file, for mrep ingest.
	PlanID, Name string
}

// PlanID is a plan's id: the first 12 hex digits of the SHA-256 of the command that makes it.
func PlanID(command string) string {
	sum := sha256.Sum256([]byte(command))
	return hex.EncodeToString(sum[:6])
}

// metaValue keeps a metadata value one token: no spaces, separators or control characters.
func metaValue(s string) string {
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f || r == ';' || r == '=' || r == '\'' || r == '"' {
			return '_'
		}
		return r
	}, s)
}

// FromPlan is the deployments of a serving plan's recommendations (at most f.Top), each with the
// limits and layout mrep timed. Disaggregated deployments are skipped: each engine wires its
// prefill and decode pools differently (and says so in notes).
func FromPlan(pl serve.Plan, f For) (ds []Deployment, notes []string) {
	o := pl.Options
	model, top := f.Model, f.Top
	for i, c := range pl.Best {
		if len(ds) == top {
			break
		}
		if c.Disagg != nil {
			notes = append(notes, fmt.Sprintf("deployment %d (%s) is disaggregated: not written (wire its prefill and decode pools with the engine's own disaggregation guide)", i+1, c.Chip))
			continue
		}
		seqs := c.BatchCap
		if !(seqs > 0) {
			seqs = c.Result.Concurrency
		}
		if o.Engine.MaxBatch > 0 {
			seqs = math.Min(seqs, o.Engine.MaxBatch)
		}
		maxLen := o.ISL + o.OSL
		for _, p := range o.Prompts { // a workload's longest prompts need room too
			maxLen = max(maxLen, p+o.OSL)
		}
		maxLen = (maxLen + 1023) / 1024 * 1024
		reps := max(c.Replicas, 1)
		d := Deployment{Model: model, TP: c.TP, EP: max(c.EP, 1), PP: max(c.PP, 1), Replicas: reps,
			MaxSeqs: int64(math.Ceil(math.Max(seqs, 1))), MaxTokens: int64(o.Engine.TokenBudget), KVFraction: o.Engine.ForLayout(max(c.TP, c.EP), max(c.PP, 1), max(1, c.EP/max(c.TP, 1))).KVFraction, MaxLen: maxLen,
			FP8Weights: o.Scenario.WeightBytes == 1, FP8KV: o.Scenario.KVBytes == 1, FP4Weights: o.Scenario.WeightBytes == 0.5, ISL: o.ISL, OSL: o.OSL,
			Users: o.Users / float64(reps), Rate: o.Rate / float64(reps), SpecTokens: o.Engine.SpecTokens, MTP: f.MTP, Release: f.Release}
		d.Title = fmt.Sprintf("mrep plan serve, deployment %d: %s %s, %d GPUs in all; predicted per replica: %.0f sequences, TTFT %.3g s, TPOT %.3g ms, %.0f output tok/s",
			i+1, c.Chip, c.Layout(), c.GPUs, c.Result.Concurrency, c.Result.TTFT, 1e3*c.Result.TPOT, c.Result.OutputTokS)
		if f.PlanID != "" {
			sc := o.Scenario
			d.Meta = []string{"mrep_plan=" + f.PlanID, fmt.Sprintf("mrep_deployment=%d", i+1), "mrep_model=" + metaValue(f.Name), "mrep_chip=" + metaValue(c.Chip),
				fmt.Sprintf("mrep_tp=%d", c.TP), fmt.Sprintf("mrep_ep=%d", max(c.EP, 1)), fmt.Sprintf("mrep_pp=%d", max(c.PP, 1)),
				"mrep_dtype=" + string(sc.ComputeDType), "mrep_weight_dtype=" + string(sc.WeightDType), "mrep_kv_dtype=" + string(sc.KVDType)}
		}
		ds = append(ds, d)
	}
	return ds, notes
}

// visibleText is s with every control character but newline and tab as \xNN.
func visibleText(s string) string {
	var b strings.Builder
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
