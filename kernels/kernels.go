// Package kernels is the vocabulary between counting and timing: a step is a list of
// kernels (GEMMs, attention, memory-bound passes, collectives) with their exact work and
// traffic. The analyzer writes them without knowing any chip's efficiency; the timing layer
// reads them without knowing any model. Neither imports the other.
package kernels

// Kind is how a kernel is timed.
type Kind uint8

// Kernel kinds.
const (
	GEMM       Kind = iota // tensor-core matrix multiply: Groups problems of [M,K]x[K,N]
	Attention              // fused (flash-style) attention: QK^T, softmax, PV
	Memory                 // elementwise, norms, casts, gathers, the optimizer: bandwidth-bound
	Collective             // inter-GPU communication
)

func (k Kind) String() string {
	switch k {
	case GEMM:
		return "gemm"
	case Attention:
		return "attention"
	case Memory:
		return "memory"
	case Collective:
		return "collective"
	}
	return "unknown"
}

// Coll is a collective's algorithm.
type Coll uint8

// Collectives.
const (
	AllReduce Coll = iota
	AllGather
	ReduceScatter
	AllToAll
	P2P
)

func (c Coll) String() string {
	return [...]string{"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "p2p"}[c]
}

// RingFactor is the share of a collective's message each of n ranks sends over its link with
// ring algorithms: all-reduce 2(n-1)/n (reduce-scatter then all-gather), all-gather,
// reduce-scatter and all-to-all (n-1)/n, point-to-point 1.
func RingFactor(c Coll, n float64) float64 {
	if n < 1 {
		n = 1
	}
	switch c {
	case AllReduce:
		return 2 * (n - 1) / n
	case AllGather, ReduceScatter, AllToAll:
		return (n - 1) / n
	}
	return 1
}

// Tier is the link a collective runs on.
type Tier uint8

// Link tiers.
const (
	ScaleUp  Tier = iota // NVLink, Infinity Fabric, ICI: inside the scale-up domain
	ScaleOut             // InfiniBand, RoCE: across domains
)

// Kernel is one kind of launch in a step, Count times over (identical launches, e.g. the
// same all-reduce in every layer). FLOPs and Bytes are totals over the Count launches.
type Kernel struct {
	Name     string // op or module the kernel belongs to
	Category string // analyzer category, for the breakdown
	Kind     Kind
	Count    float64 // identical launches (>= 1 for kernels that launch; 0: fused into a neighbour)

	// GEMM: Groups independent problems of [M,K]x[K,N] per launch (routed experts touched).
	M, N, K, Groups float64
	// Grouped: one launch over the experts' ragged token groups (a MoE layer), which reaches a
	// lower share of peak than a dense GEMM of the same work.
	Grouped bool
	// BlockScaled: an MXFP8 GEMM, whose operands carry block scales (Efficiency.MXFP8GEMMShare;
	// analyzer.Scenario.BlockScaled).
	BlockScaled bool
	// VaryingM: M is the mean of a row count that varies from step to step (a serving engine's
	// mix of decode tokens and prefill chunks), so tile quantization is averaged over it.
	VaryingM bool
	// MemShare is the share of the chip's memory rate a memory-bound kernel reaches (0: all of
	// it): eager PyTorch passes over strided views and fp32 broadcasts run below a copy's.
	MemShare float64
	// Tensor-core FLOPs executed and their precision (which peak applies).
	FLOPs float64
	DType string
	// VectorFLOPs are the non-tensor-core FLOPs (softmax, norms, optimizer) at the vector rate.
	VectorFLOPs float64
	// Bytes is the HBM traffic: weights, activations, KV cache and temporaries.
	Bytes float64

	// Attention: parallel work tiles are Batch x Heads x ceil(Queries/tile); Decode kernels
	// read the KV cache with GroupM query rows per KV head (query heads per KV head, all
	// heads for MLA's shared latent).
	Batch, Heads, Queries float64
	Decode                bool
	GroupM                float64
	// HeadDim is a (non-decode) attention kernel's tensor-core FLOPs per score over 4: the head
	// dimension, the mean of the query-key and value dimensions where they differ. Each score
	// also takes one exponential, so a small head is bound more by the chip's exponential rate.
	HeadDim float64
	// KVElem is the KV cache's bytes per element an inference attention kernel reads or writes
	// (1 for an FP8 cache, which a decode kernel dequantizes as it streams it; 0: not stated).
	KVElem float64
	// Latent: multi-head latent attention (DeepSeek's MLA), whose kernels are their own
	// (FlashMLA, TensorRT-LLM's and FlashInfer's MLA paths) with figures of their own.
	Latent bool
	// Window is the keys a query attends to when a sliding window caps them below the sequence
	// (a prefill or training kernel; 0: none), and Sink says the softmax has a learnable sink
	// (GPT-OSS), whose gradient the backward reduces over every query.
	Window   float64
	Sink     bool
	Backward bool // a backward pass: a flash kernel's runs below the forward's efficiency; a grouped expert GEMM's pays no MoE op cost

	// Graphed kernels are replayed from a CUDA graph (engines capture decode steps): no host
	// launch cost. Others are launched one by one from the host, which bounds short kernels.
	Graphed bool

	// Collective: Coll over Ranks GPUs on Tier moving Message bytes per launch (the full
	// tensor, before the algorithm's (n-1)/n factors). Exposed is the share of its time not
	// hidden behind compute (1: serialized with the layer, as TP all-reduces are).
	Coll    Coll
	Tier    Tier
	Ranks   float64
	Message float64
	Exposed float64
	// DomainRanks is how many of the group's ranks share one scale-up domain when a ring
	// collective (all-reduce, reduce-scatter, all-gather) crosses the scale-out network. NCCL
	// runs one ring per NIC and keeps each domain's ranks contiguous on it, so a domain's
	// share of every ring step leaves through DomainRanks NICs at once: the ring moves at
	// DomainRanks x one NIC's bandwidth (capped by the scale-up link), not one NIC's. 0 or 1:
	// one rank per domain (e.g. data parallel across TP-8 nodes).
	DomainRanks float64
}

// EightBitKV says the kernel streams an 8-bit (FP8) KV cache, which the engines' kernels
// dequantize as they read and, for some latent-attention kernels, multiply in FP8.
func (k Kernel) EightBitKV() bool { return k.KVElem > 0 && k.KVElem < 2 }

// Time is a step's predicted time and where it goes. All times in seconds.
type Time struct {
	// T_est: the achievable prediction, the sum over kernels of max(compute, memory) plus
	// launch latency, exposed communication and the per-step overhead.
	TEst float64 `json:"T_est"`
	// Totals by resource at achieved efficiency: T_comp = F_realizable / P_peak (every kernel's
	// FLOPs at its achieved fraction of peak), T_hbm (every byte at achievable bandwidth),
	// T_net (every collective, exposed or not).
	TComp float64 `json:"T_comp"`
	THBM  float64 `json:"T_hbm"`
	TNet  float64 `json:"T_net"`
	// Breakdown of T_est: they sum to it.
	TGEMM      float64 `json:"T_gemm"`
	TAttention float64 `json:"T_attention"`
	TMemory    float64 `json:"T_memory_bound"`
	TComm      float64 `json:"T_comm_exposed"`
	TLatency   float64 `json:"T_latency"`  // kernel launches and the per-step overhead
	TOverhead  float64 `json:"T_overhead"` // of which the per-step overhead
	// Time spent in kernels limited by compute vs by memory (for the regime).
	TComputeBound float64 `json:"T_compute_bound"`
	TMemoryBound  float64 `json:"T_memory_bound_kernels"`
	// FRealizable is peak-equivalent FLOPs: T_comp x P_peak of the step's compute dtype.
	FRealizable float64 `json:"F_realizable"`
	Launches    float64 `json:"launches"`
	Regime      string  `json:"regime"`
	// The ideal roofline of the same kernels: executed FLOPs at the datasheet peak, bytes at
	// nominal HBM bandwidth, collectives at nominal link bandwidth with no latency.
	// T_roofline = max of the three is the ceiling no run beats; T_est >= T_roofline always.
	TCompIdeal     float64 `json:"T_comp_ideal"`
	THBMIdeal      float64 `json:"T_hbm_ideal"`
	TNetIdeal      float64 `json:"T_net_ideal"`
	TRoofline      float64 `json:"T_roofline"`
	RooflineRegime string  `json:"roofline_regime"`
}

// Predictor times a step's kernels on one chip and precision.
type Predictor interface {
	Predict(ks []Kernel) Time
}

// Scale is t with every time and count multiplied by f: the same step run f times over.
func (t Time) Scale(f float64) Time {
	t.TEst *= f
	t.TComp *= f
	t.THBM *= f
	t.TNet *= f
	t.TGEMM *= f
	t.TAttention *= f
	t.TMemory *= f
	t.TComm *= f
	t.TLatency *= f
	t.TOverhead *= f
	t.TComputeBound *= f
	t.TMemoryBound *= f
	t.FRealizable *= f
	t.Launches *= f
	t.TCompIdeal *= f
	t.THBMIdeal *= f
	t.TNetIdeal *= f
	t.TRoofline *= f
	return t
}

// Add is t followed by u: times and counts add; the ideal roofline of work run one part after
// the other is the sum of the parts' (each part's bound holds while it runs); the regimes are t's.
func (t Time) Add(u Time) Time {
	t.TEst += u.TEst
	t.TComp += u.TComp
	t.THBM += u.THBM
	t.TNet += u.TNet
	t.TGEMM += u.TGEMM
	t.TAttention += u.TAttention
	t.TMemory += u.TMemory
	t.TComm += u.TComm
	t.TLatency += u.TLatency
	t.TOverhead += u.TOverhead
	t.TComputeBound += u.TComputeBound
	t.TMemoryBound += u.TMemoryBound
	t.FRealizable += u.FRealizable
	t.Launches += u.Launches
	t.TCompIdeal += u.TCompIdeal
	t.THBMIdeal += u.THBMIdeal
	t.TNetIdeal += u.TNetIdeal
	t.TRoofline += u.TRoofline
	return t
}
