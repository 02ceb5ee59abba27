// Package layout spreads a training step over a parallel layout: tensor (TP, with sequence
// parallel), pipeline (PP, interleaved with VP virtual stages), context (CP), data (DP, with
// the distributed optimizer) and expert parallel. It composes the counted step (analyzer) and
// the time model (a kernels.Predictor) into a step time on many GPUs; it never imports timing.
package layout

import (
	"fmt"
	"math"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/kernels"
)

// Layout is how a training job is spread over GPUs.
type Layout struct {
	TP, PP, VP, CP, DP, EP int64
	ETP                    int64 // expert tensor parallel (0: TP): experts split EP x ETP ways
	MBS, GBS               int64 // micro-batch and global batch, in sequences
	Seq                    int64
	// DistOptimizer shards optimizer state (fp32 master, m, v) over DP (ZeRO-1, Megatron's
	// distributed optimizer): gradients are reduce-scattered and parameters all-gathered.
	DistOptimizer bool
	// ZeRO is the sharding stage over DP (Rajbhandari et al. 2019): 1 optimizer state (as
	// DistOptimizer), 2 also gradients, 3 also parameters (FSDP), which are then gathered for
	// every micro-batch's forward and backward.
	ZeRO      int
	Recompute string
	// RecomputeLayers is how many layers of a stage full recompute covers (0: all of them);
	// the others keep their activations and skip the extra forward.
	RecomputeLayers int64
	// NoSP turns Megatron's sequence parallel off (it is on with TP by default): norms and
	// dropout then keep full-sequence activations on every TP rank.
	NoSP bool

	// What each GPU holds (train_memory.go). Framework: megatron (""), fsdp or deepspeed.
	Framework string
	// Optimizer: adamw (""), adamw-bf16, adam8bit, adafactor or sgd.
	Optimizer string
	// Precision is the recipe's linear-layer format for memory and time: bf16 (""), fp8 or mxfp8.
	Precision string
	// OffloadOptimizer keeps master weights and optimizer state in host memory and updates them
	// there (ZeRO-Offload); OffloadParams streams ZeRO-3 weight shards from host (ZeRO-Infinity).
	OffloadOptimizer, OffloadParams bool
	// OffloadActivations is how many layers of a stage send their saved activations to host
	// memory during the forward (Megatron/Transformer Engine --cpu-offloading-num-layers).
	OffloadActivations int64
	// Compile: torch.compile fuses an eager model's elementwise ops (fsdp, deepspeed), so
	// their intermediates are not kept.
	Compile bool
}

// Stage is the effective ZeRO stage (DistOptimizer alone is stage 1).
func (l Layout) Stage() int {
	if l.DistOptimizer && l.ZeRO < 1 {
		return 1
	}
	return l.ZeRO
}

func (l Layout) etp() int64 {
	if l.ETP > 0 {
		return l.ETP
	}
	return l.TP
}

// partialRecompute is the share of a stage's layers full recompute covers (1: all, or no
// partial recompute asked for).
func (l Layout) partialRecompute(layers int64) float64 {
	if l.Recompute != "full" || l.RecomputeLayers <= 0 || layers <= 0 {
		return 1
	}
	return math.Min(1, float64(l.RecomputeLayers)/float64(l.StageLayers(layers)))
}

// GPUs is TP x PP x CP x DP.
func (l Layout) GPUs() int64 { return l.TP * l.PP * l.CP * l.DP }

// GA is the gradient accumulation: micro-batches per optimizer step on each DP rank.
func (l Layout) GA() int64 { return l.GBS / (l.MBS * l.DP) }

// StageLayers is how many of layers the fullest pipeline stage holds: stages need not divide
// the layers evenly (Llama 3 405B ran 126 layers on 16 stages), the fullest has ceil per chunk.
func (l Layout) StageLayers(layers int64) int64 {
	chunks := l.PP * l.VP
	return (layers + chunks - 1) / chunks * l.VP
}

// Validate checks the layout against the model, each error naming the constraint.
func (l Layout) Validate(fp analyzer.Fingerprint) error {
	switch {
	case l.TP < 1 || l.PP < 1 || l.VP < 1 || l.CP < 1 || l.DP < 1 || l.EP < 1 || l.MBS < 1 || l.GBS < 1 || l.Seq < 1:
		return fmt.Errorf("layout sizes must be >= 1 (tp %d, pp %d, vp %d, cp %d, dp %d, ep %d, mbs %d, gbs %d, seq %d)", l.TP, l.PP, l.VP, l.CP, l.DP, l.EP, l.MBS, l.GBS, l.Seq)
	case fp.Heads > 0 && fp.Heads%l.TP != 0:
		return fmt.Errorf("tp %d must divide the %d attention heads", l.TP, fp.Heads)
	case fp.KVHeads > 0 && fp.KVHeads%l.TP != 0 && l.TP%fp.KVHeads != 0:
		return fmt.Errorf("tp %d must divide the %d KV heads or be a multiple of them (KV heads are then replicated)", l.TP, fp.KVHeads)
	case fp.Layers > 0 && l.PP*l.VP > fp.Layers:
		return fmt.Errorf("pp %d x vp %d stages exceed the %d layers", l.PP, l.VP, fp.Layers)
	case l.Seq%l.CP != 0 || (l.CP > 1 && (l.Seq/l.CP)%2 != 0):
		return fmt.Errorf("cp %d must split seq %d into an even number of tokens per rank (two chunks each, for causal balance)", l.CP, l.Seq)
	case l.GBS%(l.MBS*l.DP) != 0:
		return fmt.Errorf("gbs %d must be divisible by mbs %d x dp %d", l.GBS, l.MBS, l.DP)
	case l.ZeRO < 0 || l.ZeRO > 3:
		return fmt.Errorf("zero stage %d: want 0, 1, 2 or 3", l.ZeRO)
	case l.ETP < 0 || (l.ETP > 0 && l.TP%l.ETP != 0):
		return fmt.Errorf("etp %d must divide tp %d", l.ETP, l.TP)
	case l.EP > 1 && l.EP*l.etp() > l.TP*l.CP*l.DP:
		return fmt.Errorf("ep %d x etp %d experts' shards need more GPUs than a pipeline stage's TP x CP x DP = %d", l.EP, l.etp(), l.TP*l.CP*l.DP)
	case fp.MoE != nil && fp.MoE.RoutedExperts%l.EP != 0:
		return fmt.Errorf("ep %d must divide the %d routed experts", l.EP, fp.MoE.RoutedExperts)
	}
	return l.validateMemoryOptions()
}

// Step is a training step on the layout, and where its time goes. Seconds.
type Step struct {
	Layout     Layout  `json:"layout"`
	StepTime   float64 `json:"step_time"`
	Microbatch float64 `json:"microbatch_time"` // forward + backward of one micro-batch on the slowest stage
	Pipeline   float64 `json:"pipeline_time"`   // GA micro-batches plus the pipeline bubble
	Bubble     float64 `json:"bubble_time"`
	// Of the GA micro-batches: kernels (compute- and memory-bound, with launch latency) and the
	// exposed TP/SP, CP and EP collectives on the critical path.
	Kernels   float64 `json:"kernel_time"`
	LayerComm float64 `json:"layer_comm_exposed"`
	DPExposed float64 `json:"dp_exposed"` // gradient reduce-scatter and parameter all-gather not hidden
	Optimizer float64 `json:"optimizer_time"`
	// Offload is the exposed time of host offloading: the optimizer step on the CPU with its
	// gradient and weight transfers, weights streamed in, activations out and back.
	Offload    float64 `json:"offload_time,omitempty"`
	TokensPerS float64 `json:"tokens_per_s"`
	// MFU with the report's F_theory (full-S^2 attention, as FlopCounterMode counts it), with
	// PaLM's 6N + 12·L·H·Q·T per token (MFU_6N), and HFU counting what the kernels execute
	// (recomputation included, causal attention halved).
	MFU   float64 `json:"MFU"`
	MFU6N float64 `json:"MFU_6N"`
	HFU   float64 `json:"HFU"`
	// Roofline is the ideal ceiling: GA micro-batches of the slowest stage at datasheet figures,
	// no bubble, no exposed communication. No run is faster.
	Roofline float64 `json:"T_roofline"`
}

// Train times one optimizer step of the layout. s carries the precision recipe; p is the
// chip's time model and peak the FLOP/s MFU is quoted against. domain is how many GPUs share
// the scale-up fabric: groups beyond it (DP groups spaced by TP x CP) cross the scale-out network.
func Train(m *analyzer.Model, s analyzer.Scenario, l Layout, p kernels.Predictor, peak float64, domain int64) (Step, error) {
	return NewTrainer(m, s, p, peak, domain).Train(l)
}

// Trainer times many layouts of one model: the counted micro-batch depends only on (TP, CP,
// EP, MBS, sequence, recompute, GA), so it is costed once per distinct key and reused, and
// evaluating a layout is a few predictions over tens of kernels.
type Trainer struct {
	// HostGBps is the host link per direction offloading uses (0: PCIeGen5GBps).
	HostGBps float64
	m        *analyzer.Model
	s        analyzer.Scenario
	p        kernels.Predictor
	peak     float64
	domain   int64
	cache    map[stepKey]analyzer.Step
}

type stepKey struct {
	tp, cp, ep, etp, mbs, seq, ga int64
	recompute, optimizer          string
}

// PCIeGen5GBps is a PCIe Gen5 x16 link per direction, 16 lanes x 32 GT/s x 128/130: the host
// link offloading uses where the chip names none.
const PCIeGen5GBps = 63

// NewTrainer prepares layouts of m for the time model p.
func NewTrainer(m *analyzer.Model, s analyzer.Scenario, p kernels.Predictor, peak float64, domain int64) *Trainer {
	return &Trainer{m: m, s: s, p: p, peak: peak, domain: domain, cache: map[stepKey]analyzer.Step{}}
}

func (tr *Trainer) step(l Layout) (analyzer.Step, error) {
	k := stepKey{l.TP, l.CP, l.EP, l.ETP, l.MBS, l.Seq, l.GA(), l.Recompute, l.Optimizer}
	if st, ok := tr.cache[k]; ok {
		return st, nil
	}
	sc := tr.s
	sc.Batch, sc.Seq, sc.TP, sc.CP, sc.EP, sc.ETP, sc.GradAccum = l.MBS, l.Seq, l.TP, l.CP, l.EP, l.ETP, l.GA()
	if l.Recompute != "" {
		sc.Recompute = l.Recompute
	}
	// the optimizer the memory model holds is the one the step updates: fp32 master weights
	// and its moments read and written, its FLOPs per parameter
	opt := l.optimizer()
	sc.OptimizerStateBytes, sc.OptimizerFLOPs = 4+opt.StateBytes, opt.FLOPs
	st, err := tr.m.AnalyzeTotals(analyzer.Training, sc, analyzer.Achievable)
	if err != nil {
		return st, err
	}
	tr.cache[k] = st
	return st, nil
}

// Train times one layout.
func (tr *Trainer) Train(l Layout) (Step, error) {
	m, p, peak := tr.m, tr.p, tr.peak
	if err := l.Validate(m.Fingerprint); err != nil {
		return Step{}, err
	}
	st := Step{Layout: l}
	step, err := tr.step(l)
	if err != nil {
		return st, err
	}
	// One micro-batch on the slowest pipeline stage: 1/PP of the layers' kernels (and of the
	// TP/CP collectives), plus the LM head and loss on the last stage (the embedding gather on
	// the first is far smaller).
	var stage, head, opt []kernels.Kernel
	frac := 1 / float64(l.PP)
	if L := m.Fingerprint.Layers; L > 0 {
		frac = float64(l.StageLayers(L)) / float64(L)
	}
	for _, k := range step.Kernels {
		switch k.Category {
		case "optimizer":
			opt = append(opt, k)
		case string(analyzer.CatLMHead):
			head = append(head, k)
		case string(analyzer.CatEmbedding):
			// first stage: lighter than the LM head on the last
		default:
			stage = append(stage, scaled(k, frac))
		}
	}
	mb := p.Predict(append(stage, head...))
	st.Microbatch = mb.TEst
	if part := l.partialRecompute(m.Fingerprint.Layers); part < 1 {
		// recompute only some layers: the extra forward scales with the share recomputed
		none := l
		none.Recompute, none.RecomputeLayers = "none", 0
		base, err := tr.Train(none)
		if err != nil {
			return st, err
		}
		st.Microbatch = base.Microbatch + part*(st.Microbatch-base.Microbatch)
	}
	// Interleaved 1F1B: the bubble is (PP-1)/VP micro-batch times (Narayanan et al. 2021).
	ga := float64(l.GA())
	if st.Microbatch > 0 {
		share := math.Min(1, mb.TComm/mb.TEst) // the exposed collectives' share of a micro-batch
		st.LayerComm = ga * st.Microbatch * share
		st.Kernels = ga*st.Microbatch - st.LayerComm
	}
	st.Bubble = float64(l.PP-1) / float64(l.VP) * st.Microbatch
	st.Pipeline = ga*st.Microbatch + st.Bubble

	// Data parallel: this GPU's gradients reduce-scattered and its parameters all-gathered
	// over DP, in 16 bits, overlapped with the last micro-batch's backward and the first's
	// forward (Megatron's bucketed overlap); what outlasts them is exposed.
	// Context-parallel ranks hold the same weights as their data-parallel peers: gradients are
	// reduced, and ZeRO shards gathered, over DP x CP (Megatron's data-parallel-with-CP group,
	// torchtitan's dp_shard_cp mesh). Only trainable parameters have gradients.
	if group := l.DP * l.CP; group > 1 {
		sp := tr.split(l)
		params := sp.Trainable
		gathered := params // ZeRO-3 gathers every weight, trainable or not
		if l.Stage() == 3 || l.framework() == FSDP {
			gathered = sp.Trainable + sp.Frozen
		}
		tier := kernels.ScaleUp
		if l.TP*l.CP*l.DP > tr.domain {
			tier = kernels.ScaleOut
		}
		coll := func(c kernels.Coll) float64 {
			msg := params * 2
			if c == kernels.AllGather {
				msg = gathered * 2
			}
			return p.Predict([]kernels.Kernel{{Name: "dp", Category: "network", Kind: kernels.Collective, Coll: c, Count: 1,
				Ranks: float64(group), Message: msg, Tier: tier, Exposed: 1}}).TEst
		}
		rs, ag := coll(kernels.ReduceScatter), coll(kernels.AllGather)
		switch l.Stage() {
		case 0:
			st.DPExposed = math.Max(0, coll(kernels.AllReduce)-2.0/3*st.Microbatch)
		case 3:
			// parameters gathered for the forward and again for the backward of every
			// micro-batch, gradients reduce-scattered after each: hidden behind that micro-batch
			st.DPExposed = ga * math.Max(0, 2*ag+rs-st.Microbatch)
		default:
			st.DPExposed = math.Max(0, rs-2.0/3*st.Microbatch) + math.Max(0, ag-1.0/3*st.Microbatch)
		}
	}
	// The optimizer: the analyzer amortized one Adam step over GA micro-batches for the
	// parameters of all layers on this TP rank; a stage holds 1/PP of them, and the
	// distributed optimizer updates 1/DP of those.
	shard := ga / float64(l.PP)
	if l.Stage() >= 1 {
		shard /= l.ShardGroup()
	}
	for i := range opt {
		opt[i] = scaled(opt[i], shard)
	}
	if len(opt) > 0 {
		st.Optimizer = p.Predict(opt).TEst
	}
	st.Offload = tr.offload(l, st.Microbatch)
	if l.cpuOptimizer() {
		st.Optimizer = 0 // the CPU updates; its time is in Offload
	}
	st.StepTime = st.Pipeline + st.DPExposed + st.Optimizer + st.Offload
	st.Roofline = ga * mb.TRoofline
	tokens := float64(l.GBS * l.Seq)
	st.TokensPerS = tokens / st.StepTime
	// model FLOPs of the whole step: one micro-batch's F_theory on this GPU x its share
	gpus := float64(l.GPUs())
	fPerSeq := step.Cost.FTheory * float64(l.TP*l.CP) / float64(l.MBS) // undo the TP and CP split
	st.MFU = fPerSeq * float64(l.GBS) / (gpus * peak * st.StepTime)
	fp := m.Fingerprint
	perToken := 6*m.Active + 12*float64(fp.Layers*fp.Heads*fp.HeadDim*l.Seq)
	st.MFU6N = perToken * tokens / (gpus * peak * st.StepTime)
	exec := step.Cost.FExecuted * float64(l.TP*l.CP) / float64(l.MBS)
	st.HFU = exec * float64(l.GBS) / (gpus * peak * st.StepTime)
	return st, nil
}

// offload is the exposed time of host offloading in one step, at the host link's bandwidth:
//   - optimizer (ZeRO-Offload): this GPU's gradient shard out and its weights back in 16 bits,
//     and the CPU's Adam over the shard at host memory bandwidth, after the backward;
//   - parameters (ZeRO-Infinity): the stage's weights streamed in for every micro-batch's
//     forward and backward, hidden behind that micro-batch's compute;
//   - activations (Transformer Engine CPU offload): the offloaded layers' activations out in
//     the forward and back in the backward, hidden behind the other layers' compute.
func (tr *Trainer) offload(l Layout, microbatch float64) float64 {
	bw := tr.HostGBps
	if bw <= 0 {
		bw = PCIeGen5GBps
	}
	bw *= 1e9
	var t float64
	sp := tr.split(l)
	ga := float64(l.GA())
	if l.cpuOptimizer() {
		shard := sp.Trainable
		if l.Stage() >= 1 {
			shard /= l.ShardGroup()
		}
		t += 2*2*shard/bw + shard*HostAdamBytesPerParam/(HostMemGBpsPerGPU*1e9)
	}
	if l.OffloadParams {
		stream := 2 * 2 * (sp.Trainable + sp.Frozen) // the whole stage passes through, forward and backward
		t += ga * math.Max(0, stream/bw-microbatch)
	}
	if l.OffloadActivations > 0 {
		a := activationBytes(tr.m, l, true)
		perMB := a.offloaded / l.inFlight(true)
		L := max(tr.m.Fingerprint.Layers, 1)
		share := float64(min(l.OffloadActivations, l.StageLayers(L))) / float64(l.StageLayers(L))
		t += ga * math.Max(0, 2*perMB/bw-(1-share)*microbatch)
	}
	return t
}

// split is one GPU's trainable and frozen parameters, the stages' average (as the time model's
// per-stage kernels are).
func (tr *Trainer) split(l Layout) analyzer.ParamSplit {
	if len(tr.m.Ops) == 0 {
		return analyzer.ParamSplit{Trainable: tr.m.ParamsPerGPU(l.TP, l.PP, l.EP, l.ETP)}
	}
	sum := summarize(tr.m)
	var s analyzer.ParamSplit
	for _, g := range []paramGroup{sum.layers, sum.embedding, sum.head, sum.final} {
		for e, div := range [2]float64{float64(l.TP), float64(l.EP * l.etp())} {
			s.Trainable += g[e].trainable / div / float64(l.PP)
			s.Frozen += (g[e].frozen + g[e].quantized) / div / float64(l.PP)
		}
	}
	return s
}

// cpuOptimizer: the optimizer step runs on the host (ZeRO-Offload, or FSDP's CPU offload).
func (l Layout) cpuOptimizer() bool {
	return l.OffloadOptimizer || (l.OffloadParams && l.framework() == FSDP)
}

func scaled(k kernels.Kernel, f float64) kernels.Kernel {
	k.Count *= f
	k.FLOPs *= f
	k.VectorFLOPs *= f
	k.Bytes *= f
	return k
}
