package analyzer

import "github.com/mrep-dev/mrep/kernels"

// AttentionShape is one fused attention launch as a kernel benchmark states it: batch
// sequences of Queries new tokens each attending over KVLen cached and new tokens, with Heads
// query heads sharing KVHeads key/value heads of HeadDim. Decode is one query per sequence
// reading the cache; otherwise a causal prefill over the sequence (CacheWrite: writing its K
// and V into the cache).
type AttentionShape struct {
	Batch, Queries, KVLen   float64
	Heads, KVHeads, HeadDim int64
	Decode                  bool
	// CacheWrite: a prefill that writes its K and V into the KV cache, as a serving engine's
	// attention op does (a plain FlashAttention call over K and V it was given does not).
	CacheWrite bool
	// ActBytes and KVBytes per activation and KV-cache element.
	ActBytes, KVBytes float64
	// Window caps the keys each query attends to (a sliding window; 0: none).
	Window int64
	// VHeadDim is the value heads' width where it differs from HeadDim (0: HeadDim), as
	// DeepSeek-V3's training attention runs it: 192-wide query-key heads, 128-wide values.
	VHeadDim int64
	// MLA: multi-head latent attention with DeepSeek-V3's dimensions (a 512-element latent and
	// 64 RoPE elements per token, shared by every head; 128 + 64 query-key and 128 value
	// elements per head in prefill, the latent's in decode); KVHeads and HeadDim are ignored.
	MLA bool
}

// DeepSeekMLA is DeepSeek-V3's (and R1's) latent attention: kv_lora_rank 512, q_lora_rank
// 1536, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128 (its config.json).
var DeepSeekMLA = MLAInfo{QLoraRank: 1536, KVLoraRank: 512, QKNope: 128, QKRope: 64, VHead: 128}

// fingerprint is the attention's heads as a model states them.
func (a AttentionShape) fingerprint() Fingerprint {
	fp := Fingerprint{Transformer: true, Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, VHeadDim: a.HeadDim}
	if a.VHeadDim > 0 {
		fp.VHeadDim = a.VHeadDim
	}
	return fp
}

// AttentionKernel is the kernel a model's attention op of that shape is timed as: the same
// costing a step uses (costAttention under the achievable profile, one GPU), so a measured
// kernel and mrep's model of it compare like for like.
func AttentionKernel(a AttentionShape) kernels.Kernel {
	fp := a.fingerprint()
	if a.MLA {
		mla := DeepSeekMLA
		fp.MLA, fp.KVHeads = &mla, 1
		fp.HeadDim, fp.VHeadDim = mla.QKNope+mla.QKRope, mla.VHead
		fp.CKV = mla.KVLoraRank + mla.QKRope
	}
	s := DefaultScenario()
	s.ActBytes, s.KVBytes = a.ActBytes, a.KVBytes
	sh := stepShape{tokens: a.Batch * a.Queries, queries: a.Queries, kvLen: a.KVLen, batch: a.Batch, decode: a.Decode, kvWrite: a.CacheWrite || a.Decode}
	var c opCost
	ph := Prefill // a serving engine's kernel: no training-only pass
	if a.Decode {
		ph = Decode
	}
	costAttention(Op{Name: "attention_core", Kind: OpAttnCore, Category: CatAttention}, fp, ph, sh, s, Achievable, &c)
	c.fwdK.Graphed = a.Decode // as a step's: engines replay decode steps from CUDA graphs
	return c.fwdK
}

// TrainingAttentionKernels are the forward and backward kernels a training step times a causal
// self-attention of that shape as (a.Queries tokens per sequence), in 16 bits or, with fp8, in
// the FP8 of the recipe (block-scaled where mx): how a measured training kernel compares with
// mrep's model of it.
func TrainingAttentionKernels(a AttentionShape, fp8, mx bool) (fwd, bwd kernels.Kernel) {
	fp := a.fingerprint()
	s := DefaultScenario()
	s.ActBytes, s.KVBytes = 2, 2
	if fp8 {
		s.ComputeDType, s.FP8Attention, s.BlockScaled = "fp8", true, mx
	}
	sh := stepShape{tokens: a.Batch * a.Queries, queries: a.Queries, kvLen: a.Queries, batch: a.Batch}
	var c opCost
	costAttention(Op{Name: "attention_core", Kind: OpAttnCore, Category: CatAttention, Window: a.Window}, fp, Training, sh, s, Achievable, &c)
	return c.fwdK, c.bwdK[0]
}
