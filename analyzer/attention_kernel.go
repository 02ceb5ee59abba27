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
}

// AttentionKernel is the kernel a model's attention op of that shape is timed as: the same
// costing a step uses (costAttention under the achievable profile, one GPU), so a measured
// kernel and mrep's model of it compare like for like.
func AttentionKernel(a AttentionShape) kernels.Kernel {
	fp := Fingerprint{Transformer: true, Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, VHeadDim: a.HeadDim}
	s := DefaultScenario()
	s.ActBytes, s.KVBytes = a.ActBytes, a.KVBytes
	sh := stepShape{tokens: a.Batch * a.Queries, queries: a.Queries, kvLen: a.KVLen, batch: a.Batch, decode: a.Decode, kvWrite: a.CacheWrite || a.Decode}
	var c opCost
	costAttention(Op{Name: "attention_core", Kind: OpAttnCore, Category: CatAttention}, fp, sh, s, Achievable, &c)
	c.fwdK.Graphed = a.Decode // as a step's: engines replay decode steps from CUDA graphs
	return c.fwdK
}
