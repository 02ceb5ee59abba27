package analyzer

import (
	"fmt"
	"math"
)

// Phase is what a step does.
type Phase string

// The phases.
const (
	Training Phase = "training"
	Prefill  Phase = "prefill"
	Decode   Phase = "decode"
)

// Phases in report order.
var Phases = []Phase{Training, Prefill, Decode}

// Scenario is the workload and system a step is costed under.
type Scenario struct {
	Batch int64 `json:"batch"`  // B: sequences per GPU step
	Seq   int64 `json:"seq"`    // S: tokens per sequence in training and prefill
	KVLen int64 `json:"kv_len"` // L: KV-cache length a decode step attends over

	WeightBytes float64 `json:"weight_bytes"` // bytes per weight element
	ActBytes    float64 `json:"act_bytes"`    // bytes per activation element
	KVBytes     float64 `json:"kv_bytes"`     // bytes per KV-cache element
	GradBytes   float64 `json:"grad_bytes"`   // bytes per weight-gradient element (training)

	ComputeDType string `json:"compute_dtype"` // which chip peak applies: bf16, fp8, ...

	TP int64 `json:"tp"` // tensor parallel: heads, FFN width and vocab split TP ways
	EP int64 `json:"ep"` // expert parallel (with DP = EP): E/EP experts per GPU

	BSat      float64 `json:"b_sat"`      // M_eff at which tensor cores saturate
	EtaScalar float64 `json:"eta_scalar"` // non-tensor-core throughput as a fraction of P_peak

	Recompute string `json:"recompute"`  // training: none, selective (attention core) or full
	GradAccum int64  `json:"grad_accum"` // training: microbatches per optimizer step
	// OptimizerStateBytes is the optimizer's per-parameter state beyond weights and gradients
	// (Adam mixed precision: fp32 master, m, v = 12 B; ZeRO, Rajbhandari et al. 2019).
	OptimizerStateBytes float64 `json:"optimizer_state_bytes"`
	// SeedTraining selects the seed report's compatibility model: training = prefill x
	// FlopsMult FLOPs and x BytesMult bytes, instead of forward + backward + optimizer.
	SeedTraining bool `json:"seed_training"`
}

// DefaultScenario is bf16 everywhere, B=1, S=L=2048, one GPU, B_sat=64 as in the seed.
func DefaultScenario() Scenario {
	return Scenario{Batch: 1, Seq: 2048, KVLen: 2048, WeightBytes: 2, ActBytes: 2, KVBytes: 2, GradBytes: 2,
		ComputeDType: "bf16", TP: 1, EP: 1, BSat: 64, EtaScalar: 1.0 / 16, Recompute: "none", GradAccum: 1,
		OptimizerStateBytes: 12}
}

// Validate checks a scenario.
func (s Scenario) Validate() error {
	switch {
	case s.Batch < 1 || s.Seq < 1 || s.KVLen < 1:
		return fmt.Errorf("batch, seq and kv-len must be >= 1 (got %d, %d, %d)", s.Batch, s.Seq, s.KVLen)
	case s.WeightBytes <= 0 || s.ActBytes <= 0 || s.KVBytes <= 0 || s.GradBytes <= 0:
		return fmt.Errorf("dtype byte widths must be positive")
	case s.TP < 1 || s.EP < 1:
		return fmt.Errorf("tp and ep must be >= 1 (got %d, %d)", s.TP, s.EP)
	case s.BSat <= 0 || s.EtaScalar <= 0 || s.EtaScalar > 1:
		return fmt.Errorf("b_sat must be > 0 and eta_scalar in (0, 1]")
	case s.Recompute != "none" && s.Recompute != "selective" && s.Recompute != "full":
		return fmt.Errorf("recompute must be none, selective or full, got %q", s.Recompute)
	case s.GradAccum < 1:
		return fmt.Errorf("grad_accum must be >= 1")
	}
	return nil
}

// Cost is additive work and traffic. Every field sums over ops, modules and terms.
type Cost struct {
	FTheory     float64 `json:"F_theory"`     // algorithmic FLOPs (model FLOPs)
	FTensorcore float64 `json:"F_tensorcore"` // the GEMM (tensor-core eligible) part of F_theory
	FRealizable float64 `json:"F_realizable"` // peak-equivalent cost: F_tc/eta_tc + F_scalar/eta_scalar (+ recompute, optimizer)

	BytesWeights     float64 `json:"bytes_weights"`
	BytesActivations float64 `json:"bytes_activations"`
	BytesKV          float64 `json:"bytes_kv"`
	BytesTemporary   float64 `json:"bytes_temporary"`
	BytesNet         float64 `json:"bytes_net"`

	// FloorWeights and FloorKV are the compulsory HBM traffic: every active weight (and
	// gradient and optimizer state in training) once, and the KV cache once.
	FloorWeights float64 `json:"floor_weights"`
	FloorKV      float64 `json:"floor_kv"`
}

// BytesHBM is bytes_weights + bytes_activations + bytes_kv + bytes_temporary.
func (c Cost) BytesHBM() float64 {
	return c.BytesWeights + c.BytesActivations + c.BytesKV + c.BytesTemporary
}

// Add returns c + o.
func (c Cost) Add(o Cost) Cost {
	return Cost{c.FTheory + o.FTheory, c.FTensorcore + o.FTensorcore, c.FRealizable + o.FRealizable,
		c.BytesWeights + o.BytesWeights, c.BytesActivations + o.BytesActivations, c.BytesKV + o.BytesKV,
		c.BytesTemporary + o.BytesTemporary, c.BytesNet + o.BytesNet, c.FloorWeights + o.FloorWeights, c.FloorKV + o.FloorKV}
}

// Scale returns c with every field multiplied by k.
func (c Cost) Scale(k float64) Cost {
	return Cost{c.FTheory * k, c.FTensorcore * k, c.FRealizable * k, c.BytesWeights * k, c.BytesActivations * k,
		c.BytesKV * k, c.BytesTemporary * k, c.BytesNet * k, c.FloorWeights * k, c.FloorKV * k}
}

// stepShape is what a phase means for one GPU: tokens in the step and attention extents.
type stepShape struct {
	tokens  float64 // T: new tokens this GPU processes
	queries float64 // S per sequence (1 in decode)
	kvLen   float64 // keys each query attends over (full, FlopCounterMode convention)
	batch   float64
	decode  bool
	kvWrite bool // prefill writes the KV cache; training keeps K/V as activations
}

func shapeOf(ph Phase, s Scenario) stepShape {
	switch ph {
	case Decode:
		return stepShape{tokens: float64(s.Batch), queries: 1, kvLen: float64(s.KVLen), batch: float64(s.Batch), decode: true, kvWrite: true}
	case Prefill:
		return stepShape{tokens: float64(s.Batch * s.Seq), queries: float64(s.Seq), kvLen: float64(s.Seq), batch: float64(s.Batch), kvWrite: true}
	}
	return stepShape{tokens: float64(s.Batch * s.Seq), queries: float64(s.Seq), kvLen: float64(s.Seq), batch: float64(s.Batch)}
}

// DistinctExperts is the expected number of distinct experts, of E, that T tokens each
// routing to k experts touch under uniform routing: E * (1 - (1 - k/E)^T).
func DistinctExperts(e, k, tokens float64) float64 {
	if e <= 0 {
		return 0
	}
	return e * (1 - math.Pow(1-k/e, tokens))
}

// eta is tensor-core utilization at effective GEMM M: min(1, M_eff / B_sat).
func eta(mEff, bSat float64) float64 {
	if mEff <= 0 {
		return 1
	}
	return math.Min(1, mEff/bSat)
}

// opCost is one op's forward cost on one GPU and, for training, what its backward adds.
type opCost struct {
	fwd, bwd Cost
	// recompute is the extra forward work activation recomputation does (hardware FLOPs).
	recomputeSelective, recomputeFull Cost
	params                            float64 // trainable parameters this GPU updates (optimizer)
}

// costOp models one op. Conventions (stated in the report's appendix):
//   - GEMM FLOPs 2*M*K*N; attention QK^T and PV over the full KV length (FlopCounterMode's
//     convention; the causal-executed count is reported beside it); softmax 3 FLOPs per score.
//   - Weights cross HBM once per pass, divided by the profile's WRF; only the touched share of
//     routed experts and of embedding rows is read.
//   - GEMM inputs and outputs are activations (x act_fusion); elementwise traffic and naive
//     attention's score/prob matrices are temporaries (x elementwise).
func costOp(op Op, fp Fingerprint, ph Phase, s Scenario, p ExecProfile) opCost {
	sh := shapeOf(ph, s)
	A, Wb, G := s.ActBytes, s.WeightBytes, s.GradBytes
	tp := float64(s.TP)
	wrf := p.WRF(op.Category)
	var c opCost
	switch op.Kind {
	case OpGEMM:
		m := sh.tokens
		f := 2 * m * float64(op.Numel) / tp
		w := float64(op.Numel) * Wb / tp
		act := A * m * float64(op.In+op.Out)
		c.fwd = Cost{FTheory: f, FTensorcore: f, FRealizable: f / eta(m, s.BSat),
			BytesWeights: w / wrf, BytesActivations: p.ActFusion * act / tp, FloorWeights: w}
		c.bwd = Cost{FTheory: 2 * f, FTensorcore: 2 * f, FRealizable: 2 * f / eta(m, s.BSat),
			BytesWeights: w/wrf + float64(op.Numel)*G/tp, BytesActivations: 2 * p.ActFusion * act / tp,
			FloorWeights: w + float64(op.Numel)*G/tp}
		if !op.Tied {
			c.params = float64(op.Numel) / tp
		}
	case OpExperts:
		c = costExperts(op, fp, sh, s, p)
	case OpEmbedding:
		rows := DistinctExperts(float64(op.Rows), 1, sh.tokens) // distinct rows gathered
		w := rows * float64(op.Width) * Wb / tp
		c.fwd = Cost{BytesWeights: w / wrf, BytesActivations: p.ActFusion * A * sh.tokens * float64(op.Width), FloorWeights: w}
		c.bwd = Cost{BytesWeights: rows * float64(op.Width) * G / tp, BytesActivations: p.ActFusion * A * sh.tokens * float64(op.Width),
			FloorWeights: rows * float64(op.Width) * G / tp}
		if !op.Tied {
			c.params = float64(op.Numel) / tp
		}
	case OpElementwise:
		m := sh.tokens
		if op.PerAssignment && fp.MoE != nil {
			m = sh.tokens * float64(fp.MoE.TopK) // expert assignments this GPU processes (balanced, DP = EP)
		}
		div := 1.0
		if op.Category == CatDenseFFN || op.Category == CatSharedExperts || op.Category == CatRoutedExperts || op.Category == CatAttention {
			div = tp // activations inside a TP-split MLP or attention block are split too
		}
		f := m * float64(op.FlopsPerToken) / div
		tmp := p.Elementwise * A * m * float64(op.ElemsPerToken) / div
		w := float64(op.WeightElems) * Wb / div
		c.fwd = Cost{FTheory: f, FRealizable: f / s.EtaScalar, BytesWeights: w / wrf, BytesTemporary: tmp, FloorWeights: w}
		c.bwd = Cost{FTheory: f, FRealizable: f / s.EtaScalar, BytesWeights: w/wrf + float64(op.WeightElems)*G/div,
			BytesTemporary: 2 * tmp, FloorWeights: w + float64(op.WeightElems)*G/div}
		if !op.Tied {
			c.params = float64(op.WeightElems) / div
		}
	case OpAttnCore:
		c = costAttention(op, fp, sh, s, p)
	}
	return c
}

func costExperts(op Op, fp Fingerprint, sh stepShape, s Scenario, p ExecProfile) opCost {
	var c opCost
	if fp.MoE == nil {
		return c
	}
	A, Wb, G := s.ActBytes, s.WeightBytes, s.GradBytes
	E, k := float64(fp.MoE.RoutedExperts), float64(fp.MoE.TopK)
	ep := float64(s.EP)
	tp := float64(s.TP)
	// With DP = EP, the EP group routes T*EP tokens; this GPU holds E/EP experts and, on
	// average, receives T*k token-expert assignments (balanced uniform routing).
	groupTokens := sh.tokens * ep
	frac := DistinctExperts(E, k, groupTokens) / E // share of experts touched this step
	held := float64(op.Experts) / ep               // experts of this weight on this GPU
	if op.Experts == 1 {                           // one of E separate expert modules: held by one GPU of EP
		held = 1 / ep
	}
	perExpert := float64(op.Numel) / math.Max(float64(op.Experts), 1)
	assignments := sh.tokens * k * held / (E / ep) // assignments to this weight's experts on this GPU
	if op.Experts == 1 {
		assignments = sh.tokens * k / E
	}
	mEff := groupTokens * k / E / math.Max(frac, 1e-12) // tokens per touched expert
	f := 2 * assignments * perExpert / tp
	wTouched := held * frac * perExpert * Wb / tp
	act := A * assignments * float64(op.In+op.Out) / tp
	c.fwd = Cost{FTheory: f, FTensorcore: f, FRealizable: f / eta(mEff, s.BSat),
		BytesWeights: wTouched / p.WRFMoE, BytesActivations: p.ActFusion * act, FloorWeights: wTouched}
	gTouched := held * frac * perExpert * G / tp
	c.bwd = Cost{FTheory: 2 * f, FTensorcore: 2 * f, FRealizable: 2 * f / eta(mEff, s.BSat),
		BytesWeights: wTouched/p.WRFMoE + gTouched, BytesActivations: 2 * p.ActFusion * act, FloorWeights: wTouched + gTouched}
	c.params = held * perExpert / tp
	return c
}

// kvElems is KV-cache elements per token per layer on one GPU: GQA heads split across TP (a KV
// head is never split), the MLA latent is replicated on every TP rank.
func kvElems(fp Fingerprint, s Scenario) float64 {
	if fp.MLA != nil {
		return float64(fp.CKV)
	}
	heads := math.Max(1, float64(fp.KVHeads)/float64(s.TP))
	return 2 * heads * float64(fp.HeadDim)
}

func costAttention(op Op, fp Fingerprint, sh stepShape, s Scenario, p ExecProfile) opCost {
	var c opCost
	A := s.ActBytes
	h := float64(fp.Heads) / float64(s.TP)
	lk := sh.kvLen
	if op.Window > 0 && lk > float64(op.Window) && sh.decode {
		lk = float64(op.Window) // a sliding window caps what decode reads
	}
	dqk, dv := float64(fp.HeadDim), float64(fp.VHeadDim)
	if sh.decode && fp.MLA != nil {
		// Absorbed MLA decode attends in the latent space: scores over kv_lora_rank+rope dims,
		// values over kv_lora_rank (W_UK and W_UV fold into the q and o projections).
		dqk, dv = float64(fp.MLA.KVLoraRank+fp.MLA.QKRope), float64(fp.MLA.KVLoraRank)
	}
	scores := sh.batch * h * sh.queries * lk
	fTC := 2*scores*dqk + 2*scores*dv
	fSoftmax := 3 * scores
	// M_eff: queries per head in prefill; in decode the query heads sharing a KV head (GQA
	// group, all heads for MLA's shared latent) are the GEMM's M.
	mEff := sh.queries
	if sh.decode {
		mEff = float64(fp.Heads) / float64(max(fp.KVHeads, 1))
		if fp.MLA != nil {
			mEff = float64(fp.Heads)
		}
	}
	fReal := fTC/eta(mEff, s.BSat) + fSoftmax/s.EtaScalar
	kvTok := kvElems(fp, s) * s.KVBytes
	var kv, floorKV float64
	if sh.decode {
		kv = sh.batch*lk*kvTok + sh.batch*kvTok // read the cache, append this token
		floorKV = kv
	} else if sh.kvWrite {
		kv = sh.tokens * kvTok
		floorKV = kv
	}
	// Q and O cross HBM; K and V are read from the cache in decode, from the projections'
	// outputs otherwise (those writes are the GEMMs'; these are the reads).
	qo := A * sh.tokens * h * (dqk + dv)
	kvRead := 0.0
	if !sh.decode {
		kvRead = A * sh.tokens * kvElems(fp, s)
	}
	var tmp float64
	if p.AttentionBytes == "naive" {
		tmp = p.Elementwise * A * scores * 4 // write scores, read them, write probs, read them
	}
	c.fwd = Cost{FTheory: fTC + fSoftmax, FTensorcore: fTC, FRealizable: fReal,
		BytesActivations: p.ActFusion * (qo + kvRead), BytesKV: kv, BytesTemporary: tmp, FloorKV: floorKV}
	// Backward: 2x the forward FLOPs (dQ, dK, dV, dP), Q/K/V/O/dO read, dQ/dK/dV written.
	c.bwd = Cost{FTheory: 2 * (fTC + fSoftmax), FTensorcore: 2 * fTC, FRealizable: 2 * fReal,
		BytesActivations: 2 * p.ActFusion * (qo + kvRead), BytesTemporary: 2 * tmp}
	c.recomputeSelective = Cost{FRealizable: fReal, BytesActivations: p.ActFusion * (qo + kvRead), BytesTemporary: tmp}
	return c
}

// netCost is the interconnect traffic one GPU sends per step: TP all-reduces after attention
// and MLP (ring: 2(TP-1)/TP of the tensor), EP dispatch and combine of routed tokens.
func netCost(fp Fingerprint, moeLayers, layers float64, ph Phase, s Scenario) float64 {
	sh := shapeOf(ph, s)
	A := s.ActBytes
	var b float64
	if s.TP > 1 {
		tp := float64(s.TP)
		b += layers * 2 * 2 * (tp - 1) / tp * sh.tokens * float64(fp.Hidden) * A
	}
	if s.EP > 1 && fp.MoE != nil {
		ep := float64(s.EP)
		b += moeLayers * 2 * sh.tokens * float64(fp.MoE.TopK) * float64(fp.Hidden) * A * (ep - 1) / ep
	}
	if ph == Training {
		b *= 2 // the backward pass moves the gradients of the same tensors
	}
	return b
}
