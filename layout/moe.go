package layout

import (
	"fmt"
	"math"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/kernels"
)

// MoE training's expert all-to-all, as the frameworks run it.
//
// Volume: every MoE layer dispatches each of this GPU's tokens to its top-k experts and combines
// the results back, in the forward and again (their gradients) in the backward: four all-to-alls
// of tokens x top-k x hidden elements per MoE layer and micro-batch. Dropless routing sends every
// assignment; force-balanced benchmarks (Megatron-Bridge's tables) spread them evenly, and
// Imbalance scales the busiest rank's share above the mean.
//
// Placement: Megatron orders expert ranks tp(etp)-ep-dp-pp, so an EP group spans EP x ETP
// consecutive GPUs. Peers inside the scale-up domain (an HGX node of 8, an NVL72 rack) are
// reached over NVLink, the others over the scale-out network; the two run concurrently and the
// slower bounds the collective.
//
// Dispatchers: alltoall (Megatron's NCCL all-to-all) sends each assignment to its expert's
// rank; deepep (DeepSeek's DeepEP kernels, Megatron's flex dispatcher) sends a token once per
// destination node and forwards it over NVLink inside the node, and dispatches in FP8 under an
// FP8 recipe (the DeepSeek-V3 report, section 3.2.2).
//
// Overlap (A2AOverlap): none (the all-to-all sits between the router and the experts, exposed);
// 1f1b (Megatron's --overlap-moe-expert-parallel-comm: in the steady state one micro-batch's
// forward runs beside another's backward, so each direction's all-to-all hides behind the other's
// compute); dualpipe (DeepSeek-V3's bidirectional schedule: the same forward/backward pairing
// from both pipeline ends, bubble (PP/2 - 1)(F&B + B - 3W), two copies of the stage's parameters
// and PP + 1 micro-batches of activations in flight; DeepSeek-V3 report, section 3.2.1, Table 2).

// Dispatchers and overlap modes.
const (
	DispatchAllToAll = "alltoall"
	DispatchDeepEP   = "deepep"
	// DispatchHybridEP is NVIDIA's HybridEP (Megatron's flex dispatcher on GB200/GB300): DeepEP's
	// node-deduplicated exchange with the NVLink domain (72 GPUs in an NVL72) as the node.
	DispatchHybridEP = "hybridep"
	OverlapNone      = "none"
	Overlap1F1B      = "1f1b"
	OverlapDualPipe  = "dualpipe"
)

// Forced routings (Layout.Routing).
const (
	RoutingUniform = "uniform"
	RoutingEven    = "even"
)

// touchedGroups is how many of the groups of size experts (consecutive experts, group g holding
// experts g·size to (g+1)·size - 1) one token's top-k experts fall in, on average. Under random
// routing the k experts are a uniform draw without replacement, so a group is missed with
// probability C(E - size, k) / C(E, k); under Primus's even routing token t takes experts
// (t·k + j) mod E, a cycle of E / gcd(k, E) tokens, counted exactly.
func touchedGroups(experts, topk, size int64, routing string) float64 {
	if experts <= 0 || topk <= 0 || size <= 0 || size >= experts {
		return 1
	}
	topk = min(topk, experts)
	if routing == RoutingEven {
		period := experts / gcd(topk, experts)
		total := 0
		for t := int64(0); t < period; t++ {
			seen := map[int64]bool{}
			for j := int64(0); j < topk; j++ {
				seen[((t*topk+j)%experts)/size] = true
			}
			total += len(seen)
		}
		return float64(total) / float64(period)
	}
	miss := 1.0
	for i := int64(0); i < topk; i++ {
		miss *= math.Max(0, float64(experts-size-i)) / float64(experts-i)
	}
	return float64(experts) / float64(size) * (1 - miss)
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Grouped GEMM implementations (Layout.GroupedGEMM).
const (
	GroupedTE     = "te"
	GroupedLegacy = "legacy"
	GroupedTurbo  = "turbo"
)

func orTE(g string) string {
	if g == "" {
		return GroupedTE
	}
	return g
}

func orAllToAll(d string) string {
	if d == "" {
		return DispatchAllToAll
	}
	return d
}

// validMoEOptions checks the dispatcher and all-to-all schedule names alone (plan options,
// flags), before any layout is built.
func validMoEOptions(dispatchers, overlaps []string) error {
	for _, d := range dispatchers {
		if d != "" && d != DispatchAllToAll && d != DispatchDeepEP && d != DispatchHybridEP {
			return fmt.Errorf("dispatcher %q: want alltoall, deepep or hybridep", d)
		}
	}
	for _, o := range overlaps {
		if o != "" && o != OverlapNone && o != Overlap1F1B && o != OverlapDualPipe {
			return fmt.Errorf("a2a overlap %q: want none, 1f1b or dualpipe", o)
		}
	}
	return nil
}

func (l Layout) validateMoE(fp analyzer.Fingerprint) error {
	dense := fp.MoE == nil && fp.Layers > 0
	switch {
	case dense && l.EP > 1:
		return fmt.Errorf("ep %d splits experts, and the model is dense (no routed experts)", l.EP)
	case dense && l.Dispatcher != "" && l.Dispatcher != DispatchAllToAll:
		return fmt.Errorf("dispatcher %s dispatches tokens to experts, and the model is dense (no routed experts)", l.Dispatcher)
	case dense && l.FusedGroupedMLP:
		return fmt.Errorf("fused grouped MLP fuses the routed experts' activation into their GEMMs, and the model is dense (no routed experts)")
	case dense && l.A2AOverlap != "" && l.A2AOverlap != OverlapNone:
		return fmt.Errorf("a2a overlap %s hides the experts' all-to-all, and the model is dense (no routed experts)", l.A2AOverlap)
	case l.Dispatcher != "" && l.Dispatcher != DispatchAllToAll && l.Dispatcher != DispatchDeepEP && l.Dispatcher != DispatchHybridEP:
		return fmt.Errorf("dispatcher %q: want alltoall, deepep or hybridep", l.Dispatcher)
	case l.A2AOverlap != "" && l.A2AOverlap != OverlapNone && l.A2AOverlap != Overlap1F1B && l.A2AOverlap != OverlapDualPipe:
		return fmt.Errorf("a2a overlap %q: want none, 1f1b or dualpipe", l.A2AOverlap)
	case l.A2AOverlap == OverlapDualPipe && (l.PP < 2 || l.PP%2 != 0 || l.VP > 1):
		return fmt.Errorf("dualpipe runs an even number of pipeline stages (pp %d) from both ends, without virtual stages (vp %d)", l.PP, l.VP)
	case l.A2AOverlap == OverlapDualPipe && l.GA()%2 != 0:
		return fmt.Errorf("dualpipe feeds micro-batches from both ends: gradient accumulation %d must be even", l.GA())
	case l.A2AOverlap == OverlapDualPipe && l.GA() < 2*l.PP:
		// dualpipe.py step() asserts num_chunks >= num_ranks * 2: each direction needs a
		// micro-batch per stage before its steady state
		return fmt.Errorf("dualpipe needs at least 2 x pp = %d micro-batches a step (gradient accumulation %d)", 2*l.PP, l.GA())
	case l.A2AOverlap == Overlap1F1B && l.Recompute == "full":
		return fmt.Errorf("1f1b all-to-all overlap runs without full recompute (Megatron asserts it)")
	case fp.MoE != nil && fp.MoE.MoELayers >= fp.Layers && strings.Contains(l.Recompute, "mlp"):
		// Megatron's recompute_mlp is set only on layers that are not MoE layers
		// (transformer_layer.py @d98e8a6): here it would recompute nothing
		return fmt.Errorf("recompute module mlp re-runs the dense layers' MLPs, and every layer of this model is an MoE layer: it recomputes nothing here (act re-runs the experts' activation; full the whole layer)")
	case dense && (l.GroupedGEMM != "" || l.SyncFreeMoE > 0):
		return fmt.Errorf("grouped gemm and sync-free MoE concern the routed experts, and the model is dense (no routed experts)")
	case l.GroupedGEMM != "" && l.GroupedGEMM != GroupedTE && l.GroupedGEMM != GroupedLegacy && l.GroupedGEMM != GroupedTurbo:
		return fmt.Errorf("grouped gemm %q: want te, legacy or turbo", l.GroupedGEMM)
	case (l.GroupedGEMM == GroupedTurbo || l.GroupedGEMM == GroupedLegacy || l.SyncFreeMoE > 0) && l.Framework != "" && l.Framework != Megatron:
		return fmt.Errorf("Megatron's legacy grouped GEMM, Primus-Turbo's and its sync-free MoE are Megatron's (Primus's Megatron backend): they need --framework megatron (the run is %s)", l.Framework)
	case l.SyncFreeMoE < 0 || l.SyncFreeMoE > 3:
		return fmt.Errorf("sync-free MoE stage %d: want 0 (off) to 3 (Primus's --turbo_sync_free_moe_stage)", l.SyncFreeMoE)
	case l.SyncFreeMoE >= 2 && l.GroupedGEMM != GroupedTurbo:
		// rocm_arg_validation.py: stages 2 and 3 turn on Turbo's grouped GEMM and refuse the legacy one
		return fmt.Errorf("sync-free MoE stage %d runs Primus-Turbo's grouped GEMM: it needs grouped gemm turbo (it is %s)", l.SyncFreeMoE, orTE(l.GroupedGEMM))
	case l.SyncFreeMoE >= 2 && l.Dispatcher != DispatchDeepEP:
		return fmt.Errorf("sync-free MoE stage %d dispatches with Primus-Turbo's DeepEP: it needs dispatcher deepep (it is %s)", l.SyncFreeMoE, orAllToAll(l.Dispatcher))
	case l.NoSwiGLUFusion && !fp.GatedMLP && fp.Layers > 0:
		return fmt.Errorf("no bias swiglu fusion unfuses a gated MLP's activation, and the model's MLP is not gated")
	case l.NoSwiGLUFusion && l.Framework != "" && l.Framework != Megatron:
		return fmt.Errorf("--no-bias-swiglu-fusion is Megatron's: it needs --framework megatron (the run is %s)", l.Framework)
	case l.FP8Dispatch && (l.Dispatcher != DispatchDeepEP || !l.lowPrecision()):
		// Megatron's HybridEP asserts it away (fused_a2a.py @d98e8a6: "does not support fp8
		// dispatch"); DeepEP takes FP8 tokens with their scales
		return fmt.Errorf("fp8 dispatch sends the forward dispatch in FP8 with 1x128 scales, as DeepEP takes them: it needs dispatcher deepep and an FP8 recipe (the run is %s, %s)", orAllToAll(l.Dispatcher), orBF16(l.Precision))
	case l.Routing != "" && l.Routing != RoutingUniform && l.Routing != RoutingEven:
		return fmt.Errorf("routing %q: want uniform or even", l.Routing)
	case dense && l.Routing != "":
		return fmt.Errorf("routing %s picks each token's experts, and the model is dense (no routed experts)", l.Routing)
	case l.Imbalance != 0 && (l.Imbalance < 1 || l.Imbalance > 64):
		return fmt.Errorf("moe imbalance %g: want the busiest rank's tokens over the mean, 1 to 64", l.Imbalance)
	}
	return nil
}

func (l Layout) imbalance() float64 {
	if l.Imbalance >= 1 {
		return l.Imbalance
	}
	return MoEImbalance
}

// A2A is one micro-batch's expert all-to-all on one GPU of a stage.
type A2A struct {
	// BytesPerLayer is what this GPU sends per MoE layer and micro-batch: dispatch and combine,
	// forward and backward.
	BytesPerLayer float64 `json:"bytes_per_layer"`
	// ScaleOutShare is the part of it that leaves the scale-up domain.
	ScaleOutShare float64 `json:"scale_out_share"`
	// Time is the stage's all-to-all time per micro-batch; Exposed what compute does not hide.
	Time    float64 `json:"time"`
	Exposed float64 `json:"exposed"`
}

// a2aTime is the stage's all-to-all per micro-batch: k is the analyzer's ep_all_to_all kernel
// (four per MoE layer and micro-batch over the whole model), moeLayers the stage's MoE layers.
func (tr *Trainer) a2aTime(l Layout, k kernels.Kernel, moeLayers float64, p kernels.Predictor) A2A {
	fp := tr.m.Fingerprint
	var a A2A
	if l.EP <= 1 || fp.MoE == nil || k.Count == 0 {
		return a
	}
	ep := float64(l.EP)
	domain := float64(max(tr.domain, 1))
	// EP peers inside this GPU's scale-up domain (the group spans EP x ETP consecutive ranks)
	intra := math.Min(ep, math.Max(1, math.Floor(domain/float64(l.etp()))))
	msg := k.Message * l.imbalance() // the full tensor of one all-to-all: tokens x top-k x hidden
	if l.TP > 1 && !l.NoSP {
		// sequence parallel: each TP rank dispatches its own S/TP tokens
		msg /= float64(l.TP)
	}
	fwdScale := 1.0
	dedup := l.Dispatcher == DispatchDeepEP || l.Dispatcher == DispatchHybridEP
	if l.FP8Dispatch {
		fwdScale = (1 + 1.0/128) / math.Max(tr.s.ActBytes, 2) // FP8 dispatch with 1x128 scales
	}
	// of the four all-to-alls per layer (dispatch and combine, forward and backward) the forward
	// dispatch may travel in FP8
	perLayer := msg * (3 + fwdScale)
	up := perLayer * (intra - 1) / ep
	out := perLayer * (ep - intra) / ep
	if dedup {
		// DeepEP and HybridEP send a token once to each rank holding any of its experts (the
		// dispatch's is_token_in_rank; the combine returns one partial sum per rank) and once
		// across to each other node it touches, where the scale-up links fan it out: of its
		// top-k copies, what leaves is the ranks and nodes its experts fall in (touchedGroups),
		// less this rank's and this node's own share
		topk := float64(fp.MoE.TopK)
		local := fp.MoE.RoutedExperts / max(l.EP, 1)
		ranks := touchedGroups(fp.MoE.RoutedExperts, fp.MoE.TopK, local, l.Routing)
		up = perLayer / topk * ranks * (intra - 1) / ep
		if ep > intra {
			nodes := ep / intra
			touched := touchedGroups(fp.MoE.RoutedExperts, fp.MoE.TopK, local*int64(intra), l.Routing)
			out = perLayer / topk * touched * (nodes - 1) / nodes
		}
	}
	a.BytesPerLayer = up + out
	if a.BytesPerLayer > 0 {
		a.ScaleOutShare = out / a.BytesPerLayer
	}
	// time both tiers as the predictor's collectives (its link efficiency and latency), as a
	// point-to-point volume each; they run concurrently
	t := func(bytes float64, tier kernels.Tier) float64 {
		if bytes <= 0 {
			return 0
		}
		return p.Predict([]kernels.Kernel{{Name: "ep_all_to_all", Category: "network", Kind: kernels.Collective, Coll: kernels.P2P,
			Count: 4, Ranks: 2, Message: bytes / 4, Tier: tier, Exposed: 1}}).TEst
	}
	a.Time = moeLayers * math.Max(t(up, kernels.ScaleUp), t(out, kernels.ScaleOut))
	return a
}

// lowPrecision says whether the recipe runs the GEMMs below 16 bits.
func (l Layout) lowPrecision() bool {
	switch l.precision() {
	case "bf16", "fp16":
		return false
	}
	return true
}

// overlapA2A is the exposed all-to-all of one micro-batch given the stage's compute: under 1f1b
// and dualpipe the all-to-all of one micro-batch runs beside another's computation. The
// all-to-all's kernels hold some of the chip's sms while they run, and the computation beside
// them runs on the rest: for the a2a seconds of the overlap the computation advances at
// (1 - share), so the pair takes max(a2a, compute + share x a2a) and the exposed part is
// max(a2a - compute, share x a2a). No overlap hides it all.
//
// Megatron's 1f1b run eagerly (no CUDA graph) hides three of the four: each layer's forward
// dispatch is followed by a host-device synchronization (the token counts per rank and expert
// are copied to the host: the dispatcher's cuda_sync_point "before_ep_alltoall", and the
// grouped GEMM's tokens_per_expert.tolist(), moe/token_dispatcher.py and moe/experts.py
// @d98e8a6), so the host issues nothing beside that all-to-all and it runs alone; the
// combine and the backward's two reuse the counts and overlap. A CUDA graph cannot hold a
// synchronization, so a graphed layer's dispatch is sync-free and all four overlap. Measured
// pairs of the same layout with and without 1f1b, eager (Megatron-Bridge 26.02/26.02.01,
// 26.04/26.04.01): +2% (Qwen3-235B-A22B, B300), -4% (GPT-OSS-120B, GB200), -44%
// (Qwen3-30B-A3B, H100, host-bound: not explained here); with graphs (26.06 over 26.04)
// +17-56%.
func (l Layout) overlapA2A(a2a, compute, sms float64) float64 {
	switch l.A2AOverlap {
	case Overlap1F1B, OverlapDualPipe:
		share := 0.0
		if sms > 0 {
			share = math.Min(1, l.commSMs()/sms)
		}
		alone := 0.0
		if l.A2AOverlap == Overlap1F1B && !l.CUDAGraph {
			alone = a2a / 4 // the forward dispatch, after the host's synchronization
		}
		rest := a2a - alone
		return alone + math.Max(rest-compute, share*rest)
	}
	return a2a
}

// SMs the expert all-to-all's kernels occupy while they run:
//   - NCCL's all-to-all is grouped send/recv, one thread block per p2p channel, and NCCL opens
//     32 p2p channels on NVLink systems (its INFO line at init: "32 p2p channels, 32 p2p
//     channels per peer");
//   - DeepEP's kernels take moe_deepep_num_sms, historically 20 (Megatron-LM
//     transformer_config.py @d98e8a6);
//   - HybridEP's take 32 in Megatron-Bridge's performance runs (scripts/performance/utils/
//     overrides.py _set_common_perf_overrides, moe_hybridep_num_sms = 32, v0.4.1).
const (
	ncclP2PChannels = 32
	deepEPSMs       = 20
	hybridEPSMs     = 32
)

func (l Layout) commSMs() float64 {
	switch l.Dispatcher {
	case DispatchDeepEP:
		return deepEPSMs
	case DispatchHybridEP:
		return hybridEPSMs
	}
	return ncclP2PChannels
}

// DualPipeBubble is the DeepSeek-V3 report's DualPipe bubble, (PP/2 - 1)(F&B + B - 3W): F the
// forward of a chunk, B its input backward, W its weight backward, F&B a forward and backward
// pair run together (the longer of the two plus what does not overlap).
func DualPipeBubble(pp int64, f, b, w, fb float64) float64 {
	if pp < 2 {
		return 0
	}
	return math.Max(0, float64(pp/2-1)*(fb+b-3*w))
}

// OneFOneBBubble is 1F1B's bubble, (PP - 1)(F + B) over VP virtual stages (Narayanan et al.
// 2021; the DeepSeek-V3 report's Table 2 writes B for the whole backward).
func OneFOneBBubble(pp, vp int64, microbatch float64) float64 {
	return float64(pp-1) / float64(max(vp, 1)) * microbatch
}

// Kernels the host issues per MoE layer in eager Megatron (the counts behind MoELaunchUs):
// the router (gate GEMM, score function, top-k, normalisation, the load-balancing loss or
// expert bias), the token permutation and its index bookkeeping, the tokens-per-expert copy to
// the host, the unpermutation and combine, about MoEFixedLaunches per pass; and per local
// expert, Transformer Engine's GroupedLinear issues one GEMM per expert and linear layer (two
// in the forward, dgrad and wgrad for each in the backward) and, under an FP8 recipe, a
// quantization of each expert's input and output gradient.
const (
	MoEFixedLaunches = 30
	moeFwdPerExpert  = 2
	moeBwdPerExpert  = 4
	moeCastPerExpert = 2 // per pass, FP8/FP4 recipes
)

// HostRemedy is what removes an eager MoE layer's host pace on a vendor's stack, as a sentence's
// clause: on NVIDIA, Megatron's full-iteration CUDA graph, which mrep models (--cuda-graph); on
// AMD Instinct, Primus-Turbo's grouped GEMM, one launch for all a rank's experts, and its
// sync-free MoE from stage 2, which drops the layer's device-to-host synchronizations (AMD's
// moe_package README names them as what stalls its launches, and its MI355X runs gain from it):
// mrep times both (Layout.GroupedGEMM, Layout.SyncFreeMoE).
func HostRemedy(vendor string) string {
	if strings.EqualFold(vendor, "AMD") {
		return "on ROCm, Primus-Turbo's grouped GEMM issues all a rank's experts in one launch (`--grouped-gemm turbo`), and its sync-free MoE from stage 2 drops the layers' device-to-host synchronizations (`--sync-free-moe 2 --grouped-gemm turbo --dispatcher deepep`: Primus's --turbo_sync_free_moe_stage 2)"
	}
	return "a full-iteration CUDA graph (`--cuda-graph`: Megatron's --cuda-graph-impl full_iteration, with static expert shapes) replays the step without it"
}

// moeSyncedFixed is how many of a forward's MoEFixedLaunches come after the layer's
// device-to-host synchronization: the permutation, the dispatch and its index bookkeeping, the
// unpermutation and the combine; the router's (gate, score, top-k, normalisation, auxiliary loss)
// come before it.
const moeSyncedFixed = 15

// MoELaunches is the kernels the host issues for one MoE layer's forward, backward and (full
// recompute) recomputed forward of one micro-batch.
func (l Layout) MoELaunches(fp analyzer.Fingerprint) float64 {
	ph := l.moeLaunchPhases(fp)
	return ph.forwards*(ph.experts+ph.router) + ph.backward
}

// moeLaunches are one MoE layer's host launches by where its forward synchronizes (see
// moeHostPace): a forward's experts phase (after the tokens-per-expert copy to the host) and
// router phase (before it), how many forwards a micro-batch runs (two under full recompute: the
// recomputed one synchronizes too), and the backward's.
type moeLaunches struct {
	experts, router, forwards, backward float64
	// syncFree: no forward copies its counts to the host (Layout.SyncFreeMoE from stage 2).
	syncFree bool
}

func (l Layout) moeLaunchPhases(fp analyzer.Fingerprint) moeLaunches {
	if fp.MoE == nil {
		return moeLaunches{}
	}
	local := float64(fp.MoE.RoutedExperts) / float64(max(l.EP, 1))
	if l.GroupedGEMM == GroupedTurbo {
		local = 1 // one launch per linear (and cast) for all the rank's experts
	}
	fwd, bwd := float64(moeFwdPerExpert), float64(moeBwdPerExpert)
	if l.lowPrecision() && !l.LegacyExperts16() {
		fwd += moeCastPerExpert
		bwd += moeCastPerExpert
	}
	ph := moeLaunches{experts: moeSyncedFixed + local*fwd, router: MoEFixedLaunches - moeSyncedFixed,
		forwards: 1, backward: MoEFixedLaunches + local*bwd, syncFree: l.SyncFreeMoE >= 2}
	if l.Recompute == "full" {
		ph.forwards = 2
	}
	return ph
}
