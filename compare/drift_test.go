package compare

import (
	"math"
	"testing"

	"github.com/mrep-dev/mrep/model"
)

func TestDriftKind(t *testing.T) {
	for name, want := range map[string]string{
		"model.layers.0.self_attn.q_proj.weight":         "attention",
		"model.layers.0.post_attention_layernorm.weight": "norm",
		"transformer.h.0.ln_1.bias":                      "norm",
		"transformer.h.0.attn.c_attn.bias":               "bias",
		"transformer.h.0.mlp.c_fc.weight":                "mlp",
		"model.embed_tokens.weight":                      "embedding",
		"lm_head.weight":                                 "embedding",
		"encoder.layer.0.attention.output.dense.weight":  "attention",
		"layers.0.feed_forward.w1.weight":                "mlp",
		"conv1.weight":                                   "other",
		"bn1.weight":                                     "norm",
		"model.layers.3.mlp.experts.gate_up_proj":        "mlp",
	} {
		if got := DriftKind(name, ""); got != want {
			t.Errorf("DriftKind(%q) = %s, want %s", name, got, want)
		}
	}
}

// Sketch drift is ||sb - sa|| / ||A||, exact for a tensor that is its own sketch; a zero
// baseline gives an absolute change, ranked after the relative ones; dumps without sketches
// fall back to the stats proxy; groups are one vector.
func TestWeightDriftFromSketches(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	a := []model.TensorStat{
		{Name: "mlp.fc.weight", Numel: 4, Mean: 0, Std: 1, Norm: f(2), Sketch: []float64{1, -1, 1, -1}},
		{Name: "mlp.fc.bias", Numel: 2, Norm: f(0), Sketch: []float64{0, 0}},
		{Name: "ln.weight", Numel: 2, Mean: 1, Std: 0},
	}
	b := []model.TensorStat{
		{Name: "mlp.fc.weight", Numel: 4, Mean: 0, Std: 1, Norm: f(2.2), Sketch: []float64{1.3, -1, 1, -0.6}},
		{Name: "mlp.fc.bias", Numel: 2, Norm: f(0.5), Sketch: []float64{0.3, 0.4}},
		{Name: "ln.weight", Numel: 2, Mean: 1.1, Std: 0},
	}
	ds := WeightDrift(a, b)
	if len(ds) != 3 || ds[0].Name != "mlp.fc.weight" || ds[1].Name != "ln.weight" || ds[2].Name != "mlp.fc.bias" {
		t.Fatalf("order %+v", ds)
	}
	if w := ds[0]; w.Method != "exact" || math.Abs(w.RelChange-0.25) > 1e-12 || math.Abs(w.AbsChange-0.5) > 1e-12 {
		t.Errorf("weight: %+v, want exact 0.5/2 = 0.25", w)
	}
	if bias := ds[2]; !bias.ZeroBaseline || bias.RelChange != 0 || math.Abs(bias.AbsChange-0.5) > 1e-12 {
		t.Errorf("zero-init bias: %+v, want absolute change 0.5", bias)
	}
	if ln := ds[1]; ln.Method != "stats" || math.Abs(ln.RelChange-0.1) > 1e-12 || ln.Kind != "norm" {
		t.Errorf("norm without sketches: %+v, want the stats proxy 0.1", ln)
	}
	// the MLP as one vector: sqrt(0.5^2 + 0.5^2) / sqrt(2^2 + 0^2)
	rel, n := PatternDrift(ds, "mlp")
	if n != 2 || math.Abs(rel-math.Sqrt(0.5)/2) > 1e-12 {
		t.Errorf("PatternDrift(mlp) = %g over %d", rel, n)
	}
}
