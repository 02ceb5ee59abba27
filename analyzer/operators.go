package analyzer

import (
	"fmt"
	"strings"
)

// Query is one request of a heterogeneous decode/prefill batch: tokens already in its KV cache
// and new tokens it feeds this step (transformer-roofline-analyzer's --cached-tokens and
// --input-tokens, ../shared/seeds/002).
type Query struct {
	Cached int64 `json:"cached_tokens"`
	Input  int64 `json:"input_tokens"`
}

// Queries is the per-operator table's batch: the pattern of queries (each with its cached and
// new tokens) repeated batch times. The scenario's decode step then runs every query at their
// mean KV length, so T_est reads the same KV bytes as the table: Queries returns that length.
func Queries(cached, input []int64, batch int64) ([]Query, int64, error) {
	if len(cached) != len(input) {
		return nil, 0, fmt.Errorf("%d cached-token lengths and %d input-token lengths: give one of each per query", len(cached), len(input))
	}
	var qs []Query
	var kv int64
	for rep := int64(0); rep < batch; rep++ {
		for i := range cached {
			qs = append(qs, Query{Cached: cached[i], Input: input[i]})
			kv += cached[i] + input[i]
		}
	}
	if len(qs) == 0 {
		return nil, 0, nil
	}
	return qs, max(1, (kv+int64(len(qs))/2)/int64(len(qs))), nil
}

// OperatorRow is one operator of one block: work and traffic per block, and how many of the
// model's blocks have it.
type OperatorRow struct {
	Operator     string  `json:"operator"`
	Blocks       int     `json:"blocks"`
	TotalBlocks  int     `json:"total_blocks"`
	FLOPs        float64 `json:"flops"`
	WeightBytes  float64 `json:"weight_bytes"`
	InputBytes   float64 `json:"input_bytes"` // activations read, and the KV cache for attention
	OutputBytes  float64 `json:"output_bytes"`
	Intensity    float64 `json:"intensity"` // FLOPs / (weight + input + output bytes)
	PerBlockOnly bool    `json:"-"`
}

// OperatorTable is the per-operator view with model totals and the minimum storage.
type OperatorTable struct {
	Queries      []Query       `json:"queries"`
	Rows         []OperatorRow `json:"rows"`
	Blocks       OperatorRow   `json:"blocks_total"`          // the decoder blocks, as the reference tool totals
	Total        OperatorRow   `json:"total"`                 // blocks plus embedding, final norm and LM head
	StorageW     float64       `json:"storage_weights_bytes"` // every parameter: all experts must be resident
	StorageKV    float64       `json:"storage_kv_bytes"`
	ActiveWeight float64       `json:"active_weight_bytes"` // what one step reads
}

func operatorOf(op Op) string {
	n := lastPart(op.Module)
	switch op.Category {
	case CatAttention:
		switch {
		case op.Kind == OpAttnCore:
			return "" // split into scores, softmax, AV below
		case op.Kind == OpElementwise:
			return "Attn - Norm/Bias"
		case strings.HasPrefix(n, "o_proj") || n == "out_proj" || n == "dense" || (n == "c_proj"):
			return "Attn - O_Proj"
		}
		return "Attn - QKV_Proj"
	case CatDenseFFN, CatSharedExperts:
		prefix := "FFN"
		if op.Category == CatSharedExperts {
			prefix = "MoE - Shared"
		}
		switch {
		case op.Kind == OpElementwise && op.Name == "mlp_activation":
			return prefix + " - Activation"
		case op.Kind == OpElementwise:
			return prefix + " - Bias"
		case n == "down_proj" || n == "w2" || n == "c_proj" || n == "fc2" || n == "dense_4h_to_h":
			return prefix + " - Down"
		}
		return prefix + " - Gate/Up"
	case CatRoutedExperts:
		if op.Kind == OpElementwise {
			return "MoE - Experts activation"
		}
		if strings.Contains(op.Name, "down") || n == "down_proj" || n == "w2" {
			return "MoE - Experts down"
		}
		return "MoE - Experts gate/up"
	case CatRouter:
		return "MoE - Router"
	case CatNorm:
		if op.Layer < 0 {
			return "Final norm"
		}
		return "Norm"
	case CatEmbedding:
		return "Embedding"
	case CatLMHead:
		return "LM Head"
	}
	if op.Name == "residual_add" {
		return "Residual add"
	}
	return "Other - " + n
}

// Operators builds the per-operator table for a heterogeneous batch of queries: one step that
// feeds every query's input tokens while attending over its cached ones. Bytes are the
// reference tool's simple model: every touched weight once, inputs read, outputs written.
func (m *Model) Operators(queries []Query, weightBytes, actBytes, kvBytes float64) (OperatorTable, error) {
	if len(queries) == 0 {
		return OperatorTable{}, fmt.Errorf("no queries")
	}
	var newTok float64
	for i, q := range queries {
		if q.Cached < 0 || q.Input < 1 {
			return OperatorTable{}, fmt.Errorf("query %d: cached tokens must be >= 0 and input tokens >= 1", i)
		}
		newTok += float64(q.Input)
	}
	fp := m.Fingerprint
	tab := OperatorTable{Queries: queries}
	type agg struct {
		row    OperatorRow
		layers map[int]bool
		first  int
	}
	groups := map[string]*agg{}
	var order []string
	add := func(name string, layer int, f, w, in, out float64) {
		g := groups[name]
		if g == nil {
			g = &agg{row: OperatorRow{Operator: name}, layers: map[int]bool{}, first: layer}
			groups[name] = g
			order = append(order, name)
		}
		if !g.layers[layer] {
			g.layers[layer] = true
		}
		if layer == g.first { // one block's figures; blocks differ only in count
			g.row.FLOPs += f
			g.row.WeightBytes += w
			g.row.InputBytes += in
			g.row.OutputBytes += out
		}
		for _, t := range []*OperatorRow{&tab.Total, &tab.Blocks} {
			if t == &tab.Blocks && layer < 0 {
				continue
			}
			t.FLOPs += f
			t.WeightBytes += w
			t.InputBytes += in
			t.OutputBytes += out
		}
	}
	// Projections of one module that read the same input (q, k, v) read it once.
	readInput := map[string]bool{}
	E, k := 1.0, 1.0
	if fp.MoE != nil {
		E, k = float64(fp.MoE.RoutedExperts), float64(fp.MoE.TopK)
	}
	for _, op := range m.Ops {
		switch op.Kind {
		case OpGEMM:
			in, out := float64(op.In), float64(op.Out)
			key := fmt.Sprintf("%s|%s|%d", operatorOf(op), parentOf(op.Module), op.In)
			if readInput[key] {
				in = 0
			}
			readInput[key] = true
			add(operatorOf(op), op.Layer, 2*newTok*float64(op.Numel), float64(op.Numel)*weightBytes,
				newTok*in*actBytes, newTok*out*actBytes)
			if !op.Tied {
				tab.StorageW += float64(op.Numel) * weightBytes
			}
		case OpExperts:
			per := float64(op.Numel) / float64(max(op.Experts, 1))
			touched := DistinctExperts(E, k, newTok) / E * float64(op.Experts)
			assign := newTok * k * float64(op.Experts) / E
			add(operatorOf(op), op.Layer, 2*assign*per, touched*per*weightBytes, assign*float64(op.In)*actBytes, assign*float64(op.Out)*actBytes)
			tab.StorageW += float64(op.Numel) * weightBytes
		case OpEmbedding:
			rows := DistinctExperts(float64(op.Rows), 1, newTok)
			add(operatorOf(op), op.Layer, 0, rows*float64(op.Width)*weightBytes, newTok*8, newTok*float64(op.Width)*actBytes)
			if !op.Tied {
				tab.StorageW += float64(op.Numel) * weightBytes
			}
		case OpElementwise:
			tok := newTok
			if op.PerAssignment {
				tok = newTok * k
			}
			half := float64(op.ElemsPerToken) / 2
			add(operatorOf(op), op.Layer, tok*float64(op.FlopsPerToken), float64(op.WeightElems)*weightBytes,
				tok*half*actBytes, tok*half*actBytes)
			tab.StorageW += float64(op.WeightElems) * weightBytes
		case OpAttnCore:
			h := float64(fp.Heads)
			dqk, dv := float64(fp.HeadDim), float64(fp.VHeadDim)
			if fp.MLA != nil {
				dqk, dv = float64(fp.MLA.KVLoraRank+fp.MLA.QKRope), float64(fp.MLA.KVLoraRank)
			}
			var scores, kvRead float64
			for _, q := range queries {
				keys := float64(q.Cached + q.Input)
				if op.Window > 0 && keys > float64(op.Window) {
					keys = float64(op.Window)
				}
				scores += h * float64(q.Input) * keys
				kvRead += keys * float64(fp.CKV) * kvBytes
			}
			qBytes := newTok * h * dqk * actBytes
			suffix := ""
			if op.Window > 0 {
				suffix = fmt.Sprintf(" (window %d)", op.Window)
			}
			add("Attn - QK^T"+suffix, op.Layer, 2*scores*dqk, 0, qBytes+kvRead/2, scores*actBytes)
			add("Attn - Softmax"+suffix, op.Layer, 3*scores, 0, scores*actBytes, scores*actBytes)
			add("Attn - AV"+suffix, op.Layer, 2*scores*dv, 0, scores*actBytes+kvRead/2, newTok*h*dv*actBytes)
		}
	}
	// The cache a layer keeps: every token, or its window (formulas.md §9).
	for _, op := range m.Ops {
		if op.Kind != OpAttnCore {
			continue
		}
		for _, q := range queries {
			keys := float64(q.Cached + q.Input)
			if op.Window > 0 && keys > float64(op.Window) {
				keys = float64(op.Window)
			}
			tab.StorageKV += keys * float64(fp.CKV) * kvBytes
		}
	}
	for _, name := range order {
		g := groups[name]
		g.row.Blocks, g.row.TotalBlocks = len(g.layers), int(max(fp.Layers, 1))
		if g.first < 0 {
			g.row.Blocks, g.row.TotalBlocks = 1, 1
		}
		g.row.Intensity = intensity(g.row)
		tab.Rows = append(tab.Rows, g.row)
	}
	tab.Blocks.Operator = fmt.Sprintf("Total (%d blocks)", fp.Layers)
	tab.Blocks.Intensity = intensity(tab.Blocks)
	tab.Total.Operator = "Total (model)"
	tab.Total.Intensity = intensity(tab.Total)
	tab.ActiveWeight = tab.Total.WeightBytes
	return tab, nil
}

func intensity(r OperatorRow) float64 {
	if b := r.WeightBytes + r.InputBytes + r.OutputBytes; b > 0 {
		return r.FLOPs / b
	}
	return 0
}

// OutputProjection says whether a linear layer writes a block's result back to the hidden
// state (attention's o_proj, the MLP's down projection) rather than reading the normed hidden
// state (q, k, v, gate, up): which of a layer's saved inputs its weight gradient needs.
func (op Op) OutputProjection() bool {
	switch operatorOf(op) {
	case "Attn - O_Proj", "FFN - Down", "MoE - Shared - Down":
		return true
	}
	return false
}
