package analyzer

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/mrep-dev/mrep/model"
)

// Category is a coarse operator family used for parameter shares, WRF and the report.
type Category string

// The categories, in report order.
const (
	CatAttention     Category = "attention"
	CatRoutedExperts Category = "routed_experts"
	CatSharedExperts Category = "shared_experts"
	CatDenseFFN      Category = "dense_ffn"
	CatRouter        Category = "router"
	CatEmbedding     Category = "embedding"
	CatLMHead        Category = "lm_head"
	CatNorm          Category = "norm"
	CatOther         Category = "other"
)

// Categories lists every category in report order.
var Categories = []Category{CatAttention, CatRoutedExperts, CatSharedExperts, CatDenseFFN, CatRouter,
	CatEmbedding, CatLMHead, CatNorm, CatOther}

// OpKind is how an op is costed.
type OpKind string

// Op kinds.
const (
	OpGEMM        OpKind = "gemm"        // a weight matrix applied to every token of the step
	OpExperts     OpKind = "experts"     // routed expert weights: tokens*top_k spread over E experts
	OpEmbedding   OpKind = "embedding"   // a table gather: no FLOPs, touched rows read
	OpAttnCore    OpKind = "attn_core"   // QK^T, softmax, PV over the KV length
	OpElementwise OpKind = "elementwise" // norms, activation functions, residual adds, biases
)

// Op is one costed unit, attributed to a module of the tree so that costs sum up the tree.
type Op struct {
	Module   string   `json:"module"`
	Name     string   `json:"name"` // operator name for the per-operator table
	Kind     OpKind   `json:"kind"`
	Category Category `json:"category"`
	Layer    int      `json:"layer"` // decoder layer index, -1 outside layers

	// GEMM / experts: a weight of Numel elements (per expert: Numel/Experts) mapping In to Out
	// features, so FLOPs = 2*tokens*Numel and activation traffic = tokens*(In+Out).
	Numel   int64 `json:"numel,omitempty"`
	In      int64 `json:"in,omitempty"`
	Out     int64 `json:"out,omitempty"`
	Experts int64 `json:"experts,omitempty"` // routed experts this weight holds (fused or a separate expert's share)
	Tied    bool  `json:"tied,omitempty"`    // the tensor is tied: its bytes are read here, its parameters counted elsewhere

	// Embedding: rows x width.
	Rows, Width int64 `json:",omitempty"`

	// Elementwise: per token, ElemsPerToken elements read+written and FlopsPerToken FLOPs;
	// PerAssignment marks expert activations (tokens*top_k, not tokens).
	ElemsPerToken int64 `json:"elems_per_token,omitempty"`
	FlopsPerToken int64 `json:"flops_per_token,omitempty"`
	PerAssignment bool  `json:"per_assignment,omitempty"`
	// WeightElems are elementwise parameters (norm scales, biases) read once per step.
	WeightElems int64 `json:"weight_elems,omitempty"`

	// Attention core: Window caps the KV length (0 = none).
	Window int64 `json:"window,omitempty"`

	// Frozen weights get no gradient, no optimizer state and no weight-gradient GEMM (the
	// dump's requires_grad false, --freeze, or the base of a LoRA).
	Frozen bool `json:"frozen,omitempty"`
	// QuantBytes is a frozen base weight's storage bytes per element when it is kept quantized
	// (QLoRA's NF4 with double quantization: 0.516); 0 keeps the scenario's weight bytes.
	QuantBytes float64 `json:"quant_bytes,omitempty"`
	// Adapter is the rank of the LoRA adapter beside this frozen base (0: none): the layer's
	// input is still saved, for the adapter's weight gradient. AdapterDropout is its dropout.
	Adapter        int64   `json:"adapter,omitempty"`
	AdapterDropout float64 `json:"adapter_dropout,omitempty"`
	// QuantNative: the quantized base is a format the GEMMs read as stored (FP8, NVFP4: one
	// orientation per pass, nothing dequantized), not one unpacked to 16 bits first (NF4).
	QuantNative bool `json:"quant_native,omitempty"`
}

var digits = regexp.MustCompile(`^\d+$`)

// layerOf is the first all-digit component of a dotted name: the decoder layer.
func layerOf(name string) int {
	for _, p := range strings.Split(name, ".") {
		if digits.MatchString(p) {
			n, _ := strconv.Atoi(p)
			return n
		}
	}
	return -1
}

func lastPart(name string) string { return name[strings.LastIndex(name, ".")+1:] }

var attnParts = map[string]bool{"self_attn": true, "attn": true, "attention": true, "self_attention": true, "mixer": true}
var mlpParts = map[string]bool{"mlp": true, "ffn": true, "feed_forward": true, "block_sparse_moe": true, "moe": true}

func hasPart(name string, set map[string]bool) bool {
	for _, p := range strings.Split(name, ".") {
		if set[p] {
			return true
		}
	}
	return false
}

func categorize(m model.Module, p *model.Param, moeBlocks map[string]bool) Category {
	n, cls := m.Name, strings.ToLower(m.Class)
	last := lastPart(n)
	switch {
	case strings.Contains(n, "shared_expert"):
		return CatSharedExperts
	case p != nil && p.ExpertAxis != nil, strings.Contains(n, ".experts.") || strings.HasSuffix(n, ".experts"):
		return CatRoutedExperts
	case strings.Contains(cls, "router") || ((last == "gate" || last == "router") && moeBlocks[parentOf(n)]):
		return CatRouter
	case last == "lm_head" || n == "output" || last == "embed_out":
		return CatLMHead
	case strings.Contains(cls, "embedding"):
		return CatEmbedding
	case strings.Contains(cls, "norm"):
		return CatNorm
	case hasPart(n, attnParts):
		return CatAttention
	case hasPart(n, mlpParts):
		return CatDenseFFN
	}
	return CatOther
}

func parentOf(name string) string {
	if i := strings.LastIndex(name, "."); i >= 0 {
		return name[:i]
	}
	return ""
}

// BuildOps reads the module tree into costed ops. Every parameter tensor becomes an op (a
// 2-D weight is a GEMM whatever its module class, so unknown modules still get a model);
// attention cores, MLP activations and residual adds come from the architecture.
func BuildOps(d *model.Dump, fp Fingerprint) []Op {
	tensorShape := map[string][]int64{}
	moeBlocks := map[string]bool{}
	for _, m := range d.Modules {
		for _, p := range m.Params {
			tensorShape[model.QualifiedName(m.Name, p.Name)] = p.Shape
		}
		if strings.HasSuffix(m.Name, ".experts") {
			moeBlocks[parentOf(m.Name)] = true
		}
	}
	var ops []Op
	for _, m := range d.Modules {
		cls := strings.ToLower(m.Class)
		for i := range m.Params {
			p := &m.Params[i]
			shape := p.Shape
			tied := false
			if p.TiedTo != "" {
				// A tied tensor is counted once as a parameter but still read by this module.
				shape, tied = tensorShape[p.TiedTo], true
			}
			if shape == nil { // lazy: unknown until materialized
				continue
			}
			cat := categorize(m, p, moeBlocks)
			layer := layerOf(m.Name)
			numel := int64(1)
			for _, s := range shape {
				numel *= s
			}
			op := Op{Module: m.Name, Name: opName(m.Name, p.Name, cat), Category: cat, Layer: layer, Tied: tied, Frozen: !p.RequiresGrad}
			switch {
			case p.ExpertAxis != nil && len(shape) >= 3:
				e := shape[*p.ExpertAxis]
				per := numel / max(e, 1)
				rest := append(append([]int64{}, shape[:*p.ExpertAxis]...), shape[*p.ExpertAxis+1:]...)
				op.Kind, op.Numel, op.Experts = OpExperts, numel, e
				op.In, op.Out = inOut(rest, per, false)
				// Fused layouts differ ([E, out, in] in Mixtral, [E, in, out] in Llama 4): the
				// hidden size is the input of gate/up and the output of down.
				if len(rest) == 2 && rest[0] == fp.Hidden && rest[1] != fp.Hidden {
					if strings.Contains(p.Name, "down") {
						op.In, op.Out = rest[1], rest[0]
					} else {
						op.In, op.Out = rest[0], rest[1]
					}
				}
			case strings.Contains(cls, "embedding") && len(shape) == 2 && cat != CatLMHead:
				op.Kind, op.Rows, op.Width, op.Numel = OpEmbedding, shape[0], shape[1], numel
			case len(shape) >= 2:
				op.Kind, op.Numel = OpGEMM, numel
				op.In, op.Out = inOut(shape, numel, m.Class == "Conv1D")
				if cat == CatRoutedExperts && fp.MoE != nil {
					// one of E separate expert modules: it sees top_k/E of the tokens
					op.Kind, op.Experts = OpExperts, 1
				}
			default: // 1-D: norm scales, biases
				op.Kind, op.WeightElems = OpElementwise, numel
				if strings.Contains(cls, "norm") {
					op.ElemsPerToken, op.FlopsPerToken = 2*numel, 4*numel // read x, write y; square, mean, scale, multiply
				} else {
					op.ElemsPerToken, op.FlopsPerToken = 0, numel // a bias add fused into the GEMM epilogue
				}
				op.PerAssignment = cat == CatRoutedExperts
			}
			ops = append(ops, op)
		}
	}
	if !fp.Transformer {
		return ops
	}
	ops = append(ops, derivedOps(d, fp)...)
	return ops
}

// inOut reads a weight's input and output features: Linear stores [out, in] (the last dim is
// the input); GPT-2's Conv1D stores [in, out].
func inOut(shape []int64, numel int64, inFirst bool) (int64, int64) {
	in := shape[len(shape)-1]
	if inFirst {
		in = shape[0]
	}
	if in == 0 {
		return 0, 0
	}
	return in, numel / in
}

func opName(module, tensor string, cat Category) string {
	last := lastPart(module)
	if cat == CatRoutedExperts && strings.HasSuffix(module, ".experts") {
		return "experts." + tensor
	}
	if tensor != "weight" {
		return last + "." + tensor
	}
	return last
}

// derivedOps are the ops no parameter shows: attention cores, MLP activation functions and
// residual adds, one set per decoder layer found in the tree.
func derivedOps(d *model.Dump, fp Fingerprint) []Op {
	var ops []Op
	layerTypes := layerTypes(d.TextConfig())
	children := map[string][]model.Module{}
	for _, m := range d.Modules {
		if m.Parent != nil {
			children[*m.Parent] = append(children[*m.Parent], m)
		}
	}
	for _, m := range d.Modules {
		last := lastPart(m.Name)
		layer := layerOf(m.Name)
		switch {
		case attnParts[last] && len(children[m.Name]) > 0 && layer >= 0:
			win := fp.SlidingWindow
			if layer < len(layerTypes) {
				if strings.Contains(layerTypes[layer], "sliding") || strings.Contains(layerTypes[layer], "chunked") {
					if win == 0 {
						win, _ = cfgInt(d.TextConfig(), "sliding_window", "attention_chunk_size")
					}
				} else {
					win = 0
				}
			}
			ops = append(ops, Op{Module: m.Name, Name: "attention_core", Kind: OpAttnCore, Category: CatAttention, Layer: layer, Window: win})
		case mlpParts[last] && layer >= 0:
			// the activation between the up and down projections of the dense (or shared) MLP
			if inter := mlpIntermediate(children[m.Name]); inter > 0 {
				ops = append(ops, actOp(m.Name, layer, inter, fp.GatedMLP, CatDenseFFN, false))
			}
		case strings.Contains(last, "shared_expert") && layer >= 0:
			if inter := mlpIntermediate(children[m.Name]); inter > 0 {
				ops = append(ops, actOp(m.Name, layer, inter, fp.GatedMLP, CatSharedExperts, false))
			}
		case last == "experts" && layer >= 0 && fp.MoE != nil:
			ops = append(ops, actOp(m.Name, layer, fp.MoE.ExpertFFN, fp.GatedMLP, CatRoutedExperts, true))
		}
		// A decoder layer: a numbered module with an attention child adds two residuals.
		if digits.MatchString(last) {
			for _, c := range children[m.Name] {
				if attnParts[lastPart(c.Name)] {
					ops = append(ops, Op{Module: m.Name, Name: "residual_add", Kind: OpElementwise, Category: CatOther,
						Layer: layerOf(m.Name), ElemsPerToken: 2 * 3 * fp.Hidden, FlopsPerToken: 2 * fp.Hidden})
					break
				}
			}
		}
	}
	return ops
}

func actOp(module string, layer int, inter int64, gated bool, cat Category, perAssignment bool) Op {
	op := Op{Module: module, Name: "mlp_activation", Kind: OpElementwise, Category: cat, Layer: layer, PerAssignment: perAssignment}
	if gated {
		op.ElemsPerToken, op.FlopsPerToken = 3*inter, 5*inter // read gate and up, write act(gate)*up
	} else {
		op.ElemsPerToken, op.FlopsPerToken = 2*inter, 8*inter // read, write; GELU's tanh polynomial
	}
	return op
}

// mlpIntermediate is the MLP's inner width from its up (or gate, or fc1) projection; zero when
// the MLP's experts are fused (their activation is the experts op's).
func mlpIntermediate(children []model.Module) int64 {
	for _, c := range children {
		switch lastPart(c.Name) {
		case "up_proj", "gate_proj", "w1", "w3", "c_fc", "fc1", "fc_in", "dense_h_to_4h":
			for _, p := range c.Params {
				if p.Name == "weight" && len(p.Shape) == 2 {
					if c.Class == "Conv1D" { // GPT-2 stores [in, out]
						return p.Shape[1]
					}
					return p.Shape[0]
				}
			}
		}
	}
	return 0
}

func layerTypes(cfg map[string]any) []string {
	raw, ok := cfg["layer_types"].([]any)
	if !ok {
		return nil
	}
	out := make([]string, len(raw))
	for i, v := range raw {
		out[i], _ = v.(string)
	}
	return out
}

// ParamCategories sums unique parameters by category.
func ParamCategories(d *model.Dump, ops []Op) map[Category]int64 {
	out := map[Category]int64{}
	for _, op := range ops {
		if op.Tied {
			continue
		}
		switch op.Kind {
		case OpGEMM, OpExperts, OpEmbedding:
			out[op.Category] += op.Numel
		case OpElementwise:
			out[op.Category] += op.WeightElems
		}
	}
	return out
}

// ActiveParams is the parameters one token uses: everything but routed experts, plus top_k/E
// of them (Mixtral-8x7B: 12.9B of 46.7B; DeepSeek-V3: 37.5B of 671B).
func ActiveParams(cats map[Category]int64, fp Fingerprint) float64 {
	var total float64
	for c, n := range cats {
		if c == CatRoutedExperts && fp.MoE != nil {
			total += float64(n) * float64(fp.MoE.TopK) / float64(fp.MoE.RoutedExperts)
			continue
		}
		total += float64(n)
	}
	return total
}
