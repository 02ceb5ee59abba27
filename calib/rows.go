// Package calib checks the time model against measured runs and fits a chip's efficiency
// parameters to them: the calibration set shipped with mrep (measured.json, from published
// measurements), `mrep validate` and `mrep calibrate`. Pure: rows in, predictions and fits out.
package calib

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/mrep-dev/mrep/serve"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/layout"
)

//go:embed measured.json
var measured []byte

//go:embed extended.json
var extended []byte

//go:embed memory.json
var memoryRows []byte

//go:embed training.json
var trainingRows []byte

//go:embed fsdp_training.json
var fsdpTrainingRows []byte

//go:embed heldout_training.json
var heldoutTrainingRows []byte

//go:embed amd_training.json
var amdTrainingRows []byte

//go:embed amd_heldout_training.json
var amdHeldoutTrainingRows []byte

//go:embed amd_vllm.json
var amdVLLMRows []byte

//go:embed finetune.json
var fineTuneRows []byte

//go:embed finetune_time.json
var fineTuneTimeRows []byte

//go:embed bench_serve.json
var benchServeRows []byte

//go:embed amd_serving.json
var amdServingRows []byte

// Kinds of measurement a row holds, with the unit its value is in.
const (
	KindTTFT       = "ttft"               // s: batch-B prefill of ISL tokens to the first token
	KindStatic     = "static_throughput"  // output tok/s per GPU: one prefill of B x ISL, then OSL-1 decode steps of B
	KindDecodeStep = "decode_step"        // s: one decode step of B sequences at KV length ISL
	KindTrainStep  = "train_step"         // s: one optimizer step of GBS sequences of Seq tokens
	KindServing    = "serving_throughput" // output tok/s of the TP group under continuous batching
	// KindTrainTokens is a training run's throughput as Megatron-Bridge publishes it: tokens
	// per second per GPU, GBS x Seq / (step time x GPUs).
	KindTrainTokens = "train_throughput"
	// KindTrainMemory is a training run's measured peak memory per GPU, in GiB (memory_stat
	// says which reading): the memory model's check, no time predicted.
	KindTrainMemory = "train_memory"
	// An offline wave as vLLM's benchmark scripts run it: B prompts admitted at once, prefilled,
	// then decoded together for OSL tokens. KindWave is the tokens/s of the whole deployment,
	// input and output (benchmark_throughput's tokens_per_second); KindBatchLatency the wave's
	// time in seconds (benchmark_latency).
	KindWave         = "wave_throughput"
	KindBatchLatency = "batch_latency"
	// KindBenchServe is one figure of a serving benchmark (`vllm bench serve`,
	// `sglang.bench_serving`, genai-perf): Requests requests from a closed loop of Concurrency
	// users or Poisson arrivals at RequestRate, lengths about ISL and OSL (LengthSpread: uniform
	// over mean x [1-s, 1+s]; 0: fixed). Metric says which figure (ttft, tpot, e2e in s;
	// output_throughput in tok/s) and Stat which statistic over the requests (mean, median,
	// p90, p99).
	KindBenchServe = "bench_serve"
)

// Bench metrics and their units.
var benchMetrics = map[string]string{"ttft": "s", "tpot": "s", "itl": "s", "e2e": "s", "output_throughput": "tok/s"}

// measuredCeiling bounds a measured figure by its unit, far above any run (a step or request
// of 11 days, a billion tokens a second, 10 TiB on one GPU).
var measuredCeiling = map[string]float64{"s": 1e6, "tok/s": 1e9, "tok/s/gpu": 1e9, "GiB": 1e4}

var kindUnits = map[string]string{KindTTFT: "s", KindStatic: "tok/s/gpu", KindDecodeStep: "s", KindTrainStep: "s", KindServing: "tok/s", KindTrainTokens: "tok/s/gpu",
	KindTrainMemory: "GiB", KindWave: "tok/s", KindBatchLatency: "s"}

// Row is one measured run: what ran, where, and what was measured.
type Row struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Source string `json:"source"`
	Model  string `json:"model"` // a bundled example dump's name, or an ingested run's model
	Chip   string `json:"chip"`
	// Precision recipe: the linear layers' dtype (the peak quoted) and, where they differ,
	// weights, activations and KV cache.
	DType       string `json:"dtype"`
	WeightDType string `json:"weight_dtype,omitempty"`
	ActDType    string `json:"act_dtype,omitempty"`
	KVDType     string `json:"kv_dtype,omitempty"`
	// Layout.
	GPUs int64 `json:"gpus,omitempty"`
	TP   int64 `json:"tp,omitempty"`
	PP   int64 `json:"pp,omitempty"`
	CP   int64 `json:"cp,omitempty"`
	VP   int64 `json:"vp,omitempty"`
	EP   int64 `json:"ep,omitempty"`
	ETP  int64 `json:"etp,omitempty"` // expert tensor parallel (0: Megatron's default, TP)
	// Workload.
	Batch int64 `json:"batch,omitempty"` // sequences (ttft, static, decode_step)
	ISL   int64 `json:"isl,omitempty"`
	OSL   int64 `json:"osl,omitempty"`
	Seq   int64 `json:"seq,omitempty"` // training sequence length
	GBS   int64 `json:"gbs,omitempty"`
	MBS   int64 `json:"mbs,omitempty"`
	// Serving runs that set the engine themselves (0: trtllm-bench's own choices): requests kept
	// in flight (a closed loop of that many; 0: all queued), the max batch and max tokens per
	// step of one rank (one attention group with the attention data-parallel), and the share of
	// free memory given to the KV cache.
	Concurrency  int64   `json:"concurrency,omitempty"`
	MaxBatch     int64   `json:"max_batch,omitempty"`
	MaxNumTokens int64   `json:"max_num_tokens,omitempty"`
	KVFraction   float64 `json:"kv_fraction,omitempty"`
	// Training rows: how the framework ran the layout (memory depends on it; defaults are
	// Megatron's: distributed optimizer, no recomputation) and the measured peak memory.
	Framework string `json:"framework,omitempty"` // megatron, fsdp or deepspeed
	ZeRO      int    `json:"zero,omitempty"`
	Recompute string `json:"recompute,omitempty"`
	Compile   bool   `json:"compile,omitempty"`
	Optimizer string `json:"optimizer,omitempty"`
	// Recipe is the low-precision training recipe: fp8-cs (current scaling), fp8-ds (delayed
	// scaling), fp8-blockwise (DeepSeek-V3's 128x128 weight, 1x128 activation blocks), mxfp8 or
	// nvfp4; empty for bf16 or an fp8 row that does not say.
	Recipe string `json:"recipe,omitempty"`
	// MTP is the multi-token-prediction depth trained beside the model (DeepSeek-V3: 1).
	MTP int64 `json:"mtp,omitempty"`
	// How the run was set up beyond its layout (layout.Layout's fields of the same meaning):
	// full recompute of some layers per stage, layers whose activations went to host memory,
	// the MoE dispatcher and all-to-all overlap, and Megatron's embedding and loss counted as
	// pipeline layers.
	RecomputeLayers    int64  `json:"recompute_layers,omitempty"`
	OffloadActivations int64  `json:"offload_activations,omitempty"`
	Dispatcher         string `json:"dispatcher,omitempty"`
	A2AOverlap         string `json:"a2a_overlap,omitempty"`
	// CUDAGraph: the run replayed each step from one CUDA graph (Megatron's full_iteration).
	CUDAGraph        bool  `json:"cuda_graph,omitempty"`
	PipelineAccount  bool  `json:"pipeline_account,omitempty"`
	FirstStageLayers int64 `json:"first_stage_layers,omitempty"`
	LastStageLayers  int64 `json:"last_stage_layers,omitempty"`
	FP8ParamGather   bool  `json:"fp8_param_gather,omitempty"`
	// FP8OutputProj: the run put the LM head under MXFP8 (Megatron's fp8_output_proj).
	FP8OutputProj bool `json:"fp8_output_proj,omitempty"`
	// FP8Attention: the run's attention core ran in the recipe's FP8 (Megatron's
	// fp8_dot_product_attention).
	FP8Attention bool `json:"fp8_attention,omitempty"`
	// FusedGroupedMLP: the routed experts ran Transformer Engine's CuTe DSL fused grouped MLP
	// (Megatron-Bridge's cutedsl_fused_grouped_mlp, NVTE_CUTEDSL_FUSED_GROUPED_MLP=1).
	FusedGroupedMLP bool `json:"fused_grouped_mlp,omitempty"`
	// GroupedGEMM: how the routed experts' GEMMs were issued (te, legacy or turbo:
	// layout.Layout.GroupedGEMM); SyncFreeMoE: Primus-Turbo's --turbo_sync_free_moe_stage.
	GroupedGEMM string `json:"grouped_gemm,omitempty"`
	SyncFreeMoE int64  `json:"sync_free_moe,omitempty"`
	// Routing: the forced balance's expert choice (uniform or even: layout.Layout.Routing).
	Routing string `json:"routing,omitempty"`
	// FP8Dispatch: the forward dispatch travelled in FP8 (DeepSeek-V3's own stack).
	FP8Dispatch bool `json:"fp8_dispatch,omitempty"`
	// NoBiasSwiGLUFusion: the run turned Megatron's bias_swiglu_fusion off.
	NoBiasSwiGLUFusion bool `json:"no_bias_swiglu_fusion,omitempty"`
	// ActFP8InputStore: the SwiGLU's input was saved in FP8 (Megatron's
	// activation_func_fp8_input_store; layout.Layout.ActFP8InputStore).
	ActFP8InputStore bool `json:"act_fp8_input_store,omitempty"`
	TPOverlap        bool `json:"tp_overlap,omitempty"`
	NoReshard        bool `json:"no_reshard,omitempty"`
	OffloadParams    bool `json:"offload_params,omitempty"`
	// HSDPReplicas: HSDP, sharding within GPUs / (TP x PP x HSDPReplicas) ranks and
	// replicating across HSDPReplicas groups (FSDP1 HYBRID_SHARD, torchtitan dp_replicate).
	HSDPReplicas     int64 `json:"hsdp_replicas,omitempty"`
	OffloadOptimizer bool  `json:"offload_optimizer,omitempty"`
	BF16Grads        bool  `json:"bf16_grads,omitempty"`
	// MemoryGiB is the measured peak per GPU (the fullest GPU) as the source reports it;
	// MemoryStat says which reading: reserved (torch.cuda.max_memory_reserved, what torchtitan
	// logs) or allocated.
	MemoryGiB  float64 `json:"memory_gib,omitempty"`
	MemoryStat string  `json:"memory_stat,omitempty"` // reserved (the default), allocated, or device (nvidia-smi: the CUDA context too)

	// A fine-tune (analyzer.FineTune) and the stack that ran it (layout.Stacks): its defaults
	// apply where the row's own fields are empty.
	Stack              string   `json:"stack,omitempty"`
	LoRARank           int64    `json:"lora_rank,omitempty"`
	LoRATargets        []string `json:"lora_targets,omitempty"`
	LoRADropout        float64  `json:"lora_dropout,omitempty"`
	QLoRA              bool     `json:"qlora,omitempty"`
	BaseDType          string   `json:"base_dtype,omitempty"`
	Freeze             []string `json:"freeze,omitempty"`
	ParamDType         string   `json:"param_dtype,omitempty"` // mixed, bf16 or fp32
	Loss               string   `json:"loss,omitempty"`
	OffloadCheckpoints *bool    `json:"offload_checkpoints,omitempty"` // unset: the stack's
	// Measured value, in the kind's unit.
	// Engine and EngineVersion name the serving engine and release the run used (trtllm,
	// vllm, sglang), for the per-engine summary.
	Engine string `json:"engine,omitempty"`
	// Serving benchmarks (bench_serve): the figure and statistic measured, the requests sent,
	// the Poisson arrival rate (0: a closed loop of Concurrency users) and the lengths' spread.
	Metric        string  `json:"metric,omitempty"`
	Stat          string  `json:"stat,omitempty"`
	Requests      int64   `json:"requests,omitempty"`
	RequestRate   float64 `json:"request_rate,omitempty"`
	LengthSpread  float64 `json:"length_spread,omitempty"`
	EngineVersion string  `json:"engine_version,omitempty"`
	// Speculative decoding as the run configured it (MTP heads or a draft model): draft tokens
	// per step, the acceptance rate per draft token the run reports (or the model card's), and
	// the cost of drafting one token as a share of a plain decode step (0: an MTP head of one
	// layer, 1/L, as plan serve's default).
	SpecTokens    int64   `json:"spec_tokens,omitempty"`
	SpecAccept    float64 `json:"spec_accept,omitempty"`
	SpecDraftCost float64 `json:"spec_draft_cost,omitempty"`
	// A disaggregated run (bench_serve, a closed loop): its prefill pool's layout and replica
	// count beside the decode pool's (the row's tp, ep and pp are the decode replicas').
	// PrefillReplicas > 0 marks the row disaggregated.
	PrefillTP       int64 `json:"prefill_tp,omitempty"`
	PrefillEP       int64 `json:"prefill_ep,omitempty"`
	PrefillPP       int64 `json:"prefill_pp,omitempty"`
	PrefillReplicas int64 `json:"prefill_replicas,omitempty"`
	DecodeReplicas  int64 `json:"decode_replicas,omitempty"`
	// PrefillChip is the prefill pool's chip when it is not the row's (the decode pool's): the
	// KV cache then crosses the scale-out network.
	PrefillChip string  `json:"prefill_chip,omitempty"`
	Measured    float64 `json:"measured"`
	Unit        string  `json:"unit"`
	Note        string  `json:"note,omitempty"`
	// Lacks names a mechanism the run used that mrep does not model and that matters for its
	// memory (NeMo 1.0's Apex DistributedFusedAdam keeps 16-bit parameter remainders, not fp32
	// master weights): a row that does not fit as stated then stays as stated, flagged with it,
	// instead of being moved to a setting the run did not use.
	Lacks string `json:"lacks,omitempty"`
	// KnownIssue is the source's own statement that the run hit a defect of its stack (a
	// kernel regression its publisher names and says the next release fixes): the row is
	// predicted and shown with it, but counted in no error, as a time under a bug no model of
	// the stack working as designed should reproduce.
	KnownIssue string `json:"known_issue,omitempty"`
	// Preset is the layout the release's own performance preset gives the run where the
	// source's table states another. A row whose stated layout the memory model says cannot run
	// is predicted under its preset's layout when that fits, before any setting mrep would pick:
	// the publisher's code is a statement of what ran, a saver mrep chooses is not.
	Preset *Preset `json:"preset,omitempty"`
}

// Preset is a release's performance preset as a row cites it: its name, where it is (file and
// commit) and the layout fields it sets (0: as the row states).
type Preset struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	TP     int64  `json:"tp,omitempty"`
	PP     int64  `json:"pp,omitempty"`
	VP     int64  `json:"vp,omitempty"`
	EP     int64  `json:"ep,omitempty"`
	MBS    int64  `json:"mbs,omitempty"`
}

// validate checks a preset names itself and its place and sets degrees in range.
func (p *Preset) validate() error {
	switch {
	case p.Name == "" || len(p.Name) > 200:
		return fmt.Errorf("preset name %q: want the preset's name, at most 200 characters", p.Name)
	case p.Source == "" || len(p.Source) > 300:
		return errors.New("preset source: want its file and commit, at most 300 characters")
	case min(p.TP, p.PP, p.VP, p.EP, p.MBS) < 0 || max(p.TP, p.PP, p.VP, p.EP, p.MBS) > analyzer.MaxDegree:
		return fmt.Errorf("preset %s: degrees and micro-batch must be 0 (as stated) to %d", p.Name, analyzer.MaxDegree)
	case max(p.TP, p.PP, p.VP, p.EP, p.MBS) == 0:
		return fmt.Errorf("preset %s sets no layout field: leave it out", p.Name)
	}
	return nil
}

// layout is l with the preset's fields set, DP following from the GPUs and the GBS.
func (p *Preset) layout(r Row, l layout.Layout) layout.Layout {
	set := func(dst *int64, v int64) {
		if v > 0 {
			*dst = v
		}
	}
	set(&l.TP, p.TP)
	set(&l.PP, p.PP)
	set(&l.VP, p.VP)
	set(&l.EP, p.EP)
	set(&l.MBS, p.MBS)
	l.DP = max(r.GPUs/(l.TP*l.PP*l.CP), 1)
	return l
}

// Flags is the preset's layout as the command line's flags.
func (p *Preset) Flags() string {
	var f []string
	for _, kv := range []struct {
		k string
		v int64
	}{{"tp", p.TP}, {"pp", p.PP}, {"vp", p.VP}, {"ep", p.EP}, {"mbs", p.MBS}} {
		if kv.v > 0 {
			f = append(f, fmt.Sprintf("--%s %d", kv.k, kv.v))
		}
	}
	return strings.Join(f, " ")
}

// Phase is the summary group of a row kind.
func (r Row) Phase() string {
	switch r.Kind {
	case KindTrainStep, KindTrainTokens:
		return "training"
	case KindTrainMemory:
		return "training_memory"
	case KindTTFT:
		return "ttft"
	case KindStatic:
		return "static_throughput"
	case KindDecodeStep:
		return "decode_step"
	case KindWave:
		return "wave_throughput"
	case KindBatchLatency:
		return "batch_latency"
	case KindBenchServe:
		return "bench_" + r.Metric
	}
	return "serving"
}

// TimeLike says whether the value is a time (lower is faster) or a throughput.
func (r Row) TimeLike() bool { return r.Unit == "s" || r.Unit == "GiB" }

// ErrNotExpressible marks rows that need layouts or serving features mrep does not model yet.
var ErrNotExpressible = errors.New("not expressible yet")

// Expressible says whether mrep can predict the row, and why not.
func (r Row) Expressible() error {
	switch {
	case r.Kind == KindServing && r.CP > 1:
		return fmt.Errorf("%w: context-parallel serving", ErrNotExpressible)
	case !r.Training() && r.Kind != KindServing && (r.PP > 1 || r.CP > 1 || r.VP > 1):
		return fmt.Errorf("%w: pipeline (PP=%d, VP=%d) and context (CP=%d) parallel inference", ErrNotExpressible, r.PP, r.VP, r.CP)
	case r.Training() && r.GPUs > 0 && r.GPUs%(max(r.TP, 1)*max(r.PP, 1)*max(r.CP, 1)) != 0:
		return fmt.Errorf("%w: %d GPUs are not a multiple of TP x PP x CP", ErrNotExpressible, r.GPUs)
	}
	return nil
}

// Training says whether the row measures a training run (a step time or its throughput).
func (r Row) Training() bool {
	return r.Kind == KindTrainStep || r.Kind == KindTrainTokens || r.Kind == KindTrainMemory
}

// Layout is a training row's parallel layout: DP from the GPU count, the distributed
// optimizer on (Megatron/NeMo recipes shard optimizer state over DP by default).
func (r Row) Layout() layout.Layout {
	fw, zero := r.Framework, r.ZeRO
	st, stack := layout.Stacks[strings.ToLower(r.Stack)]
	if stack && fw == "" {
		fw = st.Framework
		if r.ZeRO == 0 {
			zero = st.ZeRO
		}
	}
	if fw == "" {
		fw = layout.Megatron
	}
	if fw == layout.FSDP && zero == 0 {
		zero = 3
	}
	prec := r.Recipe
	if prec == "" && (r.DType == "fp8" || r.DType == "mxfp8") {
		prec = r.DType
	}
	l := layout.Layout{TP: max(r.TP, 1), PP: max(r.PP, 1), VP: max(r.VP, 1), CP: max(r.CP, 1), DP: r.dp(), EP: max(r.EP, 1),
		ETP: r.ETP, MBS: max(r.MBS, 1), GBS: r.GBS, Seq: r.Seq, DistOptimizer: true, ZeRO: zero, Framework: fw, Recompute: r.Recompute,
		Compile: r.Compile, Optimizer: r.Optimizer, Precision: prec, MTP: r.MTP, RecomputeLayers: r.RecomputeLayers,
		OffloadActivations: r.OffloadActivations, Dispatcher: r.Dispatcher, A2AOverlap: r.A2AOverlap,
		EmbeddingInPipe: r.PipelineAccount, LossInPipe: r.PipelineAccount, FP8ParamGather: r.FP8ParamGather, FP8OutputProj: r.FP8OutputProj, FP8Attention: r.FP8Attention, FusedGroupedMLP: r.FusedGroupedMLP, ActFP8InputStore: r.ActFP8InputStore, BF16Grads: r.BF16Grads,
		FirstStageLayers: r.FirstStageLayers, LastStageLayers: r.LastStageLayers, TPOverlap: r.TPOverlap, NoReshard: r.NoReshard,
		Replicas: r.HSDPReplicas, CUDAGraph: r.CUDAGraph, GroupedGEMM: r.GroupedGEMM, SyncFreeMoE: r.SyncFreeMoE, Routing: r.Routing, FP8Dispatch: r.FP8Dispatch, NoSwiGLUFusion: r.NoBiasSwiGLUFusion}
	if stack {
		k := layout.Knobs{Framework: l.Framework, Optimizer: l.Optimizer, Compile: l.Compile}
		st.Fill(&k, layout.Given{Framework: true, Optimizer: r.Optimizer != "", Compile: r.Compile})
		l.Optimizer, l.Compile, l.OffloadCheckpoints = k.Optimizer, k.Compile, k.OffloadCheckpoints
		l.Stack, l.ParamDType, l.Loss, l.UpcastUnquantized = k.Stack, k.ParamDType, k.Loss, k.UpcastUnquantized
		if l.Recompute == "" {
			l.Recompute = st.DefaultRecompute(r.FineTune().Quantized())
		}
	}
	switch strings.ToLower(r.ParamDType) {
	case "mixed":
		l.ParamDType = ""
	case "bf16", "fp32":
		l.ParamDType = strings.ToLower(r.ParamDType)
	}
	if r.Loss != "" {
		l.Loss = strings.ToLower(r.Loss)
	}
	if r.OffloadCheckpoints != nil {
		l.OffloadCheckpoints = *r.OffloadCheckpoints
	}
	l.OffloadParams, l.OffloadOptimizer = r.OffloadParams, r.OffloadOptimizer
	return l
}

// FineTune is the fine-tune the row trained (the zero value: every parameter).
func (r Row) FineTune() analyzer.FineTune {
	f := analyzer.FineTune{Freeze: r.Freeze, LoRARank: r.LoRARank, LoRATargets: r.LoRATargets, LoRADropout: r.LoRADropout,
		QLoRA: r.QLoRA, BaseDType: strings.ToLower(r.BaseDType)}
	if f.BaseDType == "nf4" {
		f.QLoRA, f.BaseDType = true, ""
	}
	return f
}

func (r Row) dp() int64 {
	per := max(r.TP, 1) * max(r.PP, 1) * max(r.CP, 1)
	if r.GPUs <= 0 {
		return 1
	}
	return r.GPUs / per
}

// kindAliases are other names rows use for the kinds.
var kindAliases = map[string]string{
	"ttft": KindTTFT, "time_to_first_token": KindTTFT, "prefill_latency": KindTTFT,
	"static_throughput": KindStatic, "static_batch_throughput": KindStatic, "static": KindStatic,
	"decode_step": KindDecodeStep, "tpot": KindDecodeStep, "itl": KindDecodeStep, "decode_latency": KindDecodeStep,
	"train_step": KindTrainStep, "training": KindTrainStep, "train_step_time": KindTrainStep, "step_time": KindTrainStep,
	"train_throughput": KindTrainTokens, "training_throughput": KindTrainTokens, "train_tokens": KindTrainTokens,
	"train_memory": KindTrainMemory, "peak_memory": KindTrainMemory, "training_memory": KindTrainMemory,
	"serving_throughput": KindServing, "serving": KindServing, "throughput": KindServing,
	"wave_throughput": KindWave, "batch_latency": KindBatchLatency, "bench_serve": KindBenchServe,
}

// normalize maps kind aliases to their kind and times in ms or us to seconds, so rows written
// by hand in the units sources print are read as meant.
func (r *Row) normalize() {
	if k, ok := kindAliases[strings.ToLower(strings.TrimSpace(r.Kind))]; ok {
		r.Kind = k
	}
	switch strings.ToLower(strings.TrimSpace(r.Unit)) {
	case "ms":
		r.Measured, r.Unit = r.Measured/1e3, "s"
	case "us", "µs":
		r.Measured, r.Unit = r.Measured/1e6, "s"
	case "s", "sec", "seconds":
		r.Unit = "s"
	case "tok/s/gpu", "tokens/s/gpu", "tok/s per gpu":
		r.Unit = "tok/s/gpu"
	case "tok/s", "tokens/s":
		r.Unit = "tok/s"
	}
	if r.Kind == KindTrainMemory && r.MemoryGiB == 0 {
		r.MemoryGiB = r.Measured // the measured figure is the peak
	}
	if r.Kind == KindBenchServe {
		r.Metric, r.Stat = strings.ToLower(strings.TrimSpace(r.Metric)), strings.ToLower(strings.TrimSpace(r.Stat))
		if r.Metric == "itl" {
			r.Metric = "tpot" // one token per step per sequence: the same figure
		}
		if r.Stat == "p50" {
			r.Stat = "median"
		}
	}
	if r.Unit == "" {
		r.Unit = kindUnits[r.Kind]
		if r.Kind == KindBenchServe {
			r.Unit = benchMetrics[r.Metric]
		}
	}
}

// validate checks a row's fields (not whether its model or chip exist).
func (r Row) validate() error {
	unit, ok := kindUnits[r.Kind]
	if r.Kind == KindBenchServe {
		unit, ok = benchMetrics[r.Metric], true
	}
	switch {
	case r.ID == "":
		return errors.New("id is empty")
	case !ok:
		return fmt.Errorf("kind %q: want ttft, static_throughput, decode_step, train_step, train_throughput, serving_throughput, wave_throughput, batch_latency or bench_serve", r.Kind)
	case r.Model == "":
		return errors.New("model is empty")
	case r.Chip == "":
		return errors.New("chip is empty")
	case r.DType == "":
		return errors.New("dtype is empty")
	case !(r.Measured > 0) || math.IsInf(r.Measured, 0):
		return fmt.Errorf("measured must be a positive number, got %g", r.Measured)
	case r.Unit != unit:
		return fmt.Errorf("unit %q: a %s row is measured in %q", r.Unit, r.Kind, unit)
	case r.Measured > measuredCeiling[unit]:
		// a typo of units or digits (a step of 1e12 s is 31,000 years) would otherwise be
		// fitted to, or reported as mrep's error
		return fmt.Errorf("measured %g %s: more than %g %s, not a run's measurement", r.Measured, unit, measuredCeiling[unit], unit)
	case r.GPUs > 0 && r.GPUs < max(r.TP, 1)*max(r.PP, 1)*max(r.CP, 1):
		return fmt.Errorf("gpus %d: fewer than tp x pp x cp = %d", r.GPUs, max(r.TP, 1)*max(r.PP, 1)*max(r.CP, 1))
	case r.GPUs > 0 && r.EP > r.GPUs:
		return fmt.Errorf("ep %d: more expert-parallel ranks than gpus %d", r.EP, r.GPUs)
	case r.TP < 0 || r.PP < 0 || r.CP < 0 || r.VP < 0 || r.EP < 0 || r.ETP < 0 || r.MTP < 0 || r.RecomputeLayers < 0 || r.OffloadActivations < 0 || r.FirstStageLayers < 0 || r.LastStageLayers < 0 || r.GPUs < 0 || r.Batch < 0 || r.ISL < 0 || r.OSL < 0 || r.Seq < 0 || r.GBS < 0 || r.MBS < 0 ||
		r.Concurrency < 0 || r.MaxBatch < 0 || r.MaxNumTokens < 0 || r.SpecTokens < 0 ||
		r.PrefillTP < 0 || r.PrefillEP < 0 || r.PrefillPP < 0 || r.PrefillReplicas < 0 || r.DecodeReplicas < 0:
		return errors.New("layout and workload sizes must be >= 0")
	case r.SpecTokens > 16:
		return fmt.Errorf("spec_tokens %d: want at most 16 draft tokens a step", r.SpecTokens)
	case !(r.SpecAccept >= 0 && r.SpecAccept <= 1):
		return fmt.Errorf("spec_accept %g: want an acceptance rate in [0, 1]", r.SpecAccept)
	case !(r.SpecDraftCost >= 0 && r.SpecDraftCost <= 10):
		return fmt.Errorf("spec_draft_cost %g: want a share of a decode step, 0 to 10 (plan serve's range)", r.SpecDraftCost)
	case max(r.PrefillTP, r.PrefillEP, r.PrefillPP, r.PrefillReplicas, r.DecodeReplicas) > analyzer.MaxDegree:
		return fmt.Errorf("a disaggregated pool's layout and replicas must be at most %d each", analyzer.MaxDegree)
	case (r.PrefillTP > 0 || r.PrefillEP > 0 || r.PrefillPP > 0 || r.DecodeReplicas > 0 || r.PrefillChip != "") && r.PrefillReplicas == 0:
		return errors.New("a disaggregated run needs prefill_replicas (its prefill pool's replica count)")
	case r.PrefillReplicas > 0 && (r.Kind != KindBenchServe || r.Concurrency == 0):
		return errors.New("a disaggregated run is a bench_serve row with a closed loop of users (concurrency)")
	case r.SpecTokens > 0 && r.SpecAccept == 0 && serve.Figures(engineOfNamed(r)).AcceptAt(int(r.SpecTokens)) == 0:
		return fmt.Errorf("spec_tokens %d needs spec_accept, the acceptance rate the run saw (engine %q has no measured MTP figures to stand for it)", r.SpecTokens, engineOfNamed(r))
	case !(r.KVFraction >= 0 && r.KVFraction <= 1):
		return fmt.Errorf("kv_fraction %g: want a share in (0, 1]", r.KVFraction)
	case !(r.MemoryGiB >= 0 && r.MemoryGiB < 1e6):
		return fmt.Errorf("memory_gib %g: want a peak in GiB", r.MemoryGiB)
	case r.MemoryStat != "" && r.MemoryStat != "reserved" && r.MemoryStat != "allocated" && r.MemoryStat != "device":
		return fmt.Errorf("memory_stat %q: want reserved, allocated or device (nvidia-smi)", r.MemoryStat)
	case r.Stack != "" && layout.Stacks[strings.ToLower(r.Stack)].Name == "":
		return fmt.Errorf("stack %q: want one of %s", r.Stack, strings.Join(layout.StackNames(), ", "))
	case r.ParamDType != "" && !slices.Contains([]string{"mixed", "bf16", "fp32"}, strings.ToLower(r.ParamDType)):
		return fmt.Errorf("param_dtype %q: want mixed, bf16 or fp32", r.ParamDType)
	case len(r.Lacks) > 300:
		return fmt.Errorf("lacks: %d characters, want a mechanism's name in at most 300", len(r.Lacks))
	case len(r.KnownIssue) > 300:
		return fmt.Errorf("known_issue: %d characters, want the source's statement in at most 300", len(r.KnownIssue))
	case r.Loss != "" && !slices.Contains(layout.Losses, strings.ToLower(r.Loss)):
		return fmt.Errorf("loss %q: want one of %s", r.Loss, strings.Join(layout.Losses, ", "))
	case r.Preset != nil && !r.Training():
		return errors.New("preset: a training run's layout, on a training row")
	}
	if r.Preset != nil {
		if err := r.Preset.validate(); err != nil {
			return err
		}
	}
	if err := r.FineTune().Validate(); err != nil {
		return fmt.Errorf("fine-tune: %w", err)
	}
	switch r.Kind {
	case KindTTFT, KindDecodeStep:
		if r.ISL < 1 {
			return fmt.Errorf("%s needs isl >= 1", r.Kind)
		}
	case KindStatic, KindServing, KindWave, KindBatchLatency:
		if r.ISL < 1 || r.OSL < 1 {
			return fmt.Errorf("%s needs isl and osl >= 1", r.Kind)
		}
		if r.Kind != KindServing && r.Batch < 1 {
			return fmt.Errorf("%s needs batch >= 1", r.Kind)
		}
	case KindBenchServe:
		switch {
		case benchMetrics[r.Metric] == "":
			return fmt.Errorf("metric %q: want ttft, tpot, itl, e2e or output_throughput", r.Metric)
		case r.Stat != "mean" && r.Stat != "median" && r.Stat != "p90" && r.Stat != "p99":
			return fmt.Errorf("stat %q: want mean, median, p90 or p99", r.Stat)
		case r.ISL < 1 || r.OSL < 1:
			return errors.New("bench_serve needs isl and osl >= 1 (the mean lengths)")
		case (r.Concurrency > 0) == (r.RequestRate > 0):
			return errors.New("bench_serve needs a closed loop (concurrency) or a Poisson rate (request_rate), one of them")
		case r.Requests < 1 || r.Requests > 100000:
			return errors.New("bench_serve needs requests from 1 to 100,000")
		case !(r.RequestRate >= 0) || math.IsInf(r.RequestRate, 0):
			return fmt.Errorf("request_rate %g: want requests/s", r.RequestRate)
		case !(r.LengthSpread >= 0 && r.LengthSpread <= 1):
			return fmt.Errorf("length_spread %g: want a share from 0 to 1", r.LengthSpread)
		}
	case KindTrainStep, KindTrainTokens, KindTrainMemory:
		if r.Seq < 1 || r.GBS < 1 {
			return fmt.Errorf("%s needs seq and gbs >= 1", r.Kind)
		}
		if r.Kind == KindTrainMemory && r.MemoryGiB > 0 && r.MemoryGiB != r.Measured {
			return fmt.Errorf("train_memory: measured %g GiB and memory_gib %g disagree (give one)", r.Measured, r.MemoryGiB)
		}
		if r.Kind == KindTrainTokens && r.GPUs < 1 {
			return errors.New("train_throughput needs gpus >= 1 (it is per GPU)")
		}
	}
	return nil
}

// Default returns the calibration set shipped with mrep: the measured serving and training
// rows, Megatron-Bridge's 25.11 pre-training tables, torchtitan's H100 benchmarks and AMD's
// Megatron (Primus) MoE runs on MI355X.
func Default() []Row {
	var out []Row
	for _, f := range []struct {
		name string
		b    []byte
	}{{"measured.json", measured}, {"training.json", trainingRows}, {"memory.json", memoryRows}, {"fsdp_training.json", fsdpTrainingRows}, {"amd_training.json", amdTrainingRows}} {
		out = append(out, embedded(f.name, f.b)...)
	}
	return out
}

// AMDvLLM returns AMD's published vLLM runs on Instinct GPUs (amd_vllm.json): the rows MI300X's
// serving figures are fitted to.
func AMDvLLM() []Row {
	return embedded("amd_vllm.json", amdVLLMRows)
}

// AMDServing returns AMD's own published serving benchmarks on Instinct GPUs (amd_serving.json:
// the ATOM engine's nightly CI on MI355X and its recipes on MI355X and MI300X), the fit set of
// the atom lanes.
func AMDServing() []Row {
	return embedded("amd_serving.json", amdServingRows)
}

// embedded parses a rows file built into mrep; a parse error is a build defect (the tests
// parse every set), so it panics rather than burden every caller with an error.
func embedded(name string, b []byte) []Row {
	rows, err := Parse(name, bytes.NewReader(b))
	if err != nil {
		panic(fmt.Sprintf("embedded set: %v", err))
	}
	return rows
}

// Sets are the row sets shipped with mrep, by the name `mrep validate --rows` takes.
var Sets = map[string]func() []Row{"calibration": Default, "extended": Extended, "heldout": HeldOutTraining, "amd-vllm": AMDvLLM, "amd-serving": AMDServing, "bench-serve": BenchServe,
	"finetune": FineTuneSet, "finetune-time": FineTuneTimeSet}

// FineTuneSet returns the measured peak memory of published fine-tunes (finetune.json: LoRA,
// QLoRA and full fine-tunes under the Hugging Face Trainer, Unsloth, axolotl's FSDP2), the
// check of the fine-tuning stacks' memory.
func FineTuneSet() []Row {
	return embedded("finetune.json", fineTuneRows)
}

// FineTuneTimeSet returns the measured step times and throughputs of published SFT and LoRA
// runs (finetune_time.json: NeMo, Megatron-Bridge, dgxc-benchmarking, NeMo AutoModel), the check
// of the fine-tuning lanes' time (no figure is fitted to it).
func FineTuneTimeSet() []Row {
	return embedded("finetune_time.json", fineTuneTimeRows)
}

// RowSource is where a command's rows come from: a set shipped with mrep (Set, a Sets key) or
// a file (Path, which the caller reads: calib does no I/O). The zero value is the shipped
// calibration set.
type RowSource struct {
	Set  string
	Path string
	// Stored are rows read from the history (the results `mrep ingest` stored), when set.
	Stored []Row
}

// SetNames are the shipped sets' names, as --rows lists them.
var SetNames = []string{"calibration", "extended", "heldout", "amd-vllm", "amd-serving", "bench-serve", "finetune", "finetune-time"}

// setList is SetNames as an error lists them.
func setList() string {
	return strings.Join(SetNames[:len(SetNames)-1], ", ") + " or " + SetNames[len(SetNames)-1]
}

// ShippedSet is the shipped set of that name.
func ShippedSet(name string) (RowSource, error) {
	if _, ok := Sets[name]; !ok {
		return RowSource{}, fmt.Errorf("rows %q: want %s", name, setList())
	}
	return RowSource{Set: name}, nil
}

// Shipped says whether the rows are built into mrep rather than read from a file.
func (s RowSource) Shipped() bool { return s.Path == "" && s.Stored == nil }

// Rows are a shipped set's rows (nil for a file).
func (s RowSource) Rows() []Row {
	if s.Stored != nil {
		return s.Stored
	}
	if !s.Shipped() {
		return nil
	}
	if s.Set == "" {
		return Default()
	}
	return Sets[s.Set]()
}

// String names the source in messages: the shipped set, or the file's path as given (the caller
// makes it safe to print).
func (s RowSource) String() string {
	switch {
	case s.Stored != nil:
		return "the measured results in the history"
	case !s.Shipped():
		return s.Path
	case s.Set == "" || s.Set == "calibration":
		return "the shipped calibration set"
	case s.Set == "heldout":
		return "the shipped held-out set"
	}
	return "the shipped " + s.Set + " set"
}

// BenchServe returns the serving benchmarks vLLM's and SGLang's projects published
// (bench_serve.json): TTFT, TPOT and throughput under a closed loop of users.
func BenchServe() []Row {
	return embedded("bench_serve.json", benchServeRows)
}

// HeldOutTraining returns the training rows no figure was fitted to: Megatron-Bridge's
// pre-training tables of the releases other than 25.11 (heldout_training.json) and AMD's Primus
// runs on MI355X beyond the moe_package README the Instinct lane is fitted to
// (amd_heldout_training.json).
func HeldOutTraining() []Row {
	return append(embedded("heldout_training.json", heldoutTrainingRows), embedded("amd_heldout_training.json", amdHeldoutTrainingRows)...)
}

// Extended returns the out-of-sample serving rows shipped with mrep (extended.json): other
// chips, models, MoE and TP sizes than the calibration set, which no efficiency figure was
// fitted to.
func Extended() []Row {
	return embedded("extended.json", extended)
}

// MemorySet returns the measured peak-memory rows shipped with mrep (memory.json): the rows
// the memory model's allocator share is fitted to and its verdicts are checked against.
func MemorySet() []Row {
	return embedded("memory.json", memoryRows)
}

// The limits of a rows file: its size, and its rows (each prepared row keeps its counted steps,
// about 10 KB, for as long as a validation or fit runs).
const (
	MaxRowsBytes = 64 << 20
	MaxRows      = 100_000
)

// Parse reads rows from JSON (an array of rows, or {"rows": [...]}) or CSV (a header of the
// JSON field names). name is used in errors, which give the line (CSV) or index (JSON).
func Parse(name string, r io.Reader) ([]Row, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxRowsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("calibration file %s: %w", name, err)
	}
	if len(b) > MaxRowsBytes {
		// never cut a file short without a word: the rows past the cut would be lost
		return nil, fmt.Errorf("calibration file %s: larger than %d MiB, the limit for a rows file (split it)", name, MaxRowsBytes>>20)
	}
	t := bytes.TrimSpace(b)
	var rows []Row
	var where func(i int) string
	if len(t) > 0 && (t[0] == '[' || t[0] == '{') {
		if rows, err = parseJSON(t); err != nil {
			return nil, fmt.Errorf("calibration file %s: %w", name, err)
		}
		where = func(i int) string { return fmt.Sprintf("/rows/%d", i) }
	} else {
		if rows, err = parseCSV(t); err != nil {
			return nil, fmt.Errorf("calibration file %s: %w", name, err)
		}
		where = func(i int) string { return fmt.Sprintf("line %d", i+2) }
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("calibration file %s: no rows", name)
	}
	if len(rows) > MaxRows {
		return nil, fmt.Errorf("calibration file %s: %d rows, more than the %d a rows file may hold (split it)", name, len(rows), MaxRows)
	}
	seen := map[string]bool{}
	for i := range rows {
		rows[i].normalize()
		row := rows[i]
		if err := row.validate(); err != nil {
			return nil, fmt.Errorf("calibration file %s: %s (id %q): %w", name, where(i), row.ID, err)
		}
		if seen[row.ID] {
			return nil, fmt.Errorf("calibration file %s: %s: duplicate id %q", name, where(i), row.ID)
		}
		seen[row.ID] = true
	}
	return rows, nil
}

func parseJSON(b []byte) ([]Row, error) {
	var raw []json.RawMessage
	where := "/%d"
	if b[0] == '[' {
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, err
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var f struct {
			About string            `json:"about,omitempty"`
			Rows  []json.RawMessage `json:"rows"`
			// Skipped is what a source published that the rows leave out, each with why:
			// kept beside the rows for the reader, never predicted.
			Skipped []json.RawMessage `json:"skipped,omitempty"`
		}
		if err := dec.Decode(&f); err != nil {
			return nil, err
		}
		raw, where = f.Rows, "/rows/%d"
	}
	// each row decoded on its own, so an error names the row it is in
	rows := make([]Row, len(raw))
	for i, r := range raw {
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rows[i]); err != nil {
			return nil, fmt.Errorf(where+": %w", i, err)
		}
		// encoding/json keeps the last of two equal keys: a row that says measured twice
		// says two things, and which one is meant is not for mrep to guess
		if k, ok := duplicateKey(r); ok {
			return nil, fmt.Errorf(where+": key %q given twice", i, k)
		}
	}
	return rows, nil
}

// parseCSV reads a header of Row's JSON field names, then one row per line.
// csvColumns are the columns a rows CSV may have: every field of Row by its JSON name, with the
// field's type (read as text, true/false, a number, a list separated by semicolons, or an object
// as its JSON).
var csvColumns = func() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	rt := reflect.TypeOf(Row{})
	for i := range rt.NumField() {
		if name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			out[name] = rt.Field(i).Type
		}
	}
	return out
}()

func parseCSV(b []byte) ([]Row, error) {
	cr := csv.NewReader(bytes.NewReader(b))
	cr.FieldsPerRecord = -1
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errors.New("a header and at least one row are needed")
	}
	header := recs[0]
	seen := map[string]bool{}
	for _, h := range header {
		if _, ok := csvColumns[strings.TrimSpace(h)]; !ok {
			return nil, fmt.Errorf("line 1: unknown column %q", h)
		}
		if seen[strings.TrimSpace(h)] {
			return nil, fmt.Errorf("line 1: column %q given twice", h)
		}
		seen[strings.TrimSpace(h)] = true
	}
	if len(recs) < 2 {
		return nil, errors.New("a header and at least one row are needed")
	}
	var rows []Row
	for li, rec := range recs[1:] {
		if len(rec) != len(header) {
			return nil, fmt.Errorf("line %d: %d fields, the header has %d", li+2, len(rec), len(header))
		}
		obj := map[string]any{}
		for i, h := range header {
			h, v := strings.TrimSpace(h), strings.TrimSpace(rec[i])
			if v == "" {
				continue
			}
			switch t := csvColumns[h]; {
			case t.Kind() == reflect.String:
				obj[h] = v
			case t.Kind() == reflect.Bool || t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Bool:
				b, err := strconv.ParseBool(v)
				if err != nil {
					return nil, fmt.Errorf("line %d: %s %q is not true or false", li+2, h, v)
				}
				obj[h] = b
			case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
				// an object in one cell (a cited preset): its JSON
				var raw json.RawMessage
				if err := json.Unmarshal([]byte(v), &raw); err != nil || !strings.HasPrefix(v, "{") {
					return nil, fmt.Errorf("line %d: %s: want a JSON object in the cell, such as {\"name\":\"P\",\"source\":\"file @tag\",\"pp\":4}", li+2, h)
				}
				obj[h] = raw
			case t.Kind() == reflect.Float64:
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
					return nil, fmt.Errorf("line %d: %s %q is not a finite number", li+2, h, v)
				}
				obj[h] = f
			case t.Kind() == reflect.Slice:
				// a list in one cell: its items separated by semicolons
				var items []string
				for _, it := range strings.Split(v, ";") {
					if it = strings.TrimSpace(it); it != "" {
						items = append(items, it)
					}
				}
				obj[h] = items
			default:
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("line %d: %s %q is not an integer", li+2, h, v)
				}
				obj[h] = n
			}
		}
		j, _ := json.Marshal(obj)
		var row Row
		if err := json.Unmarshal(j, &row); err != nil {
			return nil, fmt.Errorf("line %d: %w", li+2, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// Where keeps the rows that meet every condition, each KEY=V1,V2 (any of the values): keys
// model, chip, kind, engine, dtype, source (a substring of the source), tp, ep, pp, gpus,
// concurrency, metric, stat.
// It is how a fit names its fit set out of a shipped file (calibrate --rows extended --where
// chip=B200,GB200 --where tp=1).
func Where(rows []Row, conds []string) ([]Row, error) {
	type cond struct {
		key  string
		vals []string
	}
	var cs []cond
	for _, c := range conds {
		if !strings.Contains(c, "=") && len(cs) > 0 && strings.TrimSpace(c) != "" {
			// a flag parser that splits on commas hands KEY=V1,V2 over as "KEY=V1", "V2"
			cs[len(cs)-1].vals = append(cs[len(cs)-1].vals, strings.TrimSpace(c))
			continue
		}
		k, v, ok := strings.Cut(c, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if !ok || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("where %q: want KEY=VALUE[,VALUE...]", c)
		}
		switch k {
		case "model", "chip", "kind", "engine", "dtype", "source", "tp", "ep", "pp", "gpus", "concurrency", "metric", "stat":
		default:
			return nil, fmt.Errorf("where %q: unknown key %q (want model, chip, kind, engine, dtype, source, tp, ep, pp, gpus, concurrency, metric or stat)", c, k)
		}
		var vals []string
		for _, x := range strings.Split(v, ",") {
			vals = append(vals, strings.TrimSpace(x))
		}
		cs = append(cs, cond{k, vals})
	}
	field := func(r Row, k string) string {
		n := func(v int64) string {
			if v == 0 && (k == "pp" || k == "ep") {
				v = 1 // an unset degree is one
			}
			return strconv.FormatInt(v, 10)
		}
		switch k {
		case "model":
			return r.Model
		case "chip":
			return r.Chip
		case "kind":
			return r.Kind
		case "engine":
			return engineOfNamed(r)
		case "dtype":
			return r.DType
		case "source":
			return r.Source
		case "tp":
			return n(r.TP)
		case "ep":
			return n(r.EP)
		case "pp":
			return n(r.PP)
		case "concurrency":
			return n(r.Concurrency)
		case "metric":
			return r.Metric
		case "stat":
			return r.Stat
		}
		return n(r.GPUs)
	}
	var out []Row
	for _, r := range rows {
		keep := true
		for _, c := range cs {
			f, hit := field(r, c.key), false
			for _, v := range c.vals {
				if c.key == "source" && strings.Contains(f, v) || c.key != "source" && strings.EqualFold(f, v) {
					hit = true
					break
				}
			}
			keep = keep && hit
		}
		if keep {
			out = append(out, r)
		}
	}
	return out, nil
}

// Check normalizes r as a rows file's row is (units, metric names) and says what is wrong with
// it, for rows built in code (a measured result file's).
func (r *Row) Check() error {
	r.normalize()
	return r.validate()
}

// duplicateKey finds a key given twice at the top level of the JSON object raw.
func duplicateKey(raw []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		k, _ := t.(string)
		if seen[k] {
			return k, true
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}
