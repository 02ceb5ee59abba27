package layout

import (
	"fmt"
	"strings"
)

// Spec is a training layout as a user states it (analyze's flags): the degrees, batches and
// recompute given, 0 for those left to their defaults. Layout fills the defaults, so every
// command that takes a layout from a user fills them the same way.
type Spec struct {
	TP, PP, VP, CP, DP, EP, ETP int64
	// GPUs, when given, sets DP = GPUs / (TP x PP x CP); a DP given too (DPSet) must agree.
	GPUs  int64
	DPSet bool
	// MBS defaults to Batch (the scenario's sequences per step); GBS to MBS x DP x GradAccum.
	MBS, GBS, Batch, GradAccum int64
	Seq                        int64
	// ZeRO is the stage over DP when ZeROSet; unset, it is 1 (the distributed optimizer), or 3
	// under FSDP (which always shards its parameters).
	ZeRO            int
	ZeROSet         bool
	Recompute       string
	RecomputeLayers int64
	NoSP            bool
	// FirstStageLayers and LastStageLayers: an uneven pipeline split (Layout's).
	FirstStageLayers, LastStageLayers int64
}

// Layout is the spec with its defaults and the framework knobs k applied.
func (s Spec) Layout(k Knobs) (Layout, error) {
	zero := 1
	if s.ZeROSet {
		zero = s.ZeRO
	}
	l := Layout{TP: s.TP, PP: s.PP, VP: s.VP, CP: s.CP, DP: s.DP, EP: s.EP, ETP: s.ETP, MBS: s.MBS, GBS: s.GBS, Seq: s.Seq,
		ZeRO: zero, Recompute: s.Recompute, NoSP: s.NoSP, RecomputeLayers: s.RecomputeLayers,
		FirstStageLayers: s.FirstStageLayers, LastStageLayers: s.LastStageLayers}
	l.DistOptimizer = l.ZeRO >= 1
	l = k.Apply(l)
	if l.Framework == FSDP && !s.ZeROSet {
		l.ZeRO = 3
	}
	if l.MBS == 0 {
		l.MBS = s.Batch
	}
	if s.GPUs > 0 {
		per := l.TP * max(l.PP, 1) * max(l.CP, 1)
		if per <= 0 || s.GPUs%per != 0 {
			return l, fmt.Errorf("--gpus %d is not a multiple of TP x PP x CP = %d x %d x %d", s.GPUs, l.TP, l.PP, l.CP)
		}
		if s.DPSet && s.DP != s.GPUs/per {
			return l, fmt.Errorf("--gpus %d and --dp %d disagree: TP x PP x CP x DP = %d x %d x %d x %d is %d GPUs; give one of them", s.GPUs, s.DP, l.TP, max(l.PP, 1), max(l.CP, 1), s.DP, per*s.DP)
		}
		l.DP = s.GPUs / per
	}
	if err := contradictions(l, s, k); err != nil {
		return l, err
	}
	if l.GBS == 0 {
		l.GBS = l.MBS * l.DP * max(s.GradAccum, 1)
	}
	return l, nil
}

// fp8AttentionRecipes are the recipes Megatron hands fp8_dot_product_attention to Transformer
// Engine with (megatron/core/fp8_utils.py: Float8CurrentScaling and MXFP8BlockScaling take
// fp8_dpa, DelayedScaling reads it from the config; Float8BlockScaling takes none).
var fp8AttentionRecipes = map[string]bool{"fp8": true, "fp8-ds": true, "fp8-cs": true, "mxfp8": true}

// contradictions refuses settings that say two things at once, which would otherwise be timed as
// one of them without a word.
func contradictions(l Layout, s Spec, k Knobs) error {
	fsdp := l.Framework == FSDP
	switch {
	case s.RecomputeLayers > 0 && l.Recompute != "full":
		return fmt.Errorf("--recompute-layers %d counts fully recomputed layers: it needs --recompute full (it is %q)", s.RecomputeLayers, l.Recompute)
	case k.FP8ParamGather && !strings.HasPrefix(l.Precision, "fp8") && l.Precision != "mxfp8":
		return fmt.Errorf("--fp8-param-gather gathers FP8 parameters: it needs --dtype fp8 (the run is %s)", orBF16(l.Precision))
	case k.FP8OutputProj && (l.Precision != "mxfp8" || fsdp):
		return fmt.Errorf("--fp8-output-proj puts Megatron's LM head under MXFP8: it needs --framework megatron and --recipe mxfp8 (the run is %s, %s)", orMegatron(l.Framework), orBF16(l.Precision))
	case k.FP8Attention && (fsdp || l.Framework == DeepSpeed || !fp8AttentionRecipes[l.Precision]):
		return fmt.Errorf("--fp8-dot-product-attention runs Megatron's attention in the recipe's FP8: it needs --framework megatron and --recipe fp8-cs, fp8-ds or mxfp8, the recipes Megatron passes it to Transformer Engine for (the run is %s, %s)", orMegatron(l.Framework), orBF16(l.Precision))
	case k.FusedGroupedMLP && (fsdp || l.Framework == DeepSpeed):
		return fmt.Errorf("--fused-grouped-mlp is Megatron's fused expert MLP (Transformer Engine's CuTe DSL kernels): it needs --framework megatron (the run is %s)", l.Framework)
	case k.Replicas > 1 && !fsdp && l.Framework != DeepSpeed:
		return fmt.Errorf("--hsdp-replicas %d is FSDP's hybrid sharding: it needs --framework fsdp (%s replicates by its DP groups)", k.Replicas, orMegatron(l.Framework))
	case k.NoReshard && !fsdp:
		return fmt.Errorf("--no-reshard is FSDP's reshard_after_forward=False: it needs --framework fsdp (%s does not reshard)", orMegatron(l.Framework))
	case k.OffloadParams && s.ZeROSet && s.ZeRO < 3:
		return fmt.Errorf("--offload params streams ZeRO-3's parameter shards from host memory (ZeRO-Infinity): it needs --zero 3 (--zero %d keeps every parameter whole on each GPU)", s.ZeRO)
	case fsdp && s.ZeROSet && s.ZeRO < 2:
		return fmt.Errorf("--framework fsdp --zero %d: FSDP shards gradients and optimizer state, at least (ZeRO-3 by default; ZeRO-2's with --no-reshard)", s.ZeRO)
	}
	return nil
}

func orBF16(p string) string {
	if p == "" {
		return "bf16"
	}
	return p
}

func orMegatron(f string) string {
	if f == "" {
		return Megatron
	}
	return f
}
