// Package chips is mrep's accelerator database: an embedded data file with a source for every
// figure, plus chips a user adds from a file of the same shape.
package chips

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"sort"
	"strings"
)

//go:embed chips.json
var embedded []byte

// ErrUnknown: no chip of that name or alias.
var ErrUnknown = errors.New("unknown chip")

// ErrNoPeak: the chip has no peak for that dtype (e.g. fp8 on an A100).
var ErrNoPeak = errors.New("no peak for dtype")

// Chip is one accelerator. Units: TFLOP/s (1e12), GB/s (1e9 B/s), GiB for capacity.
type Chip struct {
	Name         string             `json:"name"`
	Aliases      []string           `json:"aliases,omitempty"`
	Vendor       string             `json:"vendor"`
	Title        string             `json:"title"`
	PeakTFLOPs   map[string]float64 `json:"peak_tflops"`
	MemoryGiB    float64            `json:"memory_gib"`
	HBMGBps      float64            `json:"hbm_gbps"`
	ScaleUpGBps  float64            `json:"scale_up_gbps"` // bidirectional headline per chip
	ScaleOutGBps float64            `json:"scale_out_gbps"`
	TDPW         float64            `json:"tdp_w"` // 0: not published
	OnChipMiB    float64            `json:"onchip_mib"`
	// HostGBps is the host link per direction (PCIe, or NVLink-C2C on Grace systems): what
	// offloading to host memory moves over. 0: PCIe Gen5 x16 is assumed.
	HostGBps float64 `json:"host_gbps,omitempty"`
	// SMs is the number of streaming multiprocessors (compute units on AMD) that GEMM tiles
	// spread over; 0 for chips whose matrix units are not tiled that way (TPU MXUs, Gaudi MMEs).
	SMs int `json:"sms,omitempty"`
	// ExpTera is the chip's rate of softmax exponentials (MUFU.EX2 on the special function
	// units), 1e12 per second. A flash-attention kernel takes one per score beside its 4·d
	// tensor-core FLOPs (d the head dimension), so small heads spend a larger share of their time
	// on the exponentials: timing scales attention by that share, relative to d = 128. 0: not
	// published (no head-dimension term).
	ExpTera float64 `json:"exp_tera,omitempty"`
	// Efficiency is what kernels achieve on the chip: the file's efficiency_defaults with
	// this chip's own figures over them.
	Efficiency Efficiency `json:"efficiency"`
	Sources    []string   `json:"sources"`
	Notes      string     `json:"notes,omitempty"`
	// PriceUSDPerGPUHour is an indicative on-demand rental price with its source and month:
	// list prices move, so every figure computed from it is labelled an estimate and the user
	// overrides it (--price). 0: no price on file.
	PriceUSDPerGPUHour float64 `json:"price_usd_per_gpu_hour,omitempty"`
	PriceSource        string  `json:"price_source,omitempty"`
	PriceDate          string  `json:"price_date,omitempty"`
}

// Efficiency holds what real kernels achieve, as opposed to the datasheet: the time model's
// parameters. Every figure names its source in Sources (parameter name -> where it comes from:
// "datasheet …", "measured on … with …", "fitted to measured-calibration rows …").
type Efficiency struct {
	// GEMMFrac is the fraction of the dense peak a large, well-shaped GEMM reaches, by dtype
	// (a missing dtype uses bf16's). Tile and wave quantization come on top, from SMs.
	GEMMFrac map[string]float64 `json:"gemm_frac,omitempty"`
	// GEMMK0 is, by dtype, the depth in K a GEMM tile spends outside its main loop (its
	// prologue and its epilogue, which scales and writes the output tile): a tile of depth K
	// takes K + K0 steps' time, so a GEMM shallower than 4,096 runs at
	// K(4096+K0) / (4096(K+K0)) of GEMMFrac, and a deeper one above it, as the measured tables do
	// (timing.GEMMEta). FP8's is larger: its main loop is twice as fast and its epilogue
	// applies the scales. Empty: no depth term.
	GEMMK0 map[string]float64 `json:"gemm_k0,omitempty"`
	// GroupedGEMMFrac is the share of the dense GEMM fraction a grouped GEMM (a MoE layer's
	// experts, one launch over ragged per-expert token groups) achieves when compute-bound.
	GroupedGEMMFrac float64 `json:"grouped_gemm_frac,omitempty"`
	// MXFP8GEMMShare is the share of the tensor-scaled FP8 GEMM rate a block-scaled MXFP8 GEMM
	// reaches (0: the same rate): its operands carry an E8M0 scale per 32 elements, which the
	// kernel loads and applies beside the data. Training recipes only (layout marks the GEMMs).
	MXFP8GEMMShare float64 `json:"mxfp8_gemm_share,omitempty"`
	// GEMMTiles are the output tile shapes [M, N] the chip's GEMM kernels choose from.
	GEMMTiles [][2]int `json:"gemm_tiles,omitempty"`
	// AttnFrac and AttnBwdFrac: fused (flash) attention forward and backward, fraction of the
	// 16-bit peak for long sequences.
	AttnFrac    float64 `json:"attn_frac,omitempty"`
	AttnBwdFrac float64 `json:"attn_bwd_frac,omitempty"`
	// TrainAttnFrac is cuDNN's fused attention as Transformer Engine runs it in training, by the
	// precision of its matmuls and pass: fractions of that precision's peak for 128-wide heads
	// (the exponential term comes on top), keys bf16, bf16_bwd, fp8, fp8_bwd (per-tensor
	// scaled FP8: TE's delayed or current scaling), mxfp8, mxfp8_bwd (block-scaled). Measured
	// kernels (calib/sources/write_train_attn.py). FP8 attention (Megatron's
	// fp8_dot_product_attention) is the 16-bit attention the lane times, sped up by cuDNN's
	// measured 8-bit over 16-bit fraction (timing); without them it is timed as 16-bit.
	TrainAttnFrac map[string]float64 `json:"train_attn_frac,omitempty"`
	// AttnWindowK0 and AttnWindowK0Bwd are a sliding-window attention kernel's work per query
	// tile outside its window's key loop, in keys (forward, backward): a window of w keys runs
	// at w/(w+K0) of the causal kernel's rate per score, so a 128-key window (GPT-OSS) runs at a
	// fifth of it while a 4,096-key one (Mistral, Gemma) loses a tenth. Measured with cuDNN, the
	// backend Megatron runs (calib/sources/write_attn_window.py).
	AttnWindowK0    float64 `json:"attn_window_k0,omitempty"`
	AttnWindowK0Bwd float64 `json:"attn_window_k0_bwd,omitempty"`
	// AttnSinkBwdNs is what a learnable softmax sink (GPT-OSS's) adds to the attention backward,
	// per token and query head, in nanoseconds: cuDNN reduces the sink's gradient over every
	// query, a cost that grows with the tokens, not the scores.
	AttnSinkBwdNs float64 `json:"attn_sink_bwd_ns,omitempty"`
	// AttnDecodeHBMFrac is the share of the nominal HBM bandwidth a decode attention kernel
	// streams the KV cache at (0: hbm_frac, as any memory-bound kernel): split-KV decode kernels
	// with their partial-result reduction, paged gathers and FP8 dequantization read below a
	// plain copy's rate. A serving engine's lane sets it from its kernels' measured times.
	AttnDecodeHBMFrac float64 `json:"attn_decode_hbm_frac,omitempty"`
	// AttnDecodeHBMFrac8 is the same for an 8-bit (FP8) KV cache, counted in its 8-bit bytes
	// (0: as a 16-bit cache): the kernels dequantize each element as they stream it, so halving
	// the bytes does not halve the time (NVIDIA's measured kernels: FP8-KV decode attention runs
	// 0.3-0.5x mrep's byte count would say).
	AttnDecodeHBMFrac8 float64 `json:"attn_decode_hbm_frac_8bit,omitempty"`
	// AttnOverheadUs and AttnDecodeOverheadUs are what a serving engine's attention op costs
	// per call beyond its kernel, in prefill and in decode: the KV-cache write, the paged
	// cache's metadata and the kernel's plan, which a plain FlashAttention call does not do
	// (NVIDIA's timings of the engines' ops run 5-15 us over PyTorch's SDPA on the same small
	// shapes of an H100, and meet it on large ones).
	AttnOverheadUs       float64 `json:"attn_overhead_us,omitempty"`
	AttnDecodeOverheadUs float64 `json:"attn_decode_overhead_us,omitempty"`
	// MoEOverheadUs is what a serving engine's fused MoE op costs per grouped expert GEMM (two
	// per layer) beyond the GEMM itself: routing, top-k, token permutation and the weighted
	// un-permute, whose kernels no op of the model counts (NVIDIA's timings of the engines' MoE
	// ops on one token run 10-40 us over the weights' read time). Forward passes only.
	MoEOverheadUs float64 `json:"moe_overhead_us,omitempty"`
	// MLAFrac and MLADecodeFrac are latent attention's (DeepSeek's MLA) share of the 16-bit
	// peak in prefill and in decode at full tensor-core tiles, where its kernels differ from
	// the engine's other attention (0: attn_frac).
	MLAFrac       float64 `json:"mla_frac,omitempty"`
	MLADecodeFrac float64 `json:"mla_decode_frac,omitempty"`
	// MLADecodeFrac8 is MLADecodeFrac over an 8-bit (FP8) latent cache (0: as a 16-bit one):
	// SGLang's Hopper MLA decode dequantizes it at 4x the 16-bit cache's time.
	MLADecodeFrac8 float64 `json:"mla_decode_frac_8bit,omitempty"`
	// MLAFP8Math: the engine's latent attention over an 8-bit cache multiplies in FP8 on this
	// chip (TensorRT-LLM's MLA kernels on Blackwell, which SGLang runs too), so its peak is FP8's.
	MLAFP8Math bool `json:"mla_fp8_math,omitempty"`
	// MoEGEMMFrac is the share of the dense GEMM fraction a serving engine's grouped expert
	// GEMMs reach when compute-bound, by precision (a precision without one: grouped_gemm_frac):
	// Triton's fused MoE, CUTLASS's grouped GEMM and TensorRT-LLM's MoE kernels differ by
	// precision and by engine release.
	MoEGEMMFrac map[string]float64 `json:"moe_gemm_frac,omitempty"`
	// MoEHBMFrac is the share of the nominal HBM bandwidth the engine's MoE op streams the
	// touched experts' weights at (0: hbm_frac): a small batch's grouped GEMM is a weight read
	// split over ragged per-expert tiles.
	MoEHBMFrac float64 `json:"moe_hbm_frac,omitempty"`
	// HBMFrac is the achievable share of the nominal memory bandwidth.
	HBMFrac float64 `json:"hbm_frac,omitempty"`
	// KernelLatencyUs is the fixed cost of one kernel launch (launch, ramp-up, tail, sync).
	KernelLatencyUs float64 `json:"kernel_latency_us,omitempty"`
	// HostLaunchUs is the host's cost to launch one kernel outside a CUDA graph: an eagerly
	// launched kernel takes at least this long, however little work it has.
	HostLaunchUs float64 `json:"host_launch_us,omitempty"`
	// StepOverheadUs is the fixed cost of one engine step (scheduling, sampling, host sync).
	StepOverheadUs float64 `json:"step_overhead_us,omitempty"`
	// PPStepUs is the fixed cost of each micro-batch step of a pipeline stage beyond its
	// kernels: the stages' hand-off (the send/recv handshake and the next stage's scheduling),
	// paid PP times a cycle where a single-stage engine pays none of it.
	PPStepUs float64 `json:"pp_step_us,omitempty"`
	// Links: achievable share of the per-direction bandwidth and the fixed latency of one
	// collective, for the scale-up fabric and the scale-out network.
	ScaleUpFrac       float64 `json:"scale_up_frac,omitempty"`
	ScaleUpLatencyUs  float64 `json:"scale_up_latency_us,omitempty"`
	ScaleOutFrac      float64 `json:"scale_out_frac,omitempty"`
	ScaleOutLatencyUs float64 `json:"scale_out_latency_us,omitempty"`
	// ScaleUpDomain is how many chips share the scale-up fabric (8 in an HGX node, 72 in an NVL72).
	ScaleUpDomain int `json:"scale_up_domain,omitempty"`
	// EagerElementwise is how many times an eager PyTorch model's elementwise ops (norms,
	// rotary, activations, residual adds) cross HBM compared with fused kernels: torch runs each
	// op of an RMSNorm or a rotary embedding as its own kernel (torch.compile fuses them back).
	EagerElementwise float64 `json:"eager_elementwise,omitempty"`
	// SeqOverheadUs is an engine step's host time per running sequence beyond its kernels
	// (scheduling, sampling, detokenizing): what a step costs at thousands of sequences.
	SeqOverheadUs float64 `json:"seq_overhead_us,omitempty"`
	// RequestOverheadUs is what a client waits per request beyond the engine's steps before
	// its first token: the API server's HTTP handling and tokenization, the hand-off to the
	// scheduler and the first token's detokenization and streaming (a serving benchmark's TTFT
	// includes it; an offline engine's steps do not).
	RequestOverheadUs float64 `json:"request_overhead_us,omitempty"`
	// MoELaunchUs is the host's time per kernel it issues in an eager MoE layer (Python,
	// dispatch and launch; layout.MoELaunches counts them): when a stage's MoE layers take the
	// host longer to issue than the GPU to run, the stage runs at the host's pace, as small
	// experts on short micro-batches do. It depends on the host CPU (x86 beside an HGX board,
	// Grace in an NVL72).
	MoELaunchUs float64 `json:"moe_launch_us,omitempty"`
	// Lanes are a training framework's figures on this chip (megatron, fsdp): what its kernels
	// achieve where they differ from the chip's own (Transformer Engine's FP8 GEMMs, grouped
	// GEMMs), each with its fit set. A lane names only the figures it changes.
	Lanes map[string]Efficiency `json:"lanes,omitempty"`
	// Release is, in a serving engine's lane, the engine release its figures were fitted on
	// (engines move fast: a row or plan of another release is timed with them, and validate
	// reports the error by release so the drift shows).
	Release string            `json:"release,omitempty"`
	Sources map[string]string `json:"sources,omitempty"`
}

// LanesOf is the lanes of the named chip (nil when it has none or is unknown).
func (db *DB) LanesOf(name string) map[string]Efficiency {
	c, err := db.Lookup(name)
	if err != nil {
		return nil
	}
	return c.Efficiency.Lanes
}

// TrainAttnKeys are TrainAttnFrac's keys: the matmuls' precision, and _bwd for the backward.
var TrainAttnKeys = map[string]bool{"bf16": true, "bf16_bwd": true, "fp8": true, "fp8_bwd": true, "mxfp8": true, "mxfp8_bwd": true}

// Lane is e as the training framework fw runs: e with the lane's figures set over it.
func (e Efficiency) Lane(fw string) Efficiency {
	o, ok := e.Lanes[fw]
	if !ok {
		return e
	}
	out := e.over(o)
	out.Lanes = e.Lanes
	return out
}

// WithLane is e with its lane name's figures replaced by those o sets (a lane e lacks starts
// empty): how a fit adds what it measured to a chip without touching its other lanes.
func (e Efficiency) WithLane(name string, o Efficiency) Efficiency {
	out := e
	out.Lanes = map[string]Efficiency{}
	for k, v := range e.Lanes {
		out.Lanes[k] = v
	}
	lane := out.Lanes[name].over(o)
	lane.Lanes = nil
	if len(lane.GEMMFrac) == 0 {
		lane.GEMMFrac = nil
	}
	out.Lanes[name] = lane
	return out
}

// over returns e with every figure o sets replaced by o's (and o's sources).
func (e Efficiency) over(o Efficiency) Efficiency {
	out := e
	out.GEMMFrac = map[string]float64{}
	for k, v := range e.GEMMFrac {
		out.GEMMFrac[k] = v
	}
	for k, v := range o.GEMMFrac {
		out.GEMMFrac[k] = v
	}
	if len(o.GEMMTiles) > 0 {
		out.GEMMTiles = o.GEMMTiles
	}
	out.GEMMK0 = overlay(e.GEMMK0, o.GEMMK0)
	out.MoEGEMMFrac = overlay(e.MoEGEMMFrac, o.MoEGEMMFrac)
	out.TrainAttnFrac = overlay(e.TrainAttnFrac, o.TrainAttnFrac)
	setF := func(dst *float64, v float64) {
		if v != 0 {
			*dst = v
		}
	}
	setF(&out.GroupedGEMMFrac, o.GroupedGEMMFrac)
	setF(&out.MXFP8GEMMShare, o.MXFP8GEMMShare)
	setF(&out.AttnFrac, o.AttnFrac)
	setF(&out.AttnBwdFrac, o.AttnBwdFrac)
	setF(&out.AttnWindowK0, o.AttnWindowK0)
	setF(&out.AttnWindowK0Bwd, o.AttnWindowK0Bwd)
	setF(&out.AttnSinkBwdNs, o.AttnSinkBwdNs)
	setF(&out.AttnDecodeHBMFrac, o.AttnDecodeHBMFrac)
	setF(&out.AttnDecodeHBMFrac8, o.AttnDecodeHBMFrac8)
	setF(&out.AttnOverheadUs, o.AttnOverheadUs)
	setF(&out.AttnDecodeOverheadUs, o.AttnDecodeOverheadUs)
	setF(&out.MoEOverheadUs, o.MoEOverheadUs)
	setF(&out.MoEHBMFrac, o.MoEHBMFrac)
	setF(&out.MLAFrac, o.MLAFrac)
	setF(&out.MLADecodeFrac, o.MLADecodeFrac)
	setF(&out.MLADecodeFrac8, o.MLADecodeFrac8)
	out.MLAFP8Math = out.MLAFP8Math || o.MLAFP8Math
	setF(&out.HBMFrac, o.HBMFrac)
	setF(&out.KernelLatencyUs, o.KernelLatencyUs)
	setF(&out.StepOverheadUs, o.StepOverheadUs)
	setF(&out.PPStepUs, o.PPStepUs)
	setF(&out.HostLaunchUs, o.HostLaunchUs)
	setF(&out.ScaleUpFrac, o.ScaleUpFrac)
	setF(&out.ScaleUpLatencyUs, o.ScaleUpLatencyUs)
	setF(&out.ScaleOutFrac, o.ScaleOutFrac)
	setF(&out.ScaleOutLatencyUs, o.ScaleOutLatencyUs)
	if o.ScaleUpDomain != 0 {
		out.ScaleUpDomain = o.ScaleUpDomain
	}
	setF(&out.EagerElementwise, o.EagerElementwise)
	setF(&out.MoELaunchUs, o.MoELaunchUs)
	setF(&out.SeqOverheadUs, o.SeqOverheadUs)
	setF(&out.RequestOverheadUs, o.RequestOverheadUs)
	if o.Release != "" {
		out.Release = o.Release
	}
	if len(o.Lanes) > 0 {
		out.Lanes = map[string]Efficiency{}
		for k, v := range e.Lanes {
			out.Lanes[k] = v
		}
		for k, v := range o.Lanes {
			out.Lanes[k] = v
		}
	}
	out.Sources = map[string]string{}
	for k, v := range e.Sources {
		out.Sources[k] = v
	}
	for k, v := range o.Sources {
		out.Sources[k] = v
	}
	return out
}

// overlay is a per-dtype figure map with o's entries over e's; nil when neither has any (the
// figure is then not set).
func overlay(e, o map[string]float64) map[string]float64 {
	if len(e)+len(o) == 0 {
		return nil
	}
	out := make(map[string]float64, len(e)+len(o))
	maps.Copy(out, e)
	maps.Copy(out, o)
	return out
}

// validate checks a resolved efficiency: fractions in (0, 1], latencies non-negative, a source
// for every figure.
func (e Efficiency) validate() error {
	fracs := map[string]float64{"attn_frac": e.AttnFrac, "attn_bwd_frac": e.AttnBwdFrac, "hbm_frac": e.HBMFrac, "grouped_gemm_frac": e.GroupedGEMMFrac,
		"scale_up_frac": e.ScaleUpFrac, "scale_out_frac": e.ScaleOutFrac}
	for d, v := range e.GEMMFrac {
		fracs["gemm_frac."+d] = v
	}
	// the lanes' optional shares (0: not set, the figure they fall back to applies)
	for k, v := range map[string]float64{"attn_decode_hbm_frac": e.AttnDecodeHBMFrac, "attn_decode_hbm_frac_8bit": e.AttnDecodeHBMFrac8,
		"moe_hbm_frac": e.MoEHBMFrac, "mxfp8_gemm_share": e.MXFP8GEMMShare, "mla_frac": e.MLAFrac, "mla_decode_frac": e.MLADecodeFrac, "mla_decode_frac_8bit": e.MLADecodeFrac8} {
		if v != 0 {
			fracs[k] = v
		}
	}
	for d, v := range e.MoEGEMMFrac {
		fracs["moe_gemm_frac."+d] = v
	}
	for k, v := range e.TrainAttnFrac {
		if !TrainAttnKeys[k] {
			return fmt.Errorf("efficiency.train_attn_frac.%s: want one of bf16, bf16_bwd, fp8, fp8_bwd, mxfp8, mxfp8_bwd", k)
		}
		fracs["train_attn_frac."+k] = v
	}
	for _, k := range sortedKeys(fracs) {
		if v := fracs[k]; !(v > 0 && v <= 1) {
			return fmt.Errorf("efficiency.%s must be in (0, 1], got %g", k, v)
		}
	}
	for k, v := range map[string]float64{"kernel_latency_us": e.KernelLatencyUs, "step_overhead_us": e.StepOverheadUs, "host_launch_us": e.HostLaunchUs, "pp_step_us": e.PPStepUs,
		"scale_up_latency_us": e.ScaleUpLatencyUs, "scale_out_latency_us": e.ScaleOutLatencyUs, "moe_launch_us": e.MoELaunchUs, "seq_overhead_us": e.SeqOverheadUs, "request_overhead_us": e.RequestOverheadUs,
		"attn_overhead_us": e.AttnOverheadUs, "attn_decode_overhead_us": e.AttnDecodeOverheadUs, "moe_overhead_us": e.MoEOverheadUs,
		"attn_window_k0": e.AttnWindowK0, "attn_window_k0_bwd": e.AttnWindowK0Bwd, "attn_sink_bwd_ns": e.AttnSinkBwdNs} {
		if v < 0 || math.IsNaN(v) {
			return fmt.Errorf("efficiency.%s must be >= 0, got %g", k, v)
		}
	}
	if len(e.GEMMFrac) == 0 {
		return errors.New("efficiency.gemm_frac is empty")
	}
	for _, d := range sortedKeys(e.GEMMK0) {
		if v := e.GEMMK0[d]; !(v >= 0 && v <= 1e5) {
			return fmt.Errorf("efficiency.gemm_k0.%s must be in [0, 1e5] (a depth in K), got %g", d, v)
		}
	}
	for _, t := range e.GEMMTiles {
		if t[0] <= 0 || t[1] <= 0 {
			return fmt.Errorf("efficiency.gemm_tiles: %v is not a tile shape", t)
		}
	}
	if e.ScaleUpDomain < 1 {
		return errors.New("efficiency.scale_up_domain must be >= 1")
	}
	if e.EagerElementwise != 0 && !(e.EagerElementwise >= 1 && e.EagerElementwise <= 20) {
		return fmt.Errorf("efficiency.eager_elementwise must be in [1, 20] (a byte multiplier), got %g", e.EagerElementwise)
	}
	for _, name := range sortedKeys(e.Lanes) {
		if name == "" || len(e.Lanes[name].Lanes) > 0 {
			return fmt.Errorf("efficiency.lanes.%q: a lane is a framework name with figures, not nested lanes", name)
		}
		l := e.Lane(name)
		l.Lanes = nil
		if err := l.validate(); err != nil {
			return fmt.Errorf("efficiency.lanes.%s: %w", name, err)
		}
	}
	if len(e.TrainAttnFrac) > 0 && e.Sources["train_attn_frac"] == "" {
		return errors.New("efficiency.sources.train_attn_frac: every efficiency figure needs a source")
	}
	for _, k := range []string{"gemm_frac", "grouped_gemm_frac", "attn_frac", "hbm_frac", "kernel_latency_us", "host_launch_us", "step_overhead_us", "scale_up_frac", "scale_out_frac"} {
		if e.Sources[k] == "" {
			return fmt.Errorf("efficiency.sources.%s: every efficiency figure needs a source", k)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// DTypes are the peak keys mrep knows, in display order.
var DTypes = []string{"fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"}

// Peak returns the dense peak for dtype in FLOP/s.
func (c Chip) Peak(dtype string) (float64, error) {
	v, ok := c.PeakTFLOPs[dtype]
	if !ok || v <= 0 {
		have := make([]string, 0, len(c.PeakTFLOPs))
		for _, d := range DTypes {
			if c.PeakTFLOPs[d] > 0 {
				have = append(have, d)
			}
		}
		return 0, fmt.Errorf("chip %s has no %s peak (it has %s): %w", c.Name, dtype, strings.Join(have, ", "), ErrNoPeak)
	}
	return v * 1e12, nil
}

// HBMBytesPerSec is memory bandwidth in B/s.
func (c Chip) HBMBytesPerSec() float64 { return c.HBMGBps * 1e9 }

// NetBytesPerSec is the scale-up bandwidth per direction in B/s: half the bidirectional
// headline, because a GPU's sends and receives each get one direction.
func (c Chip) NetBytesPerSec() float64 { return c.ScaleUpGBps * 1e9 / 2 }

// MemoryBytes is the capacity in bytes (GiB).
func (c Chip) MemoryBytes() float64 { return c.MemoryGiB * (1 << 30) }

// OnChipBytes is the on-chip memory that may keep weights resident across steps.
func (c Chip) OnChipBytes() float64 { return c.OnChipMiB * (1 << 20) }

// DB is a set of chips.
type DB struct {
	chips   []Chip
	index   map[string]int
	systems []System
}

type file struct {
	About string `json:"about,omitempty"`
	// EfficiencyDefaults apply to every chip of the file, under each chip's own figures.
	EfficiencyDefaults *Efficiency `json:"efficiency_defaults,omitempty"`
	Chips              []Chip      `json:"chips"`
	Systems            []System    `json:"systems,omitempty"`
}

// System is chips in nodes and fabrics: how many share a node and a scale-up domain, and the
// links' headline bandwidths per chip (scale-up bidirectional, scale-out per direction).
type System struct {
	Name          string  `json:"name"`
	Chip          string  `json:"chip"`
	GPUsPerNode   int     `json:"gpus_per_node"`
	ScaleUpDomain int     `json:"scale_up_domain"`
	ScaleUpGBps   float64 `json:"scale_up_gbps"`
	ScaleOutGBps  float64 `json:"scale_out_gbps"`
	// MaxPowerKW is the node's published maximum power: what the node draws beyond its GPUs'
	// TDPs (CPUs, NICs, switches, fans, conversion losses) is its non-GPU overhead.
	MaxPowerKW float64  `json:"max_power_kw,omitempty"`
	Sources    []string `json:"sources"`
}

// ErrUnknownSystem: no system of that name.
var ErrUnknownSystem = errors.New("unknown system")

// System resolves a system to its chip with the system's links and domain applied.
func (db *DB) System(name string) (System, Chip, error) {
	for _, s := range db.systems {
		if key(s.Name) == key(name) {
			c, err := db.Lookup(s.Chip)
			if err != nil {
				return s, c, fmt.Errorf("system %s: %w", s.Name, err)
			}
			c.ScaleUpGBps, c.ScaleOutGBps = s.ScaleUpGBps, s.ScaleOutGBps
			c.Efficiency.ScaleUpDomain = s.ScaleUpDomain
			return s, c, nil
		}
	}
	names := make([]string, len(db.systems))
	for i, s := range db.systems {
		names[i] = s.Name
	}
	return System{}, Chip{}, fmt.Errorf("system %q (known: %s): %w", name, strings.Join(names, ", "), ErrUnknownSystem)
}

// Systems lists the systems.
func (db *DB) Systems() []System { return append([]System(nil), db.systems...) }

// Default returns the embedded database.
func Default() *DB {
	db, err := parse("chips.json", bytes.NewReader(embedded), nil)
	if err != nil {
		panic(fmt.Sprintf("embedded chips.json: %v", err)) // a build defect, caught by tests
	}
	return db
}

// embeddedDefaults are the efficiency defaults of the embedded file: a user file's chips start
// from them unless the file brings its own.
func embeddedDefaults() *Efficiency {
	var f file
	if err := json.Unmarshal(embedded, &f); err != nil || f.EfficiencyDefaults == nil {
		panic("embedded chips.json has no efficiency_defaults")
	}
	return f.EfficiencyDefaults
}

// Parse reads a chips file; name is used in errors. Chips without efficiency figures of their
// own take the file's efficiency_defaults, else the embedded database's.
func Parse(name string, r io.Reader) (*DB, error) { return parse(name, r, embeddedDefaults()) }

func parse(name string, r io.Reader, fallback *Efficiency) (*DB, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("chips file %s: %w", name, err)
	}
	base := fallback
	if f.EfficiencyDefaults != nil {
		base = f.EfficiencyDefaults
	}
	if base == nil {
		return nil, fmt.Errorf("chips file %s: /efficiency_defaults: missing", name)
	}
	db := &DB{index: map[string]int{}}
	for i, c := range f.Chips {
		c.Efficiency = base.over(c.Efficiency)
		if err := c.Efficiency.validate(); err != nil {
			return nil, fmt.Errorf("chips file %s: /chips/%d: %s: %w", name, i, c.Name, err)
		}
		if err := db.add(c); err != nil {
			return nil, fmt.Errorf("chips file %s: /chips/%d: %w", name, i, err)
		}
	}
	for i, s := range f.Systems {
		switch {
		case s.Name == "" || s.Chip == "":
			return nil, fmt.Errorf("chips file %s: /systems/%d: name and chip are required", name, i)
		case !chipName.MatchString(s.Name):
			return nil, fmt.Errorf("chips file %s: /systems/%d: name %q: a system's name is letters, digits and . _ + - (at most 64, starting with a letter or digit)", name, i, s.Name)
		case s.GPUsPerNode < 1 || s.ScaleUpDomain < 1 || !(s.ScaleUpGBps > 0) || !(s.ScaleOutGBps > 0):
			return nil, fmt.Errorf("chips file %s: /systems/%d: %s: gpus_per_node, scale_up_domain and link bandwidths must be positive", name, i, s.Name)
		case len(s.Sources) == 0:
			return nil, fmt.Errorf("chips file %s: /systems/%d: %s: every system needs sources", name, i, s.Name)
		case s.MaxPowerKW < 0 || math.IsNaN(s.MaxPowerKW):
			return nil, fmt.Errorf("chips file %s: /systems/%d: %s: max_power_kw must not be negative", name, i, s.Name)
		}
		db.systems = append(db.systems, s)
	}
	return db, nil
}

func key(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "-")) }

// chipName is what a chip or system may be called: a name typed after --chip, printed in
// tables, markdown and SVG, so letters, digits and . _ + - only.
var chipName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)

func (db *DB) add(c Chip) error {
	if c.Name == "" {
		return errors.New("name is empty")
	}
	if !chipName.MatchString(c.Name) {
		return fmt.Errorf("name %q: a chip's name is letters, digits and . _ + - (at most 64, starting with a letter or digit), as --chip takes it", c.Name)
	}
	if c.HBMGBps <= 0 || c.MemoryGiB <= 0 || c.ScaleUpGBps <= 0 {
		return fmt.Errorf("%s: hbm_gbps, memory_gib and scale_up_gbps must be positive (a chip without NVLink-class links scales up over PCIe)", c.Name)
	}
	if len(c.PeakTFLOPs) == 0 {
		return fmt.Errorf("%s: peak_tflops is empty", c.Name)
	}
	for d, v := range c.PeakTFLOPs {
		if v <= 0 {
			return fmt.Errorf("%s: peak_tflops.%s must be positive", c.Name, d)
		}
	}
	if err := c.physical(); err != nil {
		return err
	}
	if len(c.Sources) == 0 {
		return fmt.Errorf("%s: every chip needs sources for its figures", c.Name)
	}
	if c.PriceUSDPerGPUHour < 0 || math.IsNaN(c.PriceUSDPerGPUHour) || math.IsInf(c.PriceUSDPerGPUHour, 0) {
		return fmt.Errorf("%s: price_usd_per_gpu_hour must be a finite non-negative number", c.Name)
	}
	if c.PriceUSDPerGPUHour > 0 && c.PriceSource == "" {
		return fmt.Errorf("%s: a price needs its price_source", c.Name)
	}
	for _, n := range append([]string{c.Name}, c.Aliases...) {
		if j, dup := db.index[key(n)]; dup && db.chips[j].Name != c.Name {
			return fmt.Errorf("%s: name or alias %q already belongs to %s", c.Name, n, db.chips[j].Name)
		}
	}
	if j, ok := db.index[key(c.Name)]; ok { // a user file replaces a chip of the same name
		db.chips[j] = c
	} else {
		db.chips = append(db.chips, c)
		j = len(db.chips) - 1
		db.index[key(c.Name)] = j
	}
	j := db.index[key(c.Name)]
	for _, a := range c.Aliases {
		db.index[key(a)] = j
	}
	return nil
}

// Merge adds (or replaces, by name) the chips of other.
func (db *DB) Merge(other *DB) error {
	for _, c := range other.chips {
		if err := db.add(c); err != nil {
			return err
		}
	}
	for _, s := range other.systems { // a user's system replaces one of the same name
		replaced := false
		for i := range db.systems {
			if key(db.systems[i].Name) == key(s.Name) {
				db.systems[i], replaced = s, true
			}
		}
		if !replaced {
			db.systems = append(db.systems, s)
		}
	}
	return nil
}

// Lookup finds a chip by name or alias, case-insensitively.
func (db *DB) Lookup(name string) (Chip, error) {
	if j, ok := db.index[key(name)]; ok {
		return db.chips[j], nil
	}
	names := make([]string, len(db.chips))
	for i, c := range db.chips {
		names[i] = c.Name
	}
	sort.Strings(names)
	return Chip{}, fmt.Errorf("chip %q (known: %s): %w", name, strings.Join(names, ", "), ErrUnknown)
}

// All lists the chips in file order.
func (db *DB) All() []Chip { return append([]Chip(nil), db.chips...) }

// Write writes chips as a chips file (the shape Parse reads): each chip with its resolved
// efficiency, so the file stands on its own.
func Write(w io.Writer, list []Chip) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(file{About: "written by mrep calibrate: chips with fitted efficiency figures; use with --chips-file", Chips: list})
}

// ForDevice is the chip a device name (torch.cuda.get_device_name: "NVIDIA H100 80GB HBM3",
// "NVIDIA A100-SXM4-80GB", "AMD Instinct MI300X") names: the chip with the most name parts
// found among the device name's words, so "H100 PCIe" picks H100-PCIe over H100-SXM. False
// when none matches (a CPU, an unknown part).
func (db *DB) ForDevice(device string) (Chip, bool) {
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(device), func(r rune) bool { return r == ' ' || r == '-' || r == '_' || r == '/' }) {
		words[w] = true
	}
	var best Chip
	bestScore := 0
	for _, c := range db.chips {
		for _, n := range append([]string{c.Name}, c.Aliases...) {
			parts := strings.FieldsFunc(strings.ToLower(n), func(r rune) bool { return r == '-' || r == '_' })
			all := len(parts) > 0
			for _, p := range parts {
				all = all && words[p]
			}
			if all && len(parts) > bestScore {
				best, bestScore = c, len(parts)
			}
		}
	}
	return best, bestScore > 0
}

// Physical bounds on a chip's figures: generous beyond any accelerator made or announced, so
// a typo or a hostile file (a negative TDP, a 1e300 peak) is refused with the field and the
// bound instead of printing negative joules or infinite capacity.
var physicalBounds = []struct {
	field   string
	value   func(Chip) float64
	lo, hi  float64
	allowLo bool // the lower bound itself is allowed (0: not published)
}{
	{"hbm_gbps", func(c Chip) float64 { return c.HBMGBps }, 0, 1e5, false},
	{"memory_gib", func(c Chip) float64 { return c.MemoryGiB }, 0, 1e5, false},
	{"scale_up_gbps", func(c Chip) float64 { return c.ScaleUpGBps }, 0, 1e5, false},
	{"scale_out_gbps", func(c Chip) float64 { return c.ScaleOutGBps }, 0, 1e5, true},
	{"tdp_w", func(c Chip) float64 { return c.TDPW }, 0, 1e5, true},
	{"onchip_mib", func(c Chip) float64 { return c.OnChipMiB }, 0, 1e6, true},
	{"host_gbps", func(c Chip) float64 { return c.HostGBps }, 0, 1e5, true},
	{"sms", func(c Chip) float64 { return float64(c.SMs) }, 0, 1e5, true},
	{"exp_tera", func(c Chip) float64 { return c.ExpTera }, 0, 1e4, true},
	{"price_usd_per_gpu_hour", func(c Chip) float64 { return c.PriceUSDPerGPUHour }, 0, 1e4, true},
}

func (c Chip) physical() error {
	for _, b := range physicalBounds {
		v := b.value(c)
		if math.IsNaN(v) || math.IsInf(v, 0) || v > b.hi || v < b.lo || v == b.lo && !b.allowLo {
			return fmt.Errorf("%s: %s %g is outside the physical range (%g, %g]", c.Name, b.field, v, b.lo, b.hi)
		}
	}
	for d, v := range c.PeakTFLOPs {
		if math.IsNaN(v) || v > 1e6 { // an exaFLOP/s per chip
			return fmt.Errorf("%s: peak_tflops.%s %g is outside the physical range (0, 1e+06] TFLOP/s", c.Name, d, v)
		}
	}
	return nil
}
