package layout

import (
	"fmt"
	"github.com/mrep-dev/mrep/chips"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/mrep-dev/mrep/analyzer"
)

// This file is training memory as the frameworks hold it: what one GPU of a pipeline stage keeps
// per parameter (by framework, ZeRO/FSDP stage, optimizer, offload and precision recipe), the
// activations of the micro-batches in flight under the recompute mode the time model also
// assumes, the logits and loss, communication buffers, the backward's working set, and the
// caching allocator's share fitted to measured peaks (calib/memory.json).

// Frameworks: how a training framework stores a step's state.
const (
	// Megatron is Megatron-Core/NeMo: bf16 weights, fp32 main gradients (Megatron forces
	// gradient accumulation in fp32 with bf16), fp32 master weights in the (distributed)
	// optimizer: 18 B per parameter, 6 + 12/d with the distributed optimizer
	// (megatron/training/theoretical_memory_usage.py). Fused vocab-parallel cross entropy.
	Megatron = "megatron"
	// FSDP is PyTorch FSDP2 as torchtitan runs it: each rank keeps its shard of fp32 parameters
	// (they are the master copy), fp32 gradients and Adam state, 16 B per parameter over the
	// shard group; bf16 parameters are gathered a layer at a time. Eager loss in fp32.
	FSDP = "fsdp"
	// DeepSpeed is ZeRO as its paper counts it: fp16 weights and gradients, 12 B of Adam state
	// (fp32 master, m, v), with reduce and all-gather buckets.
	DeepSpeed = "deepspeed"
)

// Frameworks lists the framework names a layout accepts.
var Frameworks = []string{Megatron, FSDP, DeepSpeed}

// Optimizer is an optimizer's per-parameter state and update work.
type Optimizer struct {
	Name string
	// StateBytes: the optimizer's moments per trainable parameter (fp32 master weights apart).
	StateBytes float64
	// FLOPs per parameter of one update.
	FLOPs float64
	// Factored states (Adafactor) keep a row and a column vector per matrix, not per element.
	Factored bool
}

// Optimizers are the optimizers a layout may name.
var Optimizers = map[string]Optimizer{
	// AdamW with fp32 moments m and v.
	"adamw": {Name: "adamw", StateBytes: 8, FLOPs: analyzer.AdamFlopsPerParam},
	// AdamW with bf16 moments (DeepSeek-V3's pre-training keeps m and v in BF16).
	"adamw-bf16": {Name: "adamw-bf16", StateBytes: 4, FLOPs: analyzer.AdamFlopsPerParam},
	// 8-bit Adam (Dettmers et al. 2022): m and v in int8 with an fp32 scale per block of 2048.
	"adam8bit": {Name: "adam8bit", StateBytes: 2 * (1 + 4.0/2048), FLOPs: analyzer.AdamFlopsPerParam + 8},
	// Adafactor (Shazeer and Stern 2018) without momentum: a factored second moment, a row
	// and a column vector in fp32 per matrix.
	"adafactor": {Name: "adafactor", Factored: true, FLOPs: 10},
	// SGD with momentum: one fp32 buffer.
	"sgd": {Name: "sgd", StateBytes: 4, FLOPs: 3},
}

// Host-side constants of offloading. Stated, not fitted: no measured offload run is in the
// calibration set.
const (
	// HostAdamBytesPerParam is what a CPU Adam update moves through host memory per parameter:
	// fp32 master, m and v read and written, the 16-bit gradient read and weight written.
	HostAdamBytesPerParam = 3*4*2 + 2 + 2
	// HostMemGBpsPerGPU is the host DRAM bandwidth one GPU's CPU update gets: a two-socket
	// host of 8 GPUs with ~400 GB/s of DDR5 over its 8 GPUs.
	HostMemGBpsPerGPU = 50
)

// Runtime memory outside PyTorch's allocator, stated with its source, not fitted: the CUDA
// context with its kernel images, cuBLAS/cuBLASLt workspaces and NCCL's communicator buffers.
// PyTorch's documentation counts the context outside torch.cuda.memory_reserved; measured
// contexts are 0.5-1 GiB on Hopper with CUDA 12, and NCCL's default 4 MiB buffers per channel
// and peer add a few hundred MiB per communicator.
const RuntimeBytes = 1.5 * (1 << 30)

// AllocatorShare is the caching allocator's reserve beyond what the step allocates, as a share
// of the memory allocated and freed within a step (activations, logits, buffers, the working
// set): fragmentation and cached blocks, what torch.cuda.max_memory_reserved reads above
// max_memory_allocated. Fitted to torchtitan's measured peaks (calib/memory.json, fit by
// calib.FitMemory; a test re-fits and checks this figure).
const AllocatorShare = 0.22

// MemoryUncertainty is the memory model's measured relative error on the torchtitan peaks,
// leave-one-row-out (calib.FitMemory; a test re-derives it): within it a verdict is "tight".
const MemoryUncertainty = 0.12

func (l Layout) framework() string {
	if l.Framework == "" {
		return Megatron
	}
	return l.Framework
}

func (l Layout) optimizer() Optimizer {
	if o, ok := Optimizers[l.Optimizer]; ok {
		return o
	}
	return Optimizers["adamw"]
}

// Recipes are the low-precision training recipes (Transformer Engine's names in brackets):
// fp8 and fp8-ds delayed scaling (DelayedScaling: the amax from history, the cast fused into the
// producer), fp8-cs current scaling (Float8CurrentScaling: an amax pass over each tensor before
// its cast; torchao's Float8 linears scale the same way), fp8-blockwise (DeepSeek-V3's 1x128
// activation and 128x128 weight blocks), mxfp8 (MXFP8BlockScaling: E8M0 scales per 32 elements,
// Blackwell) and nvfp4 (NVFP4BlockScaling: E2M1 with E4M3 scales per 16 and a random Hadamard
// transform on the weight-gradient inputs, Blackwell).
var Recipes = []string{"bf16", "fp8", "fp8-ds", "fp8-cs", "fp8-blockwise", "mxfp8", "nvfp4"}

// precision is the recipe's memory class: bf16, fp8 (per-tensor or per-block scaled FP8 with
// its transposed copy), mxfp8 or nvfp4.
func (l Layout) precision() string {
	switch l.Precision {
	case "", "bf16":
		return "bf16"
	case "fp8", "fp8-ds", "fp8-cs", "fp8-blockwise":
		return "fp8"
	}
	return l.Precision
}

// CastBytes is what the recipe moves per quantized activation element (analyzer.Scenario's
// CastBytes): the copy it writes, the amax read of current scaling, the second (column-wise)
// copy and scales of block-scaled recipes, NVFP4's Hadamard pass.
func CastBytes(recipe string) float64 {
	switch recipe {
	case "fp8-cs":
		return 1 + 2 // amax: read the 16-bit input once more; then write the FP8 copy
	case "fp8-blockwise":
		return 2 * (1 + 4.0/128) // row- and column-wise FP8 with an fp32 scale per 128
	case "mxfp8":
		return 2 * (1 + 1.0/32) // row- and column-wise MXFP8 with an E8M0 scale per 32
	case "nvfp4":
		return 2*(0.5+1.0/16) + 2 // two NVFP4 copies with E4M3 scales per 16, the Hadamard read
	}
	return 0
}

// torchao's Float8Linear (tensorwise current scaling: the recipe torchtitan's float8 converter
// applies) saves its 16-bit input and weight for the backward and casts both again there
// (torchao/float8/float8_linear.py, matmul_with_hp_or_float8_args, torchao 0.18): each
// micro-batch pays an amax and a cast of every linear's input in the forward, again
// transposed in the backward, two casts of its output gradient (one per backward GEMM), and
// two amaxes and casts of every weight. Fitted on a lent H100 (torch 2.11, torchao 0.18;
// calib/fp8_layers_h100.json, calib/sources/fp8_training_layers.py): a decoder layer's GPU
// time beside its GEMMs and attention, FP8 less BF16, at 4k-32k tokens per micro-batch, three
// layer shapes, least squares over the 12 compiled points (each within 30%, go test ./layout
// -run TorchAO), in bytes at the timing model's HBM rate (0.8 of the H100's 3.35 TB/s).
// Compiled (torch.compile, static shapes, as torchtitan compiles each block): 2.0 ps per
// element of each linear's input and output gradient, 2.6 ps per weight element. Eager: 32.8
// ps and 50.6 ps (two points, the 13B layer at 4k and 32k tokens; they predict the 8B and 70B
// layers' eager casts within 12%, go test ./layout -run TorchAOEager): each cast is an abs, a max,
// an fp32 scale, a clamp and a copy of its own, so FP8 layers run 1.7-3.8x slower than BF16 there.
const (
	TorchAOCastBytes            = 5.36
	TorchAOWeightCastBytes      = 7.06
	TorchAOEagerCastBytes       = 87.9
	TorchAOEagerWeightCastBytes = 135.7
)

// castBytes is what the layout's recipe moves per quantized activation element and per weight
// element in every micro-batch (analyzer.Scenario's CastBytes and CastWeightBytes; a weight
// figure of 0 is Transformer Engine's cast, once per optimizer step and cached). FSDP's FP8
// is torchao's, as torchtitan runs it.
func (l Layout) castBytes() (act, weights float64) {
	if l.framework() == FSDP && l.Precision == "fp8-cs" {
		if l.Compile {
			return TorchAOCastBytes, TorchAOWeightCastBytes
		}
		return TorchAOEagerCastBytes, TorchAOEagerWeightCastBytes
	}
	return CastBytes(l.Precision), 0
}

// CastNote says how the layout's recipe casts, for a step whose casts weigh: what it pays and
// what would pay less.
func (l Layout) CastNote() string {
	if l.framework() == FSDP && l.Precision == "fp8-cs" {
		if !l.Compile {
			return fmt.Sprintf("torchao's Float8Linear casts every linear's input, output gradient and weight in every micro-batch, each cast five eager kernels (abs, max, scale, clamp, copy); --compile fuses them (%.0fx less per activation, %.0fx per weight)",
				TorchAOEagerCastBytes/TorchAOCastBytes, TorchAOEagerWeightCastBytes/TorchAOWeightCastBytes)
		}
		return "torchao's Float8Linear casts every linear's input, output gradient and weight in every micro-batch, the weights twice; a larger micro-batch spreads the weights' casts over more tokens"
	}
	return "the recipe quantizes each linear's input and output gradient beside its GEMMs and casts the weights once per optimizer step"
}

// FP8AttentionUnmeasured says the layout asks for FP8 attention on a chip without cuDNN's
// measured FP8 attention figure for its recipe (chips.Efficiency.TrainAttnFrac), which timing
// then runs at the 16-bit rate (its quantize passes still counted): no gain is claimed that no
// kernel measured.
func (l Layout) FP8AttentionUnmeasured(e chips.Efficiency) bool {
	if !l.FP8Attention {
		return false
	}
	key := "fp8"
	if l.Precision == "mxfp8" {
		key = "mxfp8"
	}
	return e.TrainAttnFrac[key] <= 0 || e.TrainAttnFrac[key+"_bwd"] <= 0 || e.TrainAttnFrac["bf16"] <= 0 || e.TrainAttnFrac["bf16_bwd"] <= 0
}

// ShardGroup is how many ranks shard the model states: data parallel times context parallel
// (Megatron's distributed optimizer and torchtitan's FSDP both shard over DP x CP), within one
// HSDP replica group.
func (l Layout) ShardGroup() float64 { return float64(l.DP*l.CP) / float64(max(l.Replicas, 1)) }

// ExpertShardGroup is how many ranks shard the routed experts' states: the expert data-parallel
// group, the ranks holding the same experts, world / (ETP x EP x PP) = DP x CP x TP / (EP x ETP)
// (Megatron's expert_data_parallel_size, which its distributed optimizer shards the experts'
// main weights and moments over: theoretical_memory_usage.py; torchtitan's FSDP of the experts
// over dp_shard x cp / ep likewise). With EP = DP x CP x TP / ETP nothing is left to shard over.
func (l Layout) ExpertShardGroup() float64 {
	return math.Max(1, l.ShardGroup()*float64(l.TP)/float64(max(l.EP, 1)*l.etp()))
}

// stageParams are one GPU's parameters on a pipeline stage, split by what training keeps.
type stageParams struct {
	analyzer.ParamSplit
	linear float64 // of them, in GEMMs (FP8 weight caches are per linear weight)
	layer  float64 // of one decoder layer, on this GPU (for gather buffers)
	// experts is the trainable routed-expert part of Trainable: its optimizer state shards
	// over the expert data-parallel group (ExpertShardGroup), not the data-parallel one
	experts float64
	// expertLinear is the routed experts' part of linear: no FP8 copies under the legacy
	// GroupedMLP's 16-bit experts (Layout.LegacyExperts16)
	expertLinear float64
}

// paramsOnStage is the first (first=true) or last pipeline stage's share on one GPU: the
// decoder layers of the stage, the embedding on the first and the LM head on the last (a tied
// embedding is a copy on both ends when they differ).
func paramsOnStage(m *analyzer.Model, l Layout, first bool) stageParams {
	return paramsAt(m, l, posOf(first))
}

// stagePos is which pipeline rank a memory count is for: the first stage's, the last's, or (for
// DualPipe, whose middle ranks hold two middle stages and as many micro-batches in flight as its
// end ranks) a middle one's.
type stagePos int

const (
	posFirst stagePos = iota
	posLast
	posMid
)

func posOf(first bool) stagePos {
	if first {
		return posFirst
	}
	return posLast
}

func (p stagePos) String() string { return [...]string{"first", "last", "middle"}[p] }

// stageSize is the decoder layers of one stage at pos (StageCounts).
func (l Layout) stageSize(layers int64, pos stagePos) int64 {
	f, mid, la := l.StageCounts(layers)
	switch {
	case l.PP == 1:
		return layers
	case pos == posFirst:
		return f
	case pos == posMid:
		return mid
	}
	return la
}

// paramsAt is paramsOnStage for any rank position.
func paramsAt(m *analyzer.Model, l Layout, pos stagePos) stageParams {
	fp := m.Fingerprint
	L := max(fp.Layers, 1)
	n := l.stageSize(L, pos)
	frac := float64(n) / float64(L)
	if l.A2AOverlap == OverlapDualPipe {
		frac *= 2 // DualPipe: every rank holds a stage from each end of the pipeline
	}
	var sp stageParams
	if len(m.Ops) == 0 { // a bare count (no module tree): everything trainable, split evenly
		sp.Trainable = m.ParamsPerGPU(l.TP, l.PP, l.EP, l.ETP)
		sp.linear = sp.Trainable
		sp.layer = sp.Trainable / float64(L)
		return sp
	}
	// DualPipe puts stage i and stage PP-1-i on each rank: the end ranks hold the embedding and
	// the LM head (and the MTP modules) together
	ends := l.PP == 1 || (l.A2AOverlap == OverlapDualPipe && pos != posMid)
	last := pos == posLast || ends
	first := pos == posFirst || ends
	sum := summarize(m)
	add := func(g paramGroup, scale float64) {
		for e, div := range [3]float64{float64(l.TP), float64(l.EP * l.etp()), 1} {
			c := g[e]
			sp.Trainable += c.trainable / div * scale
			if e == 1 {
				sp.experts += c.trainable / div * scale
				sp.expertLinear += c.linear / div * scale
			}
			sp.Frozen += c.frozen / div * scale
			sp.Quantized += c.quantized / div * scale
			sp.FrozenQuantBytes += c.quantBytes / div * scale
			sp.linear += c.linear / div * scale
		}
	}
	if g, n, _, ok := sum.stageShare(l, L, pos); ok {
		// the stage's own layers, scaled to the count StageCounts gives it; what no layer index
		// claims spreads evenly
		add(sum.unindexed, frac)
		add(g, frac*float64(L)/float64(n))
	} else {
		add(sum.layers, frac)
	}
	layer := sp
	sp.layer = (layer.Trainable + layer.Frozen + layer.Quantized) / math.Max(frac*float64(L), 1)
	if first {
		add(sum.embedding, 1)
	}
	if last {
		head, tied := sum.head, sum.tiedHead
		if !l.FP8OutputProj {
			// the LM head trains in 16-bit under every recipe but Megatron's fp8_output_proj
			// (analyzer.Scenario.LowPrecisionLMHead): it keeps no low-precision copy
			for e := range head {
				head[e].linear, tied[e].linear = 0, 0
			}
		}
		add(head, 1)
		add(sum.final, 1)
		if l.PP > 1 {
			add(tied, 1) // a tied LM head is a copy on the last stage
		}
		if l.MTP > 0 {
			// each multi-token-prediction module on the last stage: a copy of the last decoder
			// layer, the projection of the concatenated embedding and hidden state (2h x h) and
			// its two input norms and final norm; it shares the embedding and LM head
			h := float64(m.Fingerprint.Hidden)
			mtp := sum.lastLayer
			mtp[0].trainable += 2 * h * h
			mtp[0].linear += 2 * h * h
			mtp[2].trainable += 3 * h
			add(mtp, float64(l.MTP))
		}
	}
	return sp
}

// paramCount is a group's parameters by what training keeps for them.
type paramCount struct{ trainable, frozen, quantized, quantBytes, linear float64 }

func (c *paramCount) sub(o paramCount) {
	c.add(paramCount{-o.trainable, -o.frozen, -o.quantized, -o.quantBytes, -o.linear})
}

func (c *paramCount) add(o paramCount) {
	c.trainable += o.trainable
	c.frozen += o.frozen
	c.quantized += o.quantized
	c.quantBytes += o.quantBytes
	c.linear += o.linear
}

// paramGroup is a group's counts split by how they divide over GPUs: [0] by TP, [1] routed
// experts by EP x ETP, [2] replicated on every TP rank (norms and the router: Megatron keeps them
// whole on each rank, its theoretical_memory_usage.py counts them so).
type paramGroup [3]paramCount

type paramSummary struct {
	layers, embedding, head, tiedHead, final paramGroup
	// lastLayer is the last decoder layer's parameters: what each of DeepSeek-V3's multi-token
	// prediction modules repeats (Megatron's MTP layer is a copy of it)
	lastLayer paramGroup
	// perLayer is each decoder layer's parameters (the ops with a layer index; unindexed, what
	// no layer index claims, spreads evenly) and moe whether it routes to experts: a pipeline
	// stage holds the layers it holds, so DeepSeek-V3's first stage carries its three dense
	// layers and none of their experts. prefix and moePrefix are their running sums (a stage's
	// share is a few differences), uniform says every layer is alike (its share is its count's)
	perLayer  []paramGroup
	moe       []bool
	prefix    []paramGroup
	moePrefix []int64
	unindexed paramGroup
	uniform   bool
	grads     gradNeeds
}

// stageShare is the decoder-layer parameters and the MoE layers of the layers at pos, false
// when the model's layers are all alike (or unknown), so a stage's share is its layer count's.
func (s paramSummary) stageShare(l Layout, layers int64, pos stagePos) (g paramGroup, n, moe int64, ok bool) {
	if s.uniform || len(s.prefix) != int(layers)+1 {
		return g, 0, 0, false
	}
	l.eachStageRange(layers, pos, func(a, b int64) {
		for e := range g {
			g[e].add(s.prefix[b][e])
			g[e].sub(s.prefix[a][e])
		}
		n += b - a
		moe += s.moePrefix[b] - s.moePrefix[a]
	})
	return g, n, moe, n > 0
}

// gradNeeds is which saved tensors a fine-tune's backward still needs, as shares of the decoder
// layers. Autograd saves a linear layer's input only for its weight gradient (PyTorch saves a
// matmul operand only when the other one requires grad; Transformer Engine's linear saves its
// input only when the weight does), so a frozen layer without an adapter keeps only what the
// input gradient needs; layers below the first trainable parameter run no backward at all.
type gradNeeds struct {
	backward float64 // layers that run a backward (all of them when the embedding trains)
	// layers whose attention-input (q, k, v), attention-output, MLP-input and MLP-output (down)
	// projections need their input saved: trainable, or an adapter beside a frozen base
	attnIn, attnOut, mlpIn, mlpOut float64
	// per token per layer, averaged over the layers: the adapters' rank-r intermediates (their
	// B's input) and, with dropout, each adapter's dropped-out input and mask (3 bytes a value)
	adapterRanks, dropoutIn float64
}

func fullGrads() gradNeeds { return gradNeeds{backward: 1, attnIn: 1, attnOut: 1, mlpIn: 1, mlpOut: 1} }

var summaries sync.Map // *analyzer.Model -> paramSummary: a model is not changed once built

// summarize counts a model's parameters once by stage group, so a layout search sizes memory
// in a few multiplications instead of a walk over every op.
func summarize(m *analyzer.Model) paramSummary {
	if v, ok := summaries.Load(m); ok {
		return v.(paramSummary)
	}
	var s paramSummary
	for _, op := range m.Ops {
		n := float64(op.Numel)
		if op.Kind == analyzer.OpElementwise {
			n = float64(op.WeightElems)
		}
		var g *paramGroup
		switch {
		case op.Category == analyzer.CatEmbedding:
			if op.Tied {
				continue
			}
			g = &s.embedding
		case op.Category == analyzer.CatLMHead && op.Tied:
			g = &s.tiedHead
		case op.Category == analyzer.CatLMHead:
			g = &s.head
		case op.Tied:
			continue
		case op.Layer < 0 && op.Category == analyzer.CatNorm:
			g = &s.final // the final norm sits with the LM head
		default:
			g = &s.layers
		}
		e := 0
		switch op.Category {
		case analyzer.CatRoutedExperts:
			e = 1
		case analyzer.CatNorm, analyzer.CatRouter:
			e = 2
		}
		c := &g[e]
		if g == &s.layers && op.Layer >= 0 && int64(op.Layer) < m.Fingerprint.Layers {
			if s.perLayer == nil {
				s.perLayer, s.moe = make([]paramGroup, m.Fingerprint.Layers), make([]bool, m.Fingerprint.Layers)
			}
			c = &s.perLayer[op.Layer][e]
			if op.Category == analyzer.CatRoutedExperts {
				s.moe[op.Layer] = true
			}
		}
		if g == &s.layers && int64(op.Layer) == m.Fingerprint.Layers-1 && !op.Frozen {
			s.lastLayer[e].trainable += n
			if op.Kind == analyzer.OpGEMM || op.Kind == analyzer.OpExperts {
				s.lastLayer[e].linear += n
			}
		}
		if (op.Kind == analyzer.OpGEMM || op.Kind == analyzer.OpExperts) && op.QuantBytes == 0 {
			c.linear += n // a quantized base keeps no 16-bit copy (and no FP8 cache of one)
		}
		switch {
		case !op.Frozen:
			c.trainable += n
		case op.QuantBytes > 0:
			c.quantized += n
			c.quantBytes += n * op.QuantBytes
		default:
			c.frozen += n
		}
	}
	s.unindexed = s.layers
	if n := len(s.perLayer); n > 0 {
		s.prefix, s.moePrefix = make([]paramGroup, n+1), make([]int64, n+1)
		s.uniform = true
		for i, g := range s.perLayer { // layers stays the sum over every decoder layer
			s.prefix[i+1], s.moePrefix[i+1] = s.prefix[i], s.moePrefix[i]+boolInt(s.moe[i])
			for e := range g {
				s.layers[e].add(g[e])
				s.prefix[i+1][e].add(g[e])
			}
			s.uniform = s.uniform && g == s.perLayer[0] && s.moe[i] == s.moe[0]
		}
	}
	s.grads = backwardNeeds(m)
	summaries.Store(m, s)
	return s
}

// backwardNeeds works out gradNeeds from the model's ops. A projection reads the layer's
// hidden state when its input is the model width (q, k, v, gate, up), writes it when its output
// is (o, down); the share counts the layers where any projection of the group needs its input.
func backwardNeeds(m *analyzer.Model) gradNeeds {
	L := max(m.Fingerprint.Layers, 1)
	if m.FineTune == nil && !anyFrozen(m) {
		return fullGrads()
	}
	type layerNeed struct{ any, attnIn, attnOut, mlpIn, mlpOut bool }
	nl := int(L)
	need := make([]layerNeed, nl)
	first := nl // the first layer with a trainable parameter or an adapter
	var ranks, dropout float64
	for _, op := range m.Ops {
		trains := !op.Frozen || op.Adapter > 0
		if op.Category == analyzer.CatEmbedding && !op.Frozen && !op.Tied {
			first = 0
		}
		if op.Layer < 0 || op.Layer >= nl || !trains || op.Name == "lora_A" || op.Name == "lora_B" {
			continue
		}
		n := &need[op.Layer]
		n.any = true
		first = min(first, op.Layer)
		if op.Adapter > 0 {
			ranks += 2 * float64(op.Adapter)
			if op.AdapterDropout > 0 {
				dropout += 3 * float64(op.In)
			}
		}
		if op.Kind != analyzer.OpGEMM {
			continue
		}
		in := !op.OutputProjection()
		switch op.Category {
		case analyzer.CatAttention:
			n.attnIn = n.attnIn || in
			n.attnOut = n.attnOut || !in
		case analyzer.CatDenseFFN, analyzer.CatSharedExperts:
			n.mlpIn = n.mlpIn || in
			n.mlpOut = n.mlpOut || !in
		}
	}
	g := gradNeeds{backward: float64(nl-first) / float64(L)}
	if first >= nl {
		return g // nothing below the LM head trains: no layer runs a backward
	}
	// the shares are of the layers that run a backward (activations scale by backward too)
	per := 1 / float64(nl-first)
	g.adapterRanks, g.dropoutIn = ranks*per, dropout*per
	for _, n := range need[first:] {
		for _, x := range []struct {
			on  bool
			sum *float64
		}{{n.attnIn, &g.attnIn}, {n.attnOut, &g.attnOut}, {n.mlpIn, &g.mlpIn}, {n.mlpOut, &g.mlpOut}} {
			if x.on {
				*x.sum += per
			}
		}
	}
	return g
}

func anyFrozen(m *analyzer.Model) bool {
	for _, op := range m.Ops {
		if op.Frozen {
			return true
		}
	}
	return false
}

// TrainingMemory is one GPU's resident bytes on a training layout, the fuller of the first
// pipeline stage (the most micro-batches in flight, the embedding) and the last (the LM head,
// the logits and the loss). Every term is visible in the result; Stage says which stage it is.
func TrainingMemory(m *analyzer.Model, l Layout) Memory {
	a := stageMemory(m, l, true)
	if l.PP == 1 {
		return a
	}
	if b := stageMemory(m, l, false); b.Total > a.Total {
		a = b
	}
	if l.A2AOverlap == OverlapDualPipe && l.PP > 2 {
		// a DualPipe middle rank holds two middle stages and PP + 1 micro-batches of them too
		// (dualpipe.py step(): every rank's two chunks), without the embedding and LM head
		if c := stageMemoryAt(m, l, posMid); c.Total > a.Total {
			a = c
		}
	}
	return a
}

func stageMemory(m *analyzer.Model, l Layout, first bool) Memory {
	return stageMemoryAt(m, l, posOf(first))
}

func stageMemoryAt(m *analyzer.Model, l Layout, pos stagePos) Memory {
	fw, opt, prec := l.framework(), l.optimizer(), l.precision()
	sp := paramsAt(m, l, pos)
	mem := Memory{Stage: pos.String()}
	if l.PP == 1 {
		mem.Stage = "only"
	}
	shard := l.ShardGroup()
	stage := l.Stage()
	if fw == FSDP && stage < 2 {
		stage = 2 // FSDP shards at least gradients and optimizer state (SHARD_GRAD_OP)
	}
	// Bytes per trainable parameter: the compute copy, its gradient and the fp32 master copy.
	var wBytes, gBytes, masterBytes float64
	stateScale := 1.0 // the optimizer's moments at their fp32 size
	switch {
	case l.ParamDType == "bf16":
		// pure bf16: the optimizer's moments are allocated like the parameters (torch.optim's
		// zeros_like), so they are bf16 too; there is no master copy
		wBytes, gBytes, masterBytes, stateScale = 2, 2, 0, 0.5
	case l.ParamDType == "fp32":
		wBytes, gBytes, masterBytes = 4, 4, 0 // the fp32 parameter is its own master copy
	case fw == DeepSpeed:
		wBytes, gBytes, masterBytes = 2, 2, 4
	default:
		wBytes, gBytes, masterBytes = 2, 4, 4
		if l.BF16Grads {
			gBytes = 2
		}
	}
	// Frozen weights keep the checkpoint's 16 bits, or fp32 where a quantized base's
	// preparation upcasts everything it left unquantized (prepare_model_for_kbit_training).
	frozenBytes := 2.0
	if l.UpcastUnquantized && sp.Quantized > 0 {
		frozenBytes = 4
	}
	// the routed experts' share of each state shards over the expert data-parallel group
	eshard := l.ExpertShardGroup()
	byGroup := func(total float64) float64 {
		if sp.Trainable <= 0 {
			return total / shard
		}
		e := sp.experts / sp.Trainable
		return total * ((1-e)/shard + e/eshard)
	}
	frozenShard := 1.0 // a frozen base is sharded like any parameter under ZeRO-3/FSDP
	if stage == 3 {
		frozenShard = shard
	}
	// Weights: the compute copy, and FP8 recipes' cached low-precision copies of the linear
	// weights (Transformer Engine keeps an FP8 weight and its transpose between micro-batches;
	// MXFP8 keeps row- and column-wise copies with a scale per 32 elements).
	mem.Weights = wBytes*sp.Trainable + (frozenBytes*sp.Frozen+sp.FrozenQuantBytes)/frozenShard
	switch {
	case fw == FSDP && stage == 3 && masterBytes > 0:
		// FSDP2 keeps no 16-bit copy: a trainable weight is its fp32 shard (the master weights
		// below)
		mem.Weights -= wBytes * sp.Trainable
	case stage == 3:
		mem.Weights -= wBytes*sp.Trainable - byGroup(wBytes*sp.Trainable)
	}
	if fw != FSDP {
		// the low-precision copies: sharded with the weights under ZeRO-3 (Megatron FSDP gathers
		// them per layer); with --fp8-param-gather the FP8 copy is the parameter itself, so the
		// 16-bit copy of the linear weights is not kept
		cache := 0.0
		switch prec {
		case "fp8":
			cache = 2
		case "mxfp8":
			cache = 2 * (1 + 1.0/32)
		case "nvfp4":
			cache = 2 * (0.5 + 1.0/16)
		}
		linear := sp.linear
		if l.LegacyExperts16() {
			linear -= sp.expertLinear // the 16-bit experts keep no FP8 copy (LegacyExperts16)
		}
		if cache > 0 && l.FP8ParamGather {
			mem.Weights -= wBytes * linear * trainableShare(sp)
		}
		if stage == 3 {
			cache /= shard
		}
		mem.Weights += cache * linear
	}
	// Gradients of trainable parameters; master weights and optimizer moments.
	mem.Gradients = gBytes * sp.Trainable
	mem.MasterWeights = masterBytes * sp.Trainable
	if opt.Factored {
		mem.Optimizer = factoredState(m, l) * stateScale
	} else {
		mem.Optimizer = opt.StateBytes * sp.Trainable
		if opt.Name == "adamw" || opt.Name == "sgd" { // fp32 moments become the parameters' dtype
			mem.Optimizer *= stateScale
		}
	}
	if stage >= 1 {
		mem.MasterWeights = byGroup(mem.MasterWeights)
		if opt.Factored { // factored state is counted for the model whole, not per parameter
			mem.Optimizer /= shard
		} else {
			mem.Optimizer = byGroup(mem.Optimizer)
		}
	}
	if stage >= 2 {
		mem.Gradients = byGroup(mem.Gradients)
	}
	if l.OffloadOptimizer { // ZeRO-Offload: master weights and moments live and update in host memory
		mem.Host += mem.MasterWeights + mem.Optimizer
		mem.MasterWeights, mem.Optimizer = 0, 0
	}
	if l.OffloadParams { // ZeRO-Infinity: the weight shards stream in from host memory
		mem.Host += mem.Weights
		mem.Weights = 0
		if fw == FSDP { // FSDP2's CPUOffloadPolicy: the fp32 shards, their gradients and the optimizer step live on the host
			mem.Host += mem.MasterWeights + mem.Gradients + mem.Optimizer
			mem.MasterWeights, mem.Gradients, mem.Optimizer = 0, 0, 0
		}
	}
	// Communication buffers.
	switch {
	case fw == FSDP && shard <= 1 && !l.OffloadParams:
		// one GPU: nothing is gathered or reduced
	case fw == FSDP && stage == 3:
		// bf16 (fp8 with float8 all-gather) parameters of the layer computing and the one
		// prefetched, and one layer's unsharded fp32 gradients for the reduce-scatter
		gather := 2.0
		if prec != "bf16" {
			gather = 1
		}
		mem.CommBuffers = sp.layer * (2*gather + 4)
		if l.keepGathered() {
			// torchtitan does not reshard after the forward with pipelining (no all-gather per
			// micro-batch): the stage stays gathered; and the pipeline schedule syncs gradients
			// on the last micro-batch only, so FSDP2 accumulates the stage's unsharded
			// gradients in its reduce dtype (fp32) until then
			mem.CommBuffers = (sp.Trainable+sp.Frozen)*gather + sp.Trainable*4
		}
	case fw == DeepSpeed && stage >= 1 && shard > 1:
		// DeepSpeed's gradient reduce bucket and the parameter all-gather bucket, 5e8 elements
		// each by default, of the trainable parameters; ZeRO-3 gathers a layer at a time
		mem.CommBuffers = 2 * math.Min(5e8, sp.Trainable) * wBytes
		if stage == 3 {
			mem.CommBuffers = math.Min(5e8, sp.Trainable)*gBytes + sp.layer*2*2
		}
	case stage == 3 || l.OffloadParams:
		mem.CommBuffers = sp.layer * 2 * wBytes
	case stage == 0 && l.DP > 1 && fw != Megatron:
		// PyTorch DDP copies the gradients into its all-reduce buckets (gradient_as_bucket_view
		// is off by default): a second copy of the trainable gradients
		mem.CommBuffers = gBytes * sp.Trainable
	}
	if l.OffloadParams && mem.CommBuffers == 0 {
		mem.CommBuffers = sp.layer * 2 * wBytes
	}
	// Activations of the micro-batches in flight, the logits and loss, the working set.
	act := activationsAt(m, l, pos)
	mem.Activations, mem.MoEBuffers, mem.Transient, mem.Logits = act.saved, act.moe, act.transient, act.logits
	mem.Host += act.offloaded
	static := mem.Weights + mem.MasterWeights + mem.Gradients + mem.Optimizer
	dynamic := mem.Activations + mem.MoEBuffers + mem.Transient + mem.Logits + mem.CommBuffers
	mem.Allocator = AllocatorShare * dynamic
	mem.Runtime = RuntimeBytes
	mem.Total = static + dynamic + mem.Allocator + mem.Runtime
	return mem
}

// factoredState is Adafactor's state: a row and a column vector in fp32 per weight matrix of
// this GPU's share, and a full fp32 second moment for vectors (norm scales, biases).
func factoredState(m *analyzer.Model, l Layout) float64 {
	var b float64
	for _, op := range m.Ops {
		if op.Frozen || op.Tied {
			continue
		}
		switch op.Kind {
		case analyzer.OpGEMM, analyzer.OpExperts:
			b += 4 * float64(op.In+op.Out) * float64(max(op.Experts, 1))
		case analyzer.OpEmbedding:
			b += 4 * float64(op.Rows+op.Width)
		default:
			b += 4 * float64(op.WeightElems)
		}
	}
	return b / float64(l.TP*l.PP)
}

type activations struct {
	saved, moe, transient, logits, offloaded float64
}

// perToken is one decoder layer's saved activations per token of this GPU, in bytes: sp the
// part split by sequence parallel (norm inputs and outputs), tp the part split by tensor
// parallel (inside attention and the MLP), moe the routed experts' token copies.
type perToken struct{ sp, tp, moe float64 }

// layerActivations is what one decoder layer keeps for the backward, per token, under a
// recompute mode, by component (Korthikanti et al. 2022 without dropout masks, with flash
// attention keeping q, k, v, its output and the log-sum-exp):
//
//	norm inputs          2h + 2h             kept unless full recompute
//	norm outputs         2 x lin·h           the QKV and MLP-in linear inputs (layernorm: dropped)
//	q, k, v              2(q + k + v)        flash attention's inputs (op: every other matmul output)
//	attention output     2·qo + 4·heads      flash's output and lse (with FP8 also lin·qo for O-proj)
//	MLP                  2·w·f + lin·f       the activation's input (gate and up) and output
//	eager activation     2f                  eager PyTorch SwiGLU also keeps silu(gate)
//
// lin is the linear inputs' saved bytes: 1 with Transformer Engine FP8, 2 otherwise.
func layerActivations(fp analyzer.Fingerprint, l Layout, rc analyzer.Recompute, moeLayer bool, g gradNeeds) perToken {
	h := float64(fp.Hidden)
	if fp.Heads == 0 { // no attention shape known: Korthikanti's 34·h per token (flash, SP)
		return perToken{sp: 34 * h}
	}
	fw, prec := l.framework(), l.precision()
	lin := 2.0
	if fw == Megatron {
		switch prec {
		case "fp8":
			lin = 1
		case "mxfp8":
			lin = 1 + 1.0/32
		case "nvfp4":
			lin = 0.5 + 1.0/16
		}
	}
	q := float64(fp.Heads * fp.HeadDim)
	k := float64(max(fp.KVHeads, 1) * fp.HeadDim)
	v, qo := k, q
	var latents float64
	if fp.MLA != nil { // K and V are per head after the up-projections; the latents are kept too
		k = q
		v = float64(fp.Heads * max(fp.VHeadDim, fp.HeadDim))
		qo = v
		latents = 2 * float64(fp.MLA.QLoraRank+fp.MLA.KVLoraRank+fp.MLA.QKRope)
	}
	f, width := float64(fp.Intermediate), 1.0
	if fp.GatedMLP {
		width = 2
	}
	// the activation's saved input, the FC1 output: 16-bit, or an e4m3 cast under Megatron's
	// activation_func_fp8_input_store (Layout.ActFP8InputStore); a recomputed activation keeps
	// its 16-bit input in the checkpoint instead, and the fused grouped MLP's epilogue saves
	// its own (it does not read the flag)
	glu, gluExperts := 2.0, 2.0
	if l.ActFP8InputStore && fw == Megatron && !rc.Modules["act"] && rc.Mode != "full" && rc.Mode != "op" {
		glu, gluExperts = 1, 1
		if l.FusedGroupedMLP {
			gluExperts = 2
		}
	}
	eager := 0.0
	unfused := fw == Megatron && l.NoSwiGLUFusion && fp.GatedMLP // Megatron's eager glu (Layout.NoSwiGLUFusion)
	if (fw != Megatron && !l.Compile || unfused) && fp.GatedMLP {
		eager = 2 * f
	}
	var t perToken
	// the norms' inputs (their backward needs them); eager RMSNorms that upcast keep an fp32
	// copy of each input instead (Hugging Face's, torchtune's and LitGPT's modules)
	normIn := 2*h + 2*h
	if l.fp32Norms() {
		normIn = 4*h + 4*h
	}
	// the norm outputs are the q/k/v and gate/up inputs: kept only for those weight gradients
	normOut := lin*h*g.attnIn + lin*h*g.mlpIn
	qkv := 2*(q+k+v) + latents
	attnOut := 2*qo + 4*float64(fp.Heads)
	if lin < 2 {
		attnOut += lin * qo * g.attnOut
	}
	mlp := glu*width*f + lin*f*g.mlpOut + eager
	act := lin*f + eager // what the activation recompute drops
	adapters := g.adapterRanks + g.dropoutIn
	var moe float64
	isMoE := moeLayer && fp.MoE != nil
	if isMoE {
		e := float64(max(fp.MoE.ExpertFFN, 1))
		topk := float64(max(fp.MoE.TopK, 1)) * MoEImbalance
		// each GPU's experts process, on balance, as many assignments as its own tokens make:
		// S/TP tokens per rank with sequence parallel and unsplit experts, or all S tokens
		// gathered over TP with experts split ETP = TP ways: tokens x top-k / TP either way
		mlp = topk * (gluExperts*width*e + lin*e)
		act = topk * lin * e
		if fp.MoE.SharedExperts > 0 {
			mlp += float64(fp.MoE.SharedExperts) * (glu*width*e + lin*e)
			act += float64(fp.MoE.SharedExperts) * lin * e
		}
		if unfused && !l.FusedGroupedMLP {
			// the eager glu keeps its silu output for the multiply's backward, and the routed
			// experts' router-weight multiply keeps the product (activation_func_with_probs),
			// 16-bit each; a shared expert keeps the silu output only
			kept := topk*2*2*e + float64(fp.MoE.SharedExperts)*2*e
			mlp += kept
			act += kept
		}
		// the permuted copy of the routed tokens: the dispatched input, which the first expert
		// GEMM saves in its input precision (FP8 under an FP8 recipe); the router's fp32 logits
		// and each assignment's fp32 weight. The experts' output is not kept: Megatron's
		// TEGroupedMLP scales the activation by the router weight (weighted SwiGLU) and the
		// combine unpermutes without probs, so its backward is a gather (moe/experts.py,
		// token_dispatcher.py unpermute calls @d98e8a6)
		moe = topk*lin*h + 4*float64(fp.MoE.RoutedExperts) + 4*topk
		if fw == Megatron && fp.GLUClamp > 0 && !l.FusedGroupedMLP {
			// a clamped GLU's eager clamp concatenates a clamped copy of the FC1 output, which
			// the fused activation saves (weighted_bias_quick_geglu_impl; the clamps keep views
			// of the output itself); recomputing the activation drops it with the rest
			clamped := topk * 2 * width * e
			mlp += clamped
			act += clamped
		}
		if fw != Megatron {
			// eager MoE blocks weight each expert's output after the expert (Hugging Face's
			// Mixtral and Qwen MoE: expert(x) * routing_weights), and that multiply keeps the
			// 16-bit output for its backward
			moe += topk * 2 * h
		}
	}
	switch rc.Mode {
	case "full":
		return perToken{sp: 2 * h} // the layer's input only
	case "op":
		// torchtitan keeps the layer input, every other matmul's output (wq, wv, w1, w2 of
		// the seven: 2q + 2v + 2f + 2h) and attention's output; the rest is re-run
		t.sp = 2*h + 2*h
		t.tp = 2*q + 2*v + 2*f + attnOut
		t.moe = moe
		return t
	}
	if rc.Modules["layernorm"] && lin == 2 {
		normOut = 0
	}
	if rc.Modules["mla_up_proj"] && fp.MLA != nil {
		qkv = latents // q, k and v are re-made from the latents in the backward
	}
	if rc.Modules["act"] {
		mlp -= act
	}
	if rc.Modules["mlp"] && !isMoE {
		mlp = 0 // a dense MLP keeps its input (the norm output, counted above); not an MoE layer's
	}
	t.sp = normIn + normOut
	t.tp = qkv + attnOut + mlp + adapters
	t.moe = moe
	return t
}

// MoEImbalance is the routed tokens' peak-to-mean load on an expert rank that memory is sized
// for: 1 (dropless routing with balanced load). Issue-20 work measures it per model.
const MoEImbalance = 1.0

// inFlight is how many micro-batches' activations the stage holds at its peak: one without
// pipelining; PP on the first stage of 1F1B (fewer when GA is smaller), one on the last; the
// interleaved schedule adds (PP-1)/(PP·VP) of a stage on the first (Narayanan et al. 2021,
// Megatron's theoretical memory).
func (l Layout) inFlight(first bool) float64 {
	if l.A2AOverlap == OverlapDualPipe && l.PP > 1 {
		return math.Min(float64(l.PP+1), math.Max(float64(l.GA()), 1)) // DeepSeek-V3 Table 2: PP + 1
	}
	if l.PP == 1 || !first {
		return 1
	}
	n := float64(l.PP)
	if l.VP > 1 {
		n *= 1 + float64(l.PP-1)/float64(l.PP*l.VP)
	}
	return math.Min(n, math.Max(float64(l.GA()), 1))
}

func activationBytes(m *analyzer.Model, l Layout, first bool) activations {
	return activationsAt(m, l, posOf(first))
}

func activationsAt(m *analyzer.Model, l Layout, pos stagePos) activations {
	first := pos != posLast
	fp := m.Fingerprint
	rc, err := analyzer.ParseRecompute(l.Recompute)
	if err != nil {
		rc, _ = analyzer.ParseRecompute("none")
	}
	tokens := float64(l.Seq/max(l.CP, 1)) * float64(l.MBS) // this GPU's tokens of one micro-batch
	tp := float64(l.TP)
	spDiv := tp
	if l.NoSP {
		spDiv = 1
	}
	L := max(fp.Layers, 1)
	stageLayers := float64(l.stageSize(L, pos))
	moeShare := 0.0
	if fp.MoE != nil && fp.MoE.MoELayers > 0 {
		moeShare = float64(fp.MoE.MoELayers) / float64(L)
	}
	sum := summarize(m)
	if _, n, moe, ok := sum.stageShare(l, L, pos); ok && fp.MoE != nil {
		// the stage's own mix of dense and MoE layers: DeepSeek-V3's first stage holds its
		// dense layers, which keep no routed tokens
		moeShare = float64(moe) / float64(n)
	}
	g := fullGrads()
	if len(m.Ops) > 0 {
		g = sum.grads
	}
	perLayer := func(mode analyzer.Recompute, moeLayer bool) (saved, moe float64) {
		t := layerActivations(fp, l, mode, moeLayer, g)
		if fp.Heads == 0 && l.NoSP && l.TP > 1 { // Korthikanti Table 2, TP without SP
			return tokens * float64(fp.Hidden) * (10 + 24/tp), 0
		}
		if fp.Heads == 0 {
			return tokens * t.sp / tp, 0
		}
		return tokens * (t.sp/spDiv + t.tp/tp), tokens * t.moe / tp
	}
	mixed := func(mode analyzer.Recompute) (saved, moe float64) {
		ds, dm := perLayer(mode, false)
		ms, mm := perLayer(mode, true)
		return (1-moeShare)*ds + moeShare*ms, (1-moeShare)*dm + moeShare*mm
	}
	saved, moe := mixed(rc)
	none, _ := mixed(analyzer.Recompute{Mode: "none"})
	if rc.Mode == "full" && l.RecomputeLayers > 0 { // Megatron's block method: N layers recomputed, the rest keep all
		part := l.partialRecompute(L)
		saved = part*saved + (1-part)*none
	}
	// layers below the first trainable parameter run no backward and save nothing
	saved, moe = saved*g.backward, moe*g.backward
	if g.backward == 0 {
		none = 0
	}
	var a activations
	inFlight := l.inFlight(first)
	a.saved = saved * stageLayers * inFlight
	a.moe = moe * stageLayers * inFlight
	ends := l.PP == 1 || (l.A2AOverlap == OverlapDualPipe && pos != posMid) // DualPipe: the end ranks hold both ends
	if (pos == posLast || ends) && l.MTP > 0 {
		// the multi-token-prediction modules on the last stage: each a copy of the last layer,
		// with the concatenated embedding and hidden state its projection saves (2h, 16-bit)
		lastMoE := fp.MoE != nil && sum.lastLayer[1].trainable > 0
		s, e := perLayer(rc, lastMoE)
		// one micro-batch of them in flight: the last stage's (inFlight(false)), and under
		// DualPipe the end rank's last-stage chunk is the reverse direction's, which holds one
		// while the forward direction's first stage holds PP (DeepSeek's dualpipe.py step():
		// each chunk-1 forward waits for the previous chunk-1 backward)
		n := float64(l.MTP) * g.backward
		a.saved += n * (s + tokens*4*float64(fp.Hidden)/spDiv)
		a.moe += n * e
	}
	if l.OffloadCheckpoints && rc.Mode == "full" {
		// each checkpointed layer input is copied to host memory as the forward passes it and
		// back before its layer's backward: two in flight on the GPU
		a.offloaded += a.saved
		a.saved = 2 * saved
	}
	if n := float64(min(l.OffloadActivations, l.StageLayers(L))); n > 0 {
		// Transformer Engine's CPU offload: those layers' activations wait in host memory; the
		// GPU keeps a double buffer of one layer
		off := (saved + moe) * n * inFlight
		a.offloaded = off
		a.saved -= saved * n * inFlight
		a.moe -= moe * n * inFlight
		a.transient += 2 * (saved + moe)
	}
	// The backward's working set: a recomputed layer's activations, and beside them the
	// activation gradients of the residual stream and the widest intermediate; with TP, the
	// gathered full-sequence input of one layer.
	if rc.Mode != "none" {
		a.transient += none
	}
	if fp.Heads > 0 {
		wide := float64(fp.Intermediate)
		if fp.GatedMLP {
			wide *= 2
		}
		a.transient += tokens * (2*2*float64(fp.Hidden)/spDiv + 2*wide/tp)
	}
	if l.TP > 1 && !l.NoSP {
		a.transient += tokens * 2 * float64(fp.Hidden)
	}
	// Logits and loss on the last stage: Megatron's fused vocab-parallel cross entropy keeps
	// 4·s·b·(h + V)/t (theoretical_memory_usage.py); an eager loss (torchtitan, Hugging Face)
	// holds the bf16 logits, their fp32 copy and log-softmax output: 10 B per vocab entry.
	if pos == posLast || ends {
		V := float64(fp.Vocab)
		switch {
		case l.Loss == LossChunked:
			// the 16-bit logits of every chunk, and one chunk's fp32 upcast and log-softmax
			// (torchtune's CEWithChunkedOutputLoss: 8 chunks; LitGPT's 128-token chunks)
			a.logits = (2 + 8.0/8) * tokens * V / tp
		case l.Loss == LossFused:
			a.logits = 2 * tokens * V / tp // 16-bit logits, the gradient written over them
		case l.Loss == "" && l.framework() == Megatron:
			a.logits = 4 * tokens * (float64(fp.Hidden) + V) / tp
		default:
			a.logits = 10 * tokens * V / tp
		}
		a.logits *= float64(1 + max(l.MTP, 0)) // each MTP module computes its own logits and loss
	}
	return a
}

// validateMemoryOptions checks the options that change what a GPU holds.
func (l Layout) validateMemoryOptions() error {
	okFW := l.Framework == ""
	for _, f := range Frameworks {
		okFW = okFW || f == l.Framework
	}
	switch {
	case !okFW:
		return fmt.Errorf("framework %q: want megatron, fsdp or deepspeed", l.Framework)
	case l.Optimizer != "" && Optimizers[l.Optimizer].Name == "":
		return fmt.Errorf("optimizer %q: want adamw, adamw-bf16, adam8bit, adafactor or sgd", l.Optimizer)
	case l.Precision != "" && !slices.Contains(Recipes, l.Precision):
		return fmt.Errorf("precision recipe %q: want one of %s", l.Precision, strings.Join(Recipes, ", "))
	case l.OffloadParams && l.Stage() < 3 && l.Framework != FSDP:
		return fmt.Errorf("parameter offload streams ZeRO-3 shards: it needs zero stage 3 (or fsdp)")
	case l.OffloadActivations < 0:
		return fmt.Errorf("activation offload layers %d: want >= 0", l.OffloadActivations)
	case l.ParamDType != "" && l.ParamDType != "bf16" && l.ParamDType != "fp32":
		return fmt.Errorf("param dtype %q: want mixed (\"\"), bf16 or fp32", l.ParamDType)
	case l.Loss != "" && !slices.Contains(Losses, l.Loss):
		return fmt.Errorf("loss %q: want one of %s", l.Loss, strings.Join(Losses, ", "))
	case l.Stack != "" && Stacks[l.Stack].Name == "":
		return fmt.Errorf("stack %q: want one of %s", l.Stack, strings.Join(StackNames(), ", "))
	case l.Compile && l.Framework != FSDP && l.Framework != DeepSpeed:
		return fmt.Errorf("compile describes eager PyTorch (fsdp, deepspeed); Megatron's kernels are fused already")
	case l.CUDAGraph && l.Framework != "" && l.Framework != Megatron:
		return fmt.Errorf("cuda-graph is Megatron's full-iteration CUDA graph (--cuda-graph-impl full_iteration); mrep models none for %s", l.Framework)
	}
	if _, err := analyzer.ParseRecompute(l.Recompute); err != nil {
		return err
	}
	return nil
}

// trainableShare is the trainable part of a stage's parameters (FP8 parameters replace the
// 16-bit copy of trainable linear weights; frozen ones keep theirs).
func trainableShare(sp stageParams) float64 {
	all := sp.Trainable + sp.Frozen + sp.Quantized
	if all <= 0 {
		return 0
	}
	return sp.Trainable / all
}
