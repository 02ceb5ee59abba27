package analyzer

import (
	"fmt"
	"sort"
	"strings"
)

// Recompute is an activation-recomputation mode as the frameworks define it. Time (the extra
// forward work) and memory (the activations not kept) both read it, so a plan's step time and
// its memory verdict always assume the same mode.
//
//   - none: every activation the backward needs is kept.
//   - selective: Megatron's default --recompute-modules, core_attn (the attention core is re-run;
//     with flash attention its internals were never kept, so memory is as none).
//   - selective:MOD[,MOD]: Megatron's --recompute-modules, MOD in core_attn, mlp (a dense
//     layer's whole MLP keeps only its input; Megatron applies it to dense layers only, an MoE
//     layer being its "moe" module: transformer_layer.py sets recompute_mlp only when the layer
//     is not an MoE layer, @d98e8a6), layernorm (the norms' outputs are dropped), act (moe_act:
//     the activation function's output is dropped), mla_up_proj (MLA's query and key/value
//     up-projections are re-run from the kept latents, so the per-head q, k and v are not kept).
//   - op: torchtitan's per-op selective checkpointing (ac mode "selective", option "op"): the
//     output of every other matmul and of attention is kept, elementwise ops are re-run.
//   - full: each layer keeps its input only and re-runs its forward in the backward.
type Recompute struct {
	Mode    string          // none, selective, op or full
	Modules map[string]bool // selective's modules
}

// RecomputeModules are the modules a selective mode may name.
var RecomputeModules = []string{"core_attn", "mlp", "layernorm", "act", "mla_up_proj"}

// ParseRecompute reads a recompute mode ("" is none).
func ParseRecompute(s string) (Recompute, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "", "none":
		return Recompute{Mode: "none"}, nil
	case "selective":
		return Recompute{Mode: "selective", Modules: map[string]bool{"core_attn": true}}, nil
	case "op", "full":
		return Recompute{Mode: s}, nil
	}
	if rest, ok := strings.CutPrefix(s, "selective:"); ok {
		r := Recompute{Mode: "selective", Modules: map[string]bool{}}
		for _, m := range strings.Split(rest, ",") {
			m = strings.TrimSpace(m)
			if m == "moe_act" {
				m = "act"
			}
			known := false
			for _, k := range RecomputeModules {
				known = known || k == m
			}
			if !known {
				return r, fmt.Errorf("recompute module %q: want %s", m, strings.Join(RecomputeModules, ", "))
			}
			r.Modules[m] = true
		}
		return r, nil
	}
	return Recompute{}, fmt.Errorf("recompute must be none, selective, selective:MOD[,MOD] (%s), op or full, got %q", strings.Join(RecomputeModules, ", "), s)
}

// String is the mode as ParseRecompute reads it.
func (r Recompute) String() string {
	if r.Mode != "selective" || (len(r.Modules) == 1 && r.Modules["core_attn"]) {
		return r.Mode
	}
	var ms []string
	for m := range r.Modules {
		ms = append(ms, m)
	}
	sort.Strings(ms)
	return "selective:" + strings.Join(ms, ",")
}

// rerun is the share of op's forward the mode runs again in the backward (core attention
// under selective is costed by its own recompute kernels, not here).
func (r Recompute) rerun(op Op) float64 {
	switch r.Mode {
	case "full":
		return 1
	case "op":
		switch op.Kind {
		case OpGEMM, OpExperts:
			return 0.5 // every other matmul's output is kept
		case OpElementwise:
			return 1
		}
	case "selective":
		switch {
		case r.Modules["mlp"] && op.Category == CatDenseFFN:
			return 1
		case r.Modules["layernorm"] && op.Category == CatNorm:
			return 1
		case r.Modules["act"] && op.Name == "mlp_activation":
			return 1
		case r.Modules["mla_up_proj"] && isMLAUpProj(op):
			return 1
		}
	}
	return 0
}

// isMLAUpProj says whether op is one of MLA's up-projections (DeepSeek's q_b_proj and
// kv_b_proj; Megatron's linear_q_up_proj and linear_kv_up_proj).
func isMLAUpProj(op Op) bool {
	n := op.Module
	if n == "" {
		n = op.Name
	}
	return strings.HasSuffix(n, "q_b_proj") || strings.HasSuffix(n, "kv_b_proj") || strings.Contains(n, "up_proj") && strings.Contains(n, "linear_")
}
