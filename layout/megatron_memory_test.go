package layout

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/mrep-dev/mrep/timing"
)

// megatronEstimate is one configuration of calib/testdata/megatron_theoretical_memory.json:
// Megatron-LM's own memory estimator (megatron/training/theoretical_memory_usage.py @d98e8a6,
// run on these inputs by calib/sources/megatron_memory.py; its numbers, not its code).
type megatronEstimate struct {
	Model  string `json:"model"`
	Inputs struct {
		TP, PP, DP, MBS, Microbatches, Seq int64
		VP                                 *int64 `json:"vp"`
		DistOpt                            bool   `json:"use_distributed_optimizer"`
		Layers                             int64  `json:"num_layers"`
	} `json:"inputs"`
	WeightsAndOptimizer float64 `json:"weight_and_optimizer_bytes"`
	Activations         float64 `json:"activation_bytes"`
	Intermediates       struct {
		Params        float64 `json:"params_on_most_loaded_shard"`
		BytesPerParam float64 `json:"bytes_per_param"`
		PerLayer      float64 `json:"activation_bytes_per_layer_per_tp_rank"`
		LayerEquiv    float64 `json:"activation_layer_equivalents"`
	} `json:"intermediates"`
}

func (e *megatronEstimate) UnmarshalJSON(b []byte) error {
	type plain megatronEstimate
	var raw struct {
		plain
		In map[string]any `json:"inputs"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*e = megatronEstimate(raw.plain)
	n := func(k string) int64 { f, _ := raw.In[k].(float64); return int64(f) }
	e.Inputs.TP, e.Inputs.PP, e.Inputs.DP = n("tp"), n("pp"), n("dp")
	e.Inputs.MBS, e.Inputs.Microbatches, e.Inputs.Seq = n("micro_batch_size"), n("num_microbatches"), n("seq_length")
	e.Inputs.Layers = n("num_layers")
	if v, ok := raw.In["vp"].(float64); ok {
		vp := int64(v)
		e.Inputs.VP = &vp
	}
	e.Inputs.DistOpt, _ = raw.In["use_distributed_optimizer"].(bool)
	return nil
}

var zooOf = map[string]string{"Llama-3.1-8B": "Llama-3.1-8B", "Llama-3.1-70B": "Llama-3.1-70B-Instruct", "Llama-3.1-405B": "Llama-3.1-405B"}

// mrep's training memory against Megatron's own estimator, term by term, on Llama 3.1 8B, 70B
// and 405B under eleven layouts (selective recompute with sequence parallel, the estimator's
// assumption). Exact where the two count the same thing: bytes per parameter with and without
// the distributed optimizer (18, 6 + 12/DP), the parameters of an unpipelined GPU, the logits
// and loss term, and the micro-batches in flight on the first stage (1F1B's PP, the interleaved
// schedule's 1 + (PP-1)/(PP x VP)). The per-layer activations differ by design, within a band
// this test pins: the estimator keeps Korthikanti's sbh(18 + 4·ffn/h) for every model (full-size
// K and V, a GeLU MLP's intermediates, two dropout masks), where mrep counts Llama's GQA K/V
// (1/8 of Q), SwiGLU's gate, up and product, and no dropout.
func TestMemoryAgainstMegatronEstimator(t *testing.T) {
	raw, err := os.ReadFile("../calib/testdata/megatron_theoretical_memory.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Configs []megatronEstimate `json:"configs"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Configs) != 11 {
		t.Fatalf("%d configurations, want the 11 the script writes", len(file.Configs))
	}
	models := map[string]*analyzer.Model{}
	for _, e := range file.Configs {
		in := e.Inputs
		m := models[e.Model]
		if m == nil {
			m = zooModel(t, zooOf[e.Model])
			models[e.Model] = m
		}
		vp := int64(1)
		if in.VP != nil {
			vp = *in.VP
		}
		l := Layout{TP: in.TP, PP: in.PP, VP: vp, CP: 1, DP: in.DP, EP: 1, MBS: in.MBS, GBS: in.MBS * in.DP * in.Microbatches, Seq: in.Seq,
			DistOptimizer: in.DistOpt, Recompute: "selective", Framework: Megatron}
		name := e.Model + " " + l.String()
		mem := stageMemory(m, l, true)
		sp := paramsOnStage(m, l, true)
		// bytes per parameter: weights, fp32 gradients, master weights and Adam's moments
		static := mem.Weights + mem.Gradients + mem.MasterWeights + mem.Optimizer
		if bpp := static / sp.Trainable; math.Abs(bpp-e.Intermediates.BytesPerParam) > 1e-9 {
			t.Errorf("%s: %.4f bytes per parameter, Megatron's estimator %.4f", name, bpp, e.Intermediates.BytesPerParam)
		}
		if in.PP == 1 {
			if r := sp.Trainable / e.Intermediates.Params; math.Abs(r-1) > 0.001 {
				t.Errorf("%s: %.4g parameters per GPU, the estimator %.4g", name, sp.Trainable, e.Intermediates.Params)
			}
			// Megatron's fused vocab-parallel cross entropy: 4·s·b·(h + V)/t
			fp := m.Fingerprint
			want := 4 * float64(in.Seq*in.MBS) * float64(fp.Hidden+fp.Vocab) / float64(in.TP)
			if math.Abs(mem.Logits/want-1) > 1e-9 {
				t.Errorf("%s: logits %.4g B, the estimator's output-layer term %.4g", name, mem.Logits, want)
			}
		}
		first, _, _ := l.StageCounts(m.Fingerprint.Layers)
		equiv := float64(first) * l.inFlight(true)
		if in.PP == 1 {
			equiv = float64(m.Fingerprint.Layers)
		}
		if m.Fingerprint.Layers%(in.PP*vp) == 0 && math.Abs(equiv/e.Intermediates.LayerEquiv-1) > 1e-9 {
			t.Errorf("%s: %.4g layers' activations in flight, the estimator %.4g", name, equiv, e.Intermediates.LayerEquiv)
		}
		// one layer's saved activations per TP rank, selective recompute with SP
		rc, _ := analyzer.ParseRecompute("selective")
		pt := layerActivations(m.Fingerprint, l, rc, false, summarize(m).grads)
		tokens := float64(in.Seq * in.MBS)
		perLayer := tokens * (pt.sp + pt.tp) / float64(in.TP)
		r := perLayer / e.Intermediates.PerLayer
		t.Logf("%-16s %-34s params %.4g (est %.4g)  B/param %.2f  layer acts %.3g GiB (est %.3g, ratio %.3f)  layers in flight %.4g (est %.4g)",
			e.Model, l.String(), sp.Trainable, e.Intermediates.Params, static/sp.Trainable, perLayer/(1<<30), e.Intermediates.PerLayer/(1<<30), r, equiv, e.Intermediates.LayerEquiv)
		if r < 0.98 || r > 1.10 {
			t.Errorf("%s: one layer's activations %.4g B, %.3fx the estimator's %.4g (outside the band GQA and SwiGLU explain)", name, perLayer, r, e.Intermediates.PerLayer)
		}
	}
}

// The same estimator's MoE branch (pp = 1): parameters on one rank with the routed experts
// sharded over EP x ETP and the rest over TP, and the bytes of weights, gradients and optimizer
// state with the experts' optimizer state sharded over the expert data-parallel group
// (world / (ETP x EP)), on Qwen3-30B-A3B, Qwen3-235B-A22B and DeepSeek-V3 (MLA, a shared
// expert, three dense layers, one MTP module) under ten layouts. mrep used to shard the
// experts' optimizer state over the whole data-parallel group, which held 16-50% less than
// Megatron does (DeepSeek-V3 at EP64 on 64 GPUs: 169 GB where the estimator says 294), and
// divided the norms and the router by TP, which Megatron keeps whole on every TP rank.
func TestMoEMemoryAgainstMegatronEstimator(t *testing.T) {
	raw, err := os.ReadFile("../calib/testdata/megatron_theoretical_memory.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		MoE []struct {
			Model  string `json:"model"`
			Inputs struct {
				TP, DP, EP, ETP int64
				DistOpt         bool   `json:"use_distributed_optimizer"`
				MTP             *int64 `json:"mtp_num_layers"`
			} `json:"inputs"`
			Bytes         float64 `json:"weight_and_optimizer_bytes"`
			Intermediates struct {
				Params  float64 `json:"params_on_rank"`
				Experts float64 `json:"expert_params_on_rank"`
			} `json:"intermediates"`
		} `json:"moe_configs"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.MoE) != 10 {
		t.Fatalf("%d MoE configurations, want the 10 the script writes", len(file.MoE))
	}
	for _, e := range file.MoE {
		in := e.Inputs
		m := zooModel(t, e.Model)
		zero := 0
		if in.DistOpt {
			zero = 1
		}
		l := Layout{TP: in.TP, PP: 1, VP: 1, CP: 1, DP: in.DP, EP: in.EP, ETP: in.ETP, MBS: 1, GBS: in.DP, Seq: 4096,
			DistOptimizer: in.DistOpt, ZeRO: zero, Recompute: "selective", Framework: Megatron}
		if in.MTP != nil {
			l.MTP = *in.MTP
		}
		name := e.Model + " " + l.String()
		sp := paramsOnStage(m, l, true)
		experts := sp.experts
		mem := stageMemory(m, l, true)
		static := mem.Weights + mem.Gradients + mem.MasterWeights + mem.Optimizer
		t.Logf("%-16s %-38s params %.6g (est %.6g, %+.3f%%)  experts %.6g (est %.6g, %+.3f%%)  bytes %.5g (est %.5g, %+.3f%%)",
			e.Model, l.String(), sp.Trainable, e.Intermediates.Params, 100*(sp.Trainable/e.Intermediates.Params-1),
			experts, e.Intermediates.Experts, 100*(experts/e.Intermediates.Experts-1), static, e.Bytes, 100*(static/e.Bytes-1))
		// the routed experts on a rank, the MTP module's included: the same count
		if math.Abs(experts/e.Intermediates.Experts-1) > 1e-4 {
			t.Errorf("%s: %.6g routed-expert parameters per rank, the estimator %.6g", name, experts, e.Intermediates.Experts)
		}
		// all parameters, and the weights with their gradients, master copies and moments: the
		// same, but for what mrep counts of each MTP module beyond the estimator's transformer
		// layer (its 2h x h projection, split by TP, and three norms)
		var extra float64
		if in.MTP != nil {
			h := float64(m.Fingerprint.Hidden)
			extra = float64(*in.MTP) * (2*h*h/float64(in.TP) + 3*h)
		}
		if d := sp.Trainable - e.Intermediates.Params - extra; math.Abs(d) > 1e-5*e.Intermediates.Params {
			t.Errorf("%s: %.6g parameters per rank, the estimator %.6g (+ %.4g of MTP projection and norms)", name, sp.Trainable, e.Intermediates.Params, extra)
		}
		perParam := 18.0
		if in.DistOpt {
			perParam = 6 + 12/float64(in.DP)
		}
		if d := static - e.Bytes - extra*perParam; math.Abs(d) > 1e-5*e.Bytes {
			t.Errorf("%s: %.6g bytes of weights and optimizer state, the estimator %.6g (+ %.4g for the MTP projection and norms)", name, static, e.Bytes, extra*perParam)
		}
	}
}

// DeepSeek-V3's multi-token-prediction module lives on the last stage: a copy of the last (MoE)
// layer's parameters plus its 2h x h projection and three norms, one more layer's activations
// and its own logits; the first stage of a pipeline holds none of it.
func TestMTPModuleOnTheLastStage(t *testing.T) {
	m := zooModel(t, "DeepSeek-V3")
	l := Layout{TP: 1, PP: 4, VP: 1, CP: 1, DP: 64, EP: 64, ETP: 1, MBS: 1, GBS: 256, Seq: 4096, DistOptimizer: true, ZeRO: 1,
		Recompute: "selective", Framework: Megatron, FirstStageLayers: 16, LastStageLayers: 13}
	with := l
	with.MTP = 1
	h := float64(m.Fingerprint.Hidden)
	last := summarize(m).lastLayer
	wantParams := last[0].trainable + last[1].trainable/64 + last[2].trainable + 2*h*h + 3*h
	if d := paramsOnStage(m, with, false).Trainable - paramsOnStage(m, l, false).Trainable; math.Abs(d/wantParams-1) > 1e-9 {
		t.Errorf("MTP adds %.6g parameters to the last stage, want %.6g", d, wantParams)
	}
	if d := paramsOnStage(m, with, true).Trainable - paramsOnStage(m, l, true).Trainable; d != 0 {
		t.Errorf("MTP adds %.6g parameters to the first stage", d)
	}
	a, b := stageMemory(m, l, false), stageMemory(m, with, false)
	if math.Abs(b.Logits/a.Logits-2) > 1e-9 {
		t.Errorf("logits %.4g with MTP, %.4g without: want twice", b.Logits, a.Logits)
	}
	perLayer := a.Activations / 13
	if grow := b.Activations - a.Activations; grow < perLayer || grow > 1.2*perLayer {
		t.Errorf("MTP adds %.4g B of activations, a layer holds %.4g", grow, perLayer)
	}
	if f, g := stageMemory(m, l, true), stageMemory(m, with, true); f.Total != g.Total {
		t.Errorf("the first stage holds %.4g B with MTP, %.4g without", g.Total, f.Total)
	}
}

// DualPipe puts stage i and stage PP-1-i on one rank (the DeepSeek-V3 report's Table 2: twice
// the parameters): the end ranks hold the embedding, the LM head and the MTP module together,
// and the logits with them.
func TestDualPipeEndRanksHoldBothEnds(t *testing.T) {
	m := zooModel(t, "DeepSeek-V3")
	l := Layout{TP: 1, PP: 16, VP: 1, CP: 1, DP: 128, EP: 64, ETP: 1, MBS: 1, GBS: 15360, Seq: 4096, DistOptimizer: true, ZeRO: 1,
		Framework: Megatron, MTP: 1, FirstStageLayers: 4, LastStageLayers: 1}
	dp := l
	dp.A2AOverlap = OverlapDualPipe
	sum := summarize(m)
	head := sum.head[0].trainable + sum.final[2].trainable
	plain, dual := paramsOnStage(m, l, true), paramsOnStage(m, dp, true)
	if dual.Trainable < 2*plain.Trainable-sum.embedding[0].trainable+head {
		t.Errorf("DualPipe's first rank holds %.4g parameters; its two stages and the LM head need at least %.4g", dual.Trainable, 2*plain.Trainable-sum.embedding[0].trainable+head)
	}
	if a := stageMemory(m, dp, true); a.Logits == 0 {
		t.Error("DualPipe's first rank holds no logits: the last stage's loss runs on it")
	}
	if a := stageMemory(m, l, true); a.Logits != 0 {
		t.Error("1F1B's first stage holds logits")
	}
}

// The routed tokens a Megatron MoE layer keeps for its backward, by hand for Mixtral-8x7B (h
// 4096, 8 experts, top-2) at MBS 1 x 4096 tokens on one rank, BF16: the dispatched input the
// first expert GEMM saves (2 x 2 B x 4096 per token), the router's fp32 logits (8 x 4 B) and
// each assignment's fp32 weight (2 x 4 B), 32 layers. Not the experts' output: TEGroupedMLP
// weights the activation and the combine unpermutes without probs (Megatron-LM moe/experts.py,
// token_dispatcher.py @d98e8a6). Hugging Face's block weights the output after the expert, so
// an eager framework keeps that 16-bit output too.
func TestMoETokenBuffersKeepNoExpertOutput(t *testing.T) {
	m := zooModel(t, "Mixtral-8x7B")
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 8, Seq: 4096, DistOptimizer: true, Framework: Megatron}
	perToken := 2*2*4096.0 + 8*4 + 2*4
	testutil.Near(t, "megatron MoE token buffers", TrainingMemory(m, l).MoEBuffers, 4096*32*perToken, 1e-9)
	l.Framework = FSDP
	testutil.Near(t, "eager MoE token buffers", TrainingMemory(m, l).MoEBuffers, 4096*32*(perToken+2*2*4096.0), 1e-9)
}

// Megatron's "mlp" recompute module re-runs the dense layers' MLP only (transformer_layer.py sets
// recompute_mlp when the layer is not an MoE layer, @d98e8a6): on Llama it drops every MLP's
// activations and re-runs its GEMMs; on DeepSeek-V3 only the three dense layers', which at PP8
// are three of the first stage's eight (11% of its activations), so the experts keep theirs and
// the step barely moves.
func TestMLPRecomputeIsTheDenseLayers(t *testing.T) {
	chip, _ := chips.Default().Lookup("H100")
	tm, _ := timing.New(chip, "bf16")
	for _, c := range []struct {
		model   string
		ep      int64
		maxDrop float64 // the largest share of the activations mlp may drop
	}{{"Llama-3.1-8B", 1, 1}, {"DeepSeek-V3", 8, 0.15}} {
		m := zooModel(t, c.model)
		l := Layout{TP: 1, PP: 8, VP: 1, CP: 1, DP: 8, EP: c.ep, ETP: 1, MBS: 1, GBS: 64, Seq: 4096, DistOptimizer: true, Framework: Megatron}
		r := l
		r.Recompute = "selective:mlp"
		a, err := Train(m, analyzer.DefaultScenario(), l, tm, 989.4e12, 8)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Train(m, analyzer.DefaultScenario(), r, tm, 989.4e12, 8)
		if err != nil {
			t.Fatal(err)
		}
		ma, mb := TrainingMemory(m, l), TrainingMemory(m, r)
		drop := 1 - mb.Activations/ma.Activations
		if !(drop > 0 && drop <= c.maxDrop && b.StepTime > a.StepTime) || mb.MoEBuffers != ma.MoEBuffers {
			t.Errorf("%s: selective:mlp drops %.1f%% of the activations (at most %.0f%%), MoE buffers %.3g against %.3g, step %.4g s against %.4g",
				c.model, 100*drop, 100*c.maxDrop, mb.MoEBuffers, ma.MoEBuffers, b.StepTime, a.StepTime)
		}
	}
}

// On a model whose every layer is an MoE layer, the mlp module is refused: Megatron would accept
// it and recompute nothing. A model with dense layers takes it.
func TestMLPRecomputeRefusedWithoutDenseLayers(t *testing.T) {
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 8, Seq: 4096, DistOptimizer: true,
		Framework: Megatron, Recompute: "selective:mlp,layernorm"}
	err := l.Validate(zooModel(t, "Mixtral-8x7B").Fingerprint)
	if err == nil || !strings.Contains(err.Error(), "every layer of this model is an MoE layer") {
		t.Errorf("Mixtral with selective:mlp: %v", err)
	}
	l.DP, l.GBS = 64, 64
	if err := l.Validate(zooModel(t, "DeepSeek-V3").Fingerprint); err != nil && strings.Contains(err.Error(), "mlp") {
		t.Errorf("DeepSeek-V3 has three dense layers: %v", err)
	}
}

// A pipeline stage holds its own layers: Megatron fills the PP x VP chunks in order, so
// DeepSeek-V3's three dense layers (first_k_dense_replace 3) sit on the first stage. By hand: at
// PP8 the first stage holds layers 0-7 and the last 56-60 (eight to a chunk); at PP8 x VP2 (four
// to a chunk) the first stage holds chunks 0 and 8, layers 0-3 and 32-35; DualPipe's end rank
// holds both ends. A first stage of exactly the dense layers keeps no routed tokens and none of
// the experts' parameters, and carries each dense layer's MLP whole.
func TestStagesHoldTheirOwnLayers(t *testing.T) {
	m := zooModel(t, "DeepSeek-V3")
	l := Layout{TP: 1, PP: 8, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 64, Seq: 4096, DistOptimizer: true, Framework: Megatron}
	span := func(a, b int64) []int64 {
		var s []int64
		for i := a; i <= b; i++ {
			s = append(s, i)
		}
		return s
	}
	for _, c := range []struct {
		name  string
		l     Layout
		first bool
		want  []int64
	}{
		{"pp8 first", l, true, span(0, 7)},
		{"pp8 last", l, false, span(56, 60)},
		{"pp8 vp2 first", func() Layout { v := l; v.VP = 2; return v }(), true, append(span(0, 3), span(32, 35)...)},
		{"dualpipe end rank", func() Layout { v := l; v.A2AOverlap = OverlapDualPipe; return v }(), true, append(span(0, 7), span(56, 60)...)},
	} {
		if got := stageLayers(c.l, 61, posOf(c.first)); !slices.Equal(got, c.want) {
			t.Errorf("%s: layers %v, want %v", c.name, got, c.want)
		}
	}

	dense := l
	dense.FirstStageLayers = 3 // the dense layers alone; the other 58 over 7 stages (9 a stage, the ceiling)
	first := stageMemory(m, dense, true)
	if first.MoEBuffers != 0 {
		t.Errorf("a first stage of the three dense layers keeps %g B of routed tokens", first.MoEBuffers)
	}
	sp := paramsOnStage(m, dense, true)
	if sp.experts != 0 {
		t.Errorf("a first stage of the three dense layers holds %g expert parameters", sp.experts)
	}
	// its parameters by hand from the dump's ops: the embedding and layers 0-2, nothing divided
	// (TP1, no experts)
	var want float64
	for _, op := range m.Ops {
		if op.Tied || (op.Layer >= 3) || (op.Layer < 0 && op.Category != analyzer.CatEmbedding) {
			continue
		}
		n := float64(op.Numel)
		if op.Kind == analyzer.OpElementwise {
			n = float64(op.WeightElems)
		}
		want += n
	}
	testutil.Near(t, "first stage parameters", sp.Trainable, want, 1e-12)
	// the 3 dense MLPs (7168 x 18432, three matrices) are in it
	if sp.Trainable < 3*3*7168*18432 {
		t.Errorf("first stage %g parameters, fewer than its three dense MLPs", sp.Trainable)
	}
	last := stageMemory(m, dense, false)
	_, _, nLast := dense.StageCounts(61)
	perLayer := 4096 * (8*2*7168.0 + 4*256 + 4*8) // dispatched bf16 tokens, fp32 router logits and weights
	testutil.Near(t, "last stage routed tokens", last.MoEBuffers, float64(nLast)*perLayer, 1e-9)
}

// DualPipe's middle ranks hold the two middle stages (PP/2 - 1 and PP/2) and PP + 1 micro-
// batches of them, as its end ranks hold theirs, without the embedding, LM head, logits or MTP
// module; TrainingMemory is the fullest of the end and middle ranks. With the embedding and loss
// counted in the split, DeepSeek-V3's end stages hold three layers each (the first stage its
// three dense ones) and its middle stages four MoE layers: a middle rank then keeps more
// activations and routed tokens than an end rank, and fewer parameters.
func TestDualPipeMiddleRank(t *testing.T) {
	m := zooModel(t, "DeepSeek-V3")
	l := Layout{TP: 1, PP: 16, VP: 1, CP: 1, DP: 128, EP: 64, ETP: 1, MBS: 1, GBS: 15360, Seq: 4096, DistOptimizer: true, ZeRO: 1,
		Framework: Megatron, A2AOverlap: OverlapDualPipe, EmbeddingInPipe: true, LossInPipe: true, MTP: 1}
	if err := l.Validate(m.Fingerprint); err != nil {
		t.Fatal(err)
	}
	if got := stageLayers(l, 61, posMid); !slices.Equal(got, []int64{27, 28, 29, 30, 31, 32, 33, 34}) {
		t.Errorf("middle pair of PP16 (chunks of 4 after a first of 3): layers %v, want 27-34", got)
	}
	end, mid := stageMemoryAt(m, l, posFirst), stageMemoryAt(m, l, posMid)
	if !(mid.Activations > end.Activations && mid.MoEBuffers > end.MoEBuffers && mid.Weights < end.Weights && mid.Logits == 0 && end.Logits > 0) {
		t.Errorf("middle rank %+v\nend rank %+v", mid, end)
	}
	// routed tokens by hand, in one MoE layer's micro-batch: the middle rank's stages hold 4
	// layers each, all MoE, 17 micro-batches of a stage's worth in flight (DeepSeek's PP + 1);
	// the end rank's stage is 3 layers, its two stages' mix 2 MoE of 5 (layers 0-2 and 59-60:
	// the ceiling split leaves the last chunk two), plus the MTP module's one micro-batch
	unit := mid.MoEBuffers / (17 * 4)
	testutil.Near(t, "end rank routed tokens", end.MoEBuffers, unit*(17*3*2.0/5+1), 1e-9)
	if got := stageLayers(l, 61, posFirst); !slices.Equal(got, []int64{0, 1, 2, 59, 60}) {
		t.Errorf("end rank layers %v, want 0-2 and 59-60", got)
	}
	want := end
	if mid.Total > end.Total {
		want = mid
	}
	if got := TrainingMemory(m, l); got.Total != want.Total || got.Stage != want.Stage {
		t.Errorf("TrainingMemory %s %.4g, want the fuller rank %s %.4g", got.Stage, got.Total, want.Stage, want.Total)
	}
}

// stageLayers lists the layers eachStageRange visits.
func stageLayers(l Layout, layers int64, pos stagePos) []int64 {
	var out []int64
	l.eachStageRange(layers, pos, func(a, b int64) {
		for i := a; i < b; i++ {
			out = append(out, i)
		}
	})
	return out
}
