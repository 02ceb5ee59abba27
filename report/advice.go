package report

import (
	"fmt"
	"math"
	"sort"

	"github.com/mrep-dev/mrep/analyzer"
)

// TermCost is the cost of a step's term by name (forward, backward, optimizer...), zero when the
// step has no such term.
func TermCost(st analyzer.Step, name string) analyzer.Cost {
	for _, t := range st.Terms {
		if t.Name == name {
			return t.Cost
		}
	}
	return analyzer.Cost{}
}

// Largest is the category holding the most parameters, and its share of them.
func Largest(m *analyzer.Model) (analyzer.Category, float64) {
	var best analyzer.Category
	var n int64
	for _, c := range analyzer.Categories {
		if m.Params[c] > n {
			best, n = c, m.Params[c]
		}
	}
	return best, float64(n) / math.Max(1, float64(m.TotalParams))
}

// nextOptimizations (Data.Advice) applies the byte dominance rules to decode and prefill and the regimes to
// training, in order of how much of the step the targeted term holds.
func nextOptimizations(r Data) []string {
	p := r.Analysis.Profiles[len(r.Analysis.Profiles)-1].Name
	res := func(ph analyzer.Phase, profile string) (analyzer.Result, bool) {
		return r.Analysis.Find(r.Primary.Label(), ph, profile)
	}
	type cand struct {
		weight float64
		text   string
	}
	var cs []cand
	dec, _ := res(analyzer.Decode, p)
	ds := analyzer.ByteShares(dec.Step.Cost)
	if ds.Weights > 0.7 {
		spread := "and split the weights over more GPUs (`--tp`) so each streams fewer"
		if r.Model.Fingerprint.MoE != nil {
			spread = "and spread experts (EP) so each GPU streams fewer"
		}
		cs = append(cs, cand{ds.Weights, fmt.Sprintf("Decode is weight-stream bound (weights are %.1f%% of decode bytes): batch toward `B_crit`, quantize weights (the knob is `--weight-dtype`), %s.", 100*ds.Weights, spread)})
	}
	if ds.Activations > 0.3 {
		cs = append(cs, cand{ds.Activations, fmt.Sprintf("Activations are %.1f%% of decode bytes: fuse GEMM epilogues and keep intermediate tensors on chip (`act fusion`).", 100*ds.Activations)})
	}
	if ds.KV > 0.3 {
		cs = append(cs, cand{ds.KV, fmt.Sprintf("Decode KV reads are %.1f%% of decode bytes and grow with `L`: use a smaller KV dtype (`--kv-dtype`), paged or compressed KV, or fewer KV heads.", 100*ds.KV)})
	}
	if n, ok := res(analyzer.Prefill, r.Analysis.Profiles[0].Name); ok {
		ns := analyzer.ByteShares(n.Step.Cost)
		if ns.Temporary > 0.05 {
			cs = append(cs, cand{ns.Temporary, fmt.Sprintf("Naive prefill spends %.1f%% of bytes on score/prob and elementwise temporaries: flash-style attention and fused elementwise kernels remove most of them.", 100*ns.Temporary)})
		}
	}
	if pre, ok := res(analyzer.Prefill, p); ok && pre.Timing.Regime == "compute-bound" {
		cs = append(cs, cand{0.5 * pre.Timing.MFU, fmt.Sprintf("Prefill is compute-bound (`MFU_est` %.2f, compute at %.0f%% of peak): keep GEMMs large and well-shaped (tile and wave quantization cost the rest) and fuse what is left of the elementwise path.", pre.Timing.MFU, 100*pre.Timing.EtaTC)})
	}
	if tr, ok := res(analyzer.Training, p); ok {
		opt := TermCost(tr.Step, "optimizer")
		if s := Share(opt.BytesHBM(), tr.Step.Cost.BytesHBM()); s > 0.3 {
			cs = append(cs, cand{s, fmt.Sprintf("Training moves %.1f%% of its bytes in the optimizer step: accumulate gradients over more microbatches (`--grad-accum`) or shard optimizer state across data-parallel ranks.", 100*s)})
		}
		if tr.Timing.Regime == "net-bound" {
			par := "TP" // a dense model has no expert all-to-all to tune
			if r.Model.Fingerprint.MoE != nil {
				par = "TP/EP"
			}
			cs = append(cs, cand{1, fmt.Sprintf("Training is network-bound: overlap %s collectives with compute, or reduce the %s degree.", par, par)})
		}
	}
	for _, res := range r.Analysis.Results {
		if res.Timing.Regime == "net-bound" && res.Target == r.Primary.Label() {
			cs = append(cs, cand{0.9, fmt.Sprintf("`%s` is network-bound (%s ms on the wire): overlap dispatch with compute or compress activations in flight.", res.Step.Phase, fmt.Sprintf("%.3f", res.Timing.TNet*1e3))})
			break
		}
	}
	cs = append(cs, cand{0.01, "Serve decode with a batching policy aimed at `B_crit` under the latency budget, rather than at peak TFLOP/s."},
		cand{0.005, "Measure: profile HBM bytes per step and tune the exec profile (WRF, fusion) to the counters, then regenerate this report."})
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].weight > cs[j].weight })
	var out []string
	seen := map[string]bool{}
	for _, c := range cs {
		if !seen[c.text] && len(out) < 3 {
			out = append(out, c.text)
			seen[c.text] = true
		}
	}
	return out
}
