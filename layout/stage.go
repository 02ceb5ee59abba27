package layout

import (
	"math"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/kernels"
)

// One micro-batch on each kind of pipeline stage: its decoder layers' kernels (and their TP/CP
// collectives), the embedding on the first, the LM head and loss (and MTP modules) on the last;
// the slowest stage sets the pipeline's pace. The expert all-to-all is timed by placement
// (moe.go) and overlapped as the layout's schedule says.

// stageKernels are a counted micro-batch's kernels by where they run.
type stageKernels struct {
	layers, head, emb, opt []kernels.Kernel // decoder layers (all of them), LM head, embedding, optimizer
	a2a                    kernels.Kernel   // the expert all-to-all, timed by placement
	// fwd is the GPU's forward time by phase (forwardPhases) of all the decoder layers, the LM
	// head, the embedding and one MoE layer's permutation: what an eager MoE model's synchronized
	// forward runs at (moeHostPace); set where the host's pace can bind (Trainer.phases)
	fwd phaseTimes
}

// phaseTimes are GPU seconds of forward kernels: the routed experts' and the rest's, of all the
// decoder layers (a stage takes its share), and the rest's of the LM head and the embedding.
type phaseTimes struct {
	experts, rest, head, emb float64
	permute                  float64 // the permutation's forward half, per MoE layer
}

func splitKernels(step analyzer.Step) stageKernels {
	var sk stageKernels
	for _, k := range step.Kernels {
		switch {
		case k.Category == "optimizer":
			sk.opt = append(sk.opt, k)
		case k.Category == string(analyzer.CatLMHead):
			sk.head = append(sk.head, k)
		case k.Category == string(analyzer.CatEmbedding):
			sk.emb = append(sk.emb, k)
		case k.Name == "ep_all_to_all":
			sk.a2a = k
		default:
			sk.layers = append(sk.layers, k)
		}
	}
	return sk
}

// castTime is one micro-batch's low-precision casts (the analyzer's ".cast" kernels) on the
// stage holding the most of the model's L layers.
func castTime(p kernels.Predictor, layers []kernels.Kernel, l Layout, L int64) float64 {
	n := L
	if l.PP > 1 {
		first, mid, last := l.StageCounts(L)
		n = max(first, mid, last)
	}
	var ks []kernels.Kernel
	for _, k := range layers {
		if strings.HasSuffix(k.Name, ".cast") {
			ks = append(ks, scaled(k, float64(n)/float64(L)))
		}
	}
	if len(ks) == 0 {
		return 0
	}
	return p.Predict(ks).TEst
}

// stageTime is one stage's micro-batch: its kernels' time, its all-to-all, and the two
// together as the pipeline sees them (mb).
type stageTime struct {
	t   kernels.Time
	a2a A2A
	mb  float64
	// host is how much longer than the GPU's kernels the host took to issue the MoE layers'
	// (included in t.TLatency)
	host float64
}

// slowestStage times the first, a middle and the last stage and returns the slowest.
func (tr *Trainer) slowestStage(l Layout, p kernels.Predictor, sk stageKernels) stageTime {
	fp := tr.m.Fingerprint
	L := max(fp.Layers, 1)
	nFirst, nMid, nLast := l.StageCounts(L)
	if l.PP == 1 {
		nFirst, nMid, nLast = L, L, L
	}
	last := [][]kernels.Kernel{sk.head}
	for i := int64(0); i < l.MTP; i++ {
		// a multi-token-prediction module: one more (MoE) layer and the shared head
		mtp := make([]kernels.Kernel, len(sk.layers))
		for j, k := range sk.layers {
			mtp[j] = scaled(k, 1/float64(L))
		}
		last = append(last, mtp, sk.head)
	}
	var stages []stageTime
	switch {
	case l.PP == 1:
		stages = []stageTime{tr.stage(l, p, sk, L, append([][]kernels.Kernel{sk.emb}, last...)...)}
	case l.A2AOverlap == OverlapDualPipe:
		// DualPipe's rank i runs stage i for the micro-batches fed from one end and stage PP-1-i
		// for those fed from the other, half of them each (dualpipe.py step(): half_num_chunks
		// per direction), so a rank's pace is the mean of its two stages': the end ranks pair
		// the first stage with the last, the middle ranks two middle stages
		stages = []stageTime{meanStage(tr.stage(l, p, sk, nFirst, sk.emb), tr.stage(l, p, sk, nLast, last...))}
		if l.PP > 2 {
			stages = append(stages, tr.stage(l, p, sk, nMid))
		}
	default:
		stages = []stageTime{tr.stage(l, p, sk, nFirst, sk.emb), tr.stage(l, p, sk, nLast, last...)}
		if l.PP > 2 {
			stages = append(stages, tr.stage(l, p, sk, nMid))
		}
	}
	slow := stages[0]
	for _, s := range stages[1:] {
		if s.mb > slow.mb {
			slow = s
		}
	}
	return slow
}

// meanStage is a micro-batch of a rank that runs stage a for half its micro-batches and stage b
// for the other half (DualPipe's ranks).
func meanStage(a, b stageTime) stageTime {
	share := 0.0 // of the bytes both stages send
	if by := a.a2a.BytesPerLayer + b.a2a.BytesPerLayer; by > 0 {
		share = (a.a2a.BytesPerLayer*a.a2a.ScaleOutShare + b.a2a.BytesPerLayer*b.a2a.ScaleOutShare) / by
	}
	return stageTime{
		t: a.t.Add(b.t).Scale(0.5),
		a2a: A2A{BytesPerLayer: (a.a2a.BytesPerLayer + b.a2a.BytesPerLayer) / 2, ScaleOutShare: share,
			Time: (a.a2a.Time + b.a2a.Time) / 2, Exposed: (a.a2a.Exposed + b.a2a.Exposed) / 2},
		mb:   (a.mb + b.mb) / 2,
		host: (a.host + b.host) / 2,
	}
}

// stage times n decoder layers and the extra kernels (embedding, head, MTP modules) of one
// micro-batch, with the TP overlap, the MoE host pace and the all-to-all the layout implies.
func (tr *Trainer) stage(l Layout, p kernels.Predictor, sk stageKernels, n int64, extra ...[]kernels.Kernel) stageTime {
	fp := tr.m.Fingerprint
	L := max(fp.Layers, 1)
	moeShare := 0.0
	if fp.MoE != nil && fp.MoE.MoELayers > 0 {
		moeShare = float64(fp.MoE.MoELayers) / float64(L)
	}
	ks := make([]kernels.Kernel, 0, len(sk.layers)+8)
	for _, k := range sk.layers {
		ks = append(ks, scaled(k, float64(n)/float64(L)))
	}
	for _, e := range extra {
		ks = append(ks, e...)
	}
	if perm := tr.permutation(l, moeShare*float64(n)); perm.Bytes > 0 {
		ks = append(ks, perm)
	}
	if l.CUDAGraph { // replayed from the step's graph: no kernel waits on the host to issue it
		for i := range ks {
			ks[i].Graphed = true
		}
	}
	t := p.Predict(ks)
	if l.TPOverlap && l.TP > 1 {
		var tpk []kernels.Kernel
		for _, k := range ks {
			if k.Name == "tp_all_reduce" {
				tpk = append(tpk, k)
			}
		}
		if len(tpk) > 0 {
			hidden := math.Min(p.Predict(tpk).TComm, math.Min(t.TGEMM, t.TComm))
			t.TEst -= hidden
			t.TComm -= hidden
		}
	}
	mtpLayers := 0.0
	if len(extra) > 1 {
		mtpLayers = float64(l.MTP) // the MTP modules' layers issue kernels and exchange tokens too
	}
	moeLayers := moeShare * (float64(n) + mtpLayers)
	hostBound := 0.0
	if h, ok := p.(interface{ MoELaunch() float64 }); ok && moeLayers > 0 && h.MoELaunch() > 0 && !l.CUDAGraph {
		gpu := t.TEst - t.TComm
		// the stage's share of the layers' forward (the kernels scale linearly with the layers
		// a stage holds), its permutation's forward half, and the head and embedding it holds
		share := (float64(n) + mtpLayers) / float64(L)
		experts, rest := share*sk.fwd.experts+moeLayers*sk.fwd.permute, share*sk.fwd.rest
		for _, e := range extra {
			switch {
			case len(e) > 0 && len(sk.head) > 0 && &e[0] == &sk.head[0]:
				rest += sk.fwd.head
			case len(e) > 0 && len(sk.emb) > 0 && &e[0] == &sk.emb[0]:
				rest += sk.fwd.emb
			}
		}
		if paced := moeHostPace(h.MoELaunch(), l.moeLaunchPhases(fp), moeLayers, experts, rest, gpu); paced > gpu {
			t.TLatency += paced - gpu
			t.TEst += paced - gpu
			hostBound = paced - gpu
		}
	}
	a := tr.a2aTime(l, sk.a2a, moeLayers, p)
	sms := 0.0
	if c, ok := p.(interface{ SMs() float64 }); ok {
		sms = c.SMs()
	}
	a.Exposed = l.overlapA2A(a.Time, t.TEst-t.TComm, sms)
	return stageTime{t, a, t.TEst + a.Exposed, hostBound}
}

// moeHostPace is a stage's kernel time when the host issues its MoE layers' kernels eagerly
// (launch seconds per kernel), given the GPU's time for the stage's forward, split into the
// routed experts' phase and the rest, and for the whole micro-batch (gpu).
//
// The host issues kernels while the GPU runs ahead, but each MoE layer's forward synchronizes
// the two: the grouped GEMMs' per-expert splits and the dispatch's sizes are copied to the host
// before the experts run (Megatron's token dispatchers hand Transformer Engine's GroupedLinear
// its m_splits as host integers; a full-iteration CUDA graph avoids the copy with static expert
// shapes, and AMD's moe_package README names these synchronizations as what stalls its
// launches). So the host cannot issue a layer's expert kernels while the GPU still runs the
// attention before them: each forward layer runs its experts phase (permutation, dispatch,
// grouped GEMMs, combine: one launch per expert per linear) and its attention and router
// phase, each at the slower of the host and the GPU. The backward knows its splits and runs as
// one stretch at the slower of the two. Where the host is far ahead or far behind in every phase
// this is max(host, GPU) over the micro-batch, as without the synchronization; where they are
// close, the host's many short expert launches leave the GPU idle each layer. Primus-Turbo's
// sync-free MoE (from stage 2) makes no such copy, so its step is max(host, GPU) over the
// micro-batch.
func moeHostPace(launch float64, ph moeLaunches, layers, fwdExperts, fwdRest, gpu float64) float64 {
	if ph.syncFree {
		return math.Max(launch*layers*(ph.forwards*(ph.experts+ph.router)+ph.backward), gpu)
	}
	gE, gR := fwdExperts/layers, fwdRest/layers
	window := math.Max(launch*ph.experts, gE) + math.Max(launch*ph.router, gR)
	bwd := math.Max(0, gpu-ph.forwards*layers*(gE+gR))
	return ph.forwards*layers*window + math.Max(launch*ph.backward*layers, bwd)
}

// forwardPhases is the GPU time of the forward kernels of ks: the routed experts' and the rest's.
// The analyzer lists an op's forward kernel first, then its gradients (recompute's repeats after
// them); a low-precision cast kernel is half forward (the input's quantization; the output
// gradient's is the backward's).
func forwardPhases(p kernels.Predictor, ks []kernels.Kernel) (experts, rest float64) {
	var ek, rk []kernels.Kernel
	prev := ""
	for _, k := range ks {
		name := k.Name
		share := 0.0
		switch {
		case k.Kind == kernels.Collective:
		case strings.HasSuffix(name, ".cast"):
			share = 0.5
		case name != prev:
			share = 1
		}
		prev = name
		if share == 0 {
			continue
		}
		if k.Category == string(analyzer.CatRoutedExperts) {
			ek = append(ek, scaled(k, share))
		} else {
			rk = append(rk, scaled(k, share))
		}
	}
	base := p.Predict(nil).TEst // the per-step overhead every prediction carries
	return p.Predict(ek).TEst - base, p.Predict(rk).TEst - base
}

// phaseKey names a step's kernels under one time model.
type phaseKey struct {
	step stepKey
	p    kernels.Predictor
}

// phases are the forward phases of sk's kernels under p (forwardPhases), computed once per step
// and time model: a plan times thousands of layouts on a few steps. Zero where the host's pace
// cannot bind (no MoE host figure, or a CUDA graph).
func (tr *Trainer) phases(l Layout, p kernels.Predictor, sk stageKernels) phaseTimes {
	h, ok := p.(interface{ MoELaunch() float64 })
	if !ok || h.MoELaunch() <= 0 || l.CUDAGraph || tr.m.Fingerprint.MoE == nil {
		return phaseTimes{}
	}
	k := phaseKey{tr.key(l), p}
	if ph, ok := tr.phaseCache[k]; ok {
		return ph
	}
	var ph phaseTimes
	ph.experts, ph.rest = forwardPhases(p, sk.layers)
	_, ph.head = forwardPhases(p, sk.head)
	_, ph.emb = forwardPhases(p, sk.emb)
	if perm := tr.permutation(l, 1); perm.Bytes > 0 {
		ph.permute = p.Predict([]kernels.Kernel{scaled(perm, 0.5)}).TEst - p.Predict(nil).TEst
	}
	if tr.phaseCache == nil {
		tr.phaseCache = map[phaseKey]phaseTimes{}
	}
	tr.phaseCache[k] = ph
	return ph
}

// bubble is the pipeline's idle time per step: interleaved 1F1B's (PP-1)/VP micro-batches
// (Narayanan et al. 2021), or DualPipe's (PP/2-1)(F&B + B - 3W), with F the micro-batch's
// forward (a third of it: the backward runs about twice the forward), W its weight gradients
// (a third of its GEMMs: forward, input and weight gradients are one GEMM each) and B the rest.
func (l Layout) bubble(slow stageTime, microbatch float64) float64 {
	if l.A2AOverlap != OverlapDualPipe {
		return OneFOneBBubble(l.PP, l.VP, microbatch)
	}
	body := slow.t.TEst
	f, w := body/3, slow.t.TGEMM/3
	b := body - f - w
	fb := math.Max(f+b, slow.a2a.Time)
	return DualPipeBubble(l.PP, f, b, w, fb)
}

// permutation is the token permutation around a stage's MoE layers, per micro-batch: the
// forward gathers this GPU's tokens into expert order (read tokens x h, write tokens x top-k x h)
// and scatters the experts' outputs back with the router's weights (the reverse), and the
// backward does both again for the gradients; 16-bit, memory-bound (Megatron's fused
// permute/unpermute kernels).
func (tr *Trainer) permutation(l Layout, moeLayers float64) kernels.Kernel {
	fp := tr.m.Fingerprint
	if fp.MoE == nil || moeLayers <= 0 {
		return kernels.Kernel{}
	}
	tokens := float64(l.MBS*l.Seq/max(l.CP, 1)) / float64(max(l.TP, 1))
	h := float64(fp.Hidden)
	topk := float64(max(fp.MoE.TopK, 1))
	perPass := 2 * 2 * tokens * h * (1 + topk) // permute and unpermute, each reads one side and writes the other
	return kernels.Kernel{Name: "moe_permute", Category: string(analyzer.CatRouter), Kind: kernels.Memory,
		Count: 4 * moeLayers, Bytes: 2 * perPass * moeLayers}
}
