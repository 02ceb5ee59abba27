package layout

import (
	"fmt"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
)

// Saver is one setting a training framework offers to fit a step into memory, as its name and
// the flags that set it, with the layout it makes.
type Saver struct {
	Name   string `json:"setting"`
	Flags  string `json:"flags"`
	Layout Layout `json:"-"`
}

// MemorySavers are the settings l's framework offers to fit a step of the model fp into
// memory, each alone and recompute with the pipeline split. Megatron's: the embedding and loss
// counted in the pipeline split; some layers' activations offloaded to host memory
// (--cpu-offloading-num-layers, which Megatron allows only without pipelining or recompute, on
// fewer layers than the model's: TransformerConfig @d98e8a6), in eighths of the layers;
// selective recompute of its default (core attention) or of a set of modules
// (--recompute-modules takes a list; the performance recipes combine up to three), or full
// recompute. Other frameworks': recompute. What a published run leaves unstated is
// most often one of them.
func MemorySavers(l Layout, fp analyzer.Fingerprint) []Saver {
	layers := fp.Layers
	megatron := l.framework() == Megatron
	bases := []Saver{{Layout: l}}
	if megatron && l.PP > 1 && !l.EmbeddingInPipe && !l.LossInPipe && l.FirstStageLayers == 0 && l.LastStageLayers == 0 {
		p := l
		p.EmbeddingInPipe, p.LossInPipe = true, true
		bases = append(bases, Saver{"the embedding and loss counted in the pipeline split", "--pipeline-account", p})
	}
	join := func(a, b string) string {
		if a == "" {
			return b
		}
		return a + ", " + b
	}
	rcs := []string{"selective"}
	var mods []string
	for _, m := range analyzer.RecomputeModules {
		// Megatron's activation recompute is the MoE layer's (moe_act), its MLP recompute the
		// dense layers' (none in an all-MoE model), MLA's up-projection needs MLA
		allMoE := fp.MoE != nil && fp.MoE.MoELayers >= fp.Layers
		if m == "core_attn" || m == "act" && fp.MoE == nil || m == "mla_up_proj" && fp.MLA == nil || m == "mlp" && allMoE {
			continue
		}
		mods = append(mods, m)
	}
	// --recompute-modules takes a list: every set of the modules the model has (mlp and act
	// together only in an MoE model with dense layers: the dense MLPs and the experts'
	// activations), the single ones first
	for size := 1; size <= len(mods); size++ {
		for mask := 1; mask < 1<<len(mods); mask++ {
			var set []string
			for i, m := range mods {
				if mask&(1<<i) != 0 {
					set = append(set, m)
				}
			}
			if len(set) != size {
				continue
			}
			rcs = append(rcs, "selective:"+strings.Join(set, ","))
		}
	}
	rcs = append(rcs, "full")
	var out []Saver
	for _, base := range bases {
		if base.Name != "" {
			out = append(out, base)
		}
		for _, rc := range rcs {
			if l.Recompute == rc || (rc != "full" && l.Recompute == "full") {
				continue
			}
			v := base.Layout
			v.Recompute = rc
			out = append(out, Saver{join(base.Name, "recompute "+rc), join(base.Flags, "--recompute "+rc), v})
		}
		if base.Name == "" {
			for _, v := range offloadSteps(l, layers) {
				n := v.OffloadActivations
				what := fmt.Sprintf("activations of %d layers", n)
				if n == 1 {
					what = "activations of 1 layer"
				}
				out = append(out, Saver{what + " offloaded to host", fmt.Sprintf("--offload-activations %d", n), v})
			}
		}
	}
	return out
}

// FastestFitting is the fastest of MemorySavers(l) that fits in capacity bytes per GPU and its
// step; ok is false when none does.
func (tr *Trainer) FastestFitting(l Layout, capacity float64) (Saver, Step, bool, error) {
	var best Saver
	var bestStep Step
	found := false
	for _, sv := range MemorySavers(l, tr.m.Fingerprint) {
		if sv.Layout.Validate(tr.m.Fingerprint) != nil || !CheckTraining("training", TrainingMemory(tr.m, sv.Layout), capacity).Fits {
			continue
		}
		st, err := tr.Train(sv.Layout)
		if err != nil {
			return best, bestStep, false, err
		}
		if !found || st.StepTime < bestStep.StepTime {
			best, bestStep, found = sv, st, true
		}
	}
	return best, bestStep, found, nil
}

// offloadSteps are l with Megatron's CPU activation offload on eighths of the layers, fewest
// first, where Megatron allows it: l offloads nothing yet, runs Megatron without pipelining or
// recompute, and fewer layers than the model's are offloaded (TransformerConfig @d98e8a6).
func offloadSteps(l Layout, layers int64) []Layout {
	if l.framework() != Megatron || l.OffloadActivations != 0 || l.PP > 1 || l.Recompute != "" && l.Recompute != "none" {
		return nil
	}
	var out []Layout
	for k := int64(1); k <= 8; k++ {
		n := min((layers*k+7)/8, layers-1)
		if n < 1 || len(out) > 0 && out[len(out)-1].OffloadActivations == n {
			continue
		}
		v := l
		v.OffloadActivations = n
		out = append(out, v)
	}
	return out
}
