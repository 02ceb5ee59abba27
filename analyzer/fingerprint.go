package analyzer

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/mrep-dev/mrep/model"
)

// MoEInfo describes routed mixture-of-experts layers.
type MoEInfo struct {
	RoutedExperts   int64  `json:"routed_experts"`
	TopK            int64  `json:"top_k"`
	SharedExperts   int64  `json:"shared_experts"`
	DenseFirst      int64  `json:"dense_first_layers"` // first_k_dense_replace
	LayerFreq       int64  `json:"layer_freq"`         // every n-th layer is MoE
	ExpertFFN       int64  `json:"expert_intermediate"`
	MoELayers       int64  `json:"moe_layers"` // counted in the module tree
	ScoringFunction string `json:"scoring_func,omitempty"`
}

// MLAInfo holds multi-head latent attention dimensions (DeepSeek-V2/V3).
type MLAInfo struct {
	QLoraRank  int64 `json:"q_lora_rank"`
	KVLoraRank int64 `json:"kv_lora_rank"`
	QKNope     int64 `json:"qk_nope_head_dim"`
	QKRope     int64 `json:"qk_rope_head_dim"`
	VHead      int64 `json:"v_head_dim"`
}

// Fingerprint is what kind of transformer this is, read from the config and the module tree.
type Fingerprint struct {
	Family           string `json:"family"`
	ModelType        string `json:"model_type,omitempty"`
	Attention        string `json:"attention"` // MHA, GQA, MQA, MLA, none
	SlidingWindow    int64  `json:"sliding_window,omitempty"`
	PositionEncoding string `json:"position_encoding"`
	Normalization    string `json:"normalization"`
	Activation       string `json:"activation"`
	GatedMLP         bool   `json:"gated_mlp"`
	// GLUClamp is the limit a gated MLP clamps its gate (above) and linear half (both sides) to
	// before the activation (GPT-OSS's swiglu_limit, 7): 0 when it does not clamp.
	GLUClamp float64 `json:"glu_clamp,omitempty"`
	// AttnSinks: the attention's softmax has a learnable sink per head (GPT-OSS's sinks).
	AttnSinks      bool     `json:"attn_sinks,omitempty"`
	MoE            *MoEInfo `json:"moe,omitempty"`
	MLA            *MLAInfo `json:"mla,omitempty"`
	TiedEmbeddings bool     `json:"tied_embeddings"`

	Layers       int64 `json:"layers"`
	Hidden       int64 `json:"hidden"`
	Heads        int64 `json:"heads"`
	KVHeads      int64 `json:"kv_heads"`
	HeadDim      int64 `json:"head_dim"`   // q/k head dim (nope + rope for MLA)
	VHeadDim     int64 `json:"v_head_dim"` // v head dim
	Intermediate int64 `json:"intermediate"`
	Vocab        int64 `json:"vocab"`
	MaxPositions int64 `json:"max_positions,omitempty"`
	// CKV is KV-cache elements per token per layer: 2*kv_heads*head_dim, or
	// kv_lora_rank + qk_rope_head_dim for MLA (one latent shared by K and V).
	CKV int64 `json:"c_kv"`
	// Transformer is false for models with no attention (a plain MLP): only GEMMs are costed.
	Transformer bool `json:"transformer"`
	// Warnings name config values that were ignored because no model has them (negative,
	// fractional, absurdly large, inconsistent): the module tree fills in where it can.
	Warnings []string `json:"warnings,omitempty"`
}

// MaxConfigInt bounds a size read from a config: no layer count, width, head count, vocab or
// context length of a real model comes near 2^31.
const MaxConfigInt = 1 << 31

// cfgInt reads the first of keys the config has as a non-negative integer; a value that is
// not one is ignored.
func cfgInt(cfg map[string]any, keys ...string) (int64, bool) { return cfgIntW(cfg, nil, keys...) }

// cfgIntW is cfgInt that says why a value was ignored, naming the key, in warn.
func cfgIntW(cfg map[string]any, warn *[]string, keys ...string) (int64, bool) {
	for _, k := range keys {
		raw, present := cfg[k]
		if !present || raw == nil {
			continue
		}
		v, ok := model.ConfigNumber(cfg, k)
		bad := ""
		switch {
		case !ok:
			bad = "is not a number"
		case math.IsNaN(v) || math.IsInf(v, 0):
			bad = "is not finite"
		case v != math.Trunc(v):
			bad = "is not an integer"
		case v < 0:
			bad = "is negative"
		case v > MaxConfigInt:
			bad = "is beyond any real model"
		}
		if bad != "" {
			if warn != nil {
				*warn = append(*warn, fmt.Sprintf("config %s = %v %s: ignored (override it in the dump's config if the tree cannot tell)", k, raw, bad))
			}
			continue
		}
		return int64(v), true
	}
	return 0, false
}

func cfgString(cfg map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := cfg[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

func cfgBool(cfg map[string]any, key string) (bool, bool) {
	b, ok := cfg[key].(bool)
	return b, ok
}

// Fingerprinted reads the architecture. Config values win; the module tree fills gaps and
// counts what the config only implies (MoE layers, tying, norm classes).
func Fingerprinted(d *model.Dump) Fingerprint {
	cfg := d.TextConfig()
	if cfg == nil {
		cfg = map[string]any{}
	}
	fp := Fingerprint{ModelType: d.Model.Source.ModelType}
	fp.Family = familyOf(d)
	// aliases: HF names first, then GPT-2/nanoGPT (n_embd, n_layer, n_head) and Meta's
	// params.json (dim, n_layers, n_heads, n_kv_heads)
	fp.Hidden, _ = cfgIntW(cfg, &fp.Warnings, "hidden_size", "n_embd", "d_model", "dim")
	fp.Layers, _ = cfgIntW(cfg, &fp.Warnings, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
	fp.Heads, _ = cfgIntW(cfg, &fp.Warnings, "num_attention_heads", "n_head", "num_heads", "n_heads")
	fp.KVHeads, _ = cfgIntW(cfg, &fp.Warnings, "num_key_value_heads", "num_kv_heads", "n_kv_head", "n_kv_heads")
	inferFromTree(d, &fp)
	if mq, ok := cfgBool(cfg, "multi_query"); ok && mq {
		fp.KVHeads = 1
	}
	if fp.KVHeads == 0 || fp.KVHeads > fp.Heads {
		if fp.KVHeads > fp.Heads && fp.Heads > 0 {
			fp.Warnings = append(fp.Warnings, fmt.Sprintf("config has %d KV heads for %d query heads: using %d", fp.KVHeads, fp.Heads, fp.Heads))
		}
		fp.KVHeads = fp.Heads
	}
	fp.HeadDim, _ = cfgIntW(cfg, &fp.Warnings, "head_dim")
	if fp.HeadDim == 0 && fp.Heads > 0 {
		fp.HeadDim = fp.Hidden / fp.Heads
	}
	fp.VHeadDim = fp.HeadDim
	fp.Intermediate, _ = cfgIntW(cfg, &fp.Warnings, "intermediate_size", "n_inner", "ffn_dim")
	if fp.Intermediate == 0 && fp.Hidden > 0 {
		fp.Intermediate = 4 * fp.Hidden // GPT-2's n_inner=null convention
	}
	if v, ok := cfgIntW(cfg, &fp.Warnings, "vocab_size"); ok {
		fp.Vocab = v
	}
	fp.MaxPositions, _ = cfgIntW(cfg, &fp.Warnings, "max_position_embeddings", "n_positions", "block_size", "max_seq_len")
	fp.Activation = cfgString(cfg, "hidden_act", "activation_function", "hidden_activation")

	if r, ok := cfgIntW(cfg, &fp.Warnings, "kv_lora_rank"); ok && r > 0 {
		m := &MLAInfo{KVLoraRank: r}
		m.QLoraRank, _ = cfgIntW(cfg, &fp.Warnings, "q_lora_rank")
		m.QKNope, _ = cfgIntW(cfg, &fp.Warnings, "qk_nope_head_dim")
		m.QKRope, _ = cfgIntW(cfg, &fp.Warnings, "qk_rope_head_dim")
		m.VHead, _ = cfgIntW(cfg, &fp.Warnings, "v_head_dim")
		fp.MLA = m
		fp.HeadDim = m.QKNope + m.QKRope
		fp.VHeadDim = m.VHead
	}

	// Sliding window: Qwen2 carries a window it does not use unless use_sliding_window is set.
	if w, ok := cfgIntW(cfg, &fp.Warnings, "sliding_window"); ok && w > 0 {
		if use, ok := cfgBool(cfg, "use_sliding_window"); !ok || use {
			fp.SlidingWindow = w
		}
	}

	if v, ok := model.ConfigNumber(cfg, "swiglu_limit"); ok && v > 0 && !math.IsInf(v, 0) {
		fp.GLUClamp = v
	}

	fp.Transformer = fp.Heads > 0 && fp.Hidden > 0 && fp.Layers > 0
	attn := attentionModule(d)
	fp.AttnSinks = attentionSinks(d)
	switch {
	case !fp.Transformer && attn != "":
		// attention weights without the sizes to count them: say so, never "none"
		fp.Attention = "unknown"
		var missing []string
		if fp.Heads == 0 {
			missing = append(missing, "num_attention_heads")
		}
		if fp.Hidden == 0 {
			missing = append(missing, "hidden_size")
		}
		if fp.Layers == 0 {
			missing = append(missing, "num_hidden_layers")
		}
		set := make([]string, len(missing))
		for i, k := range missing {
			set[i] = "--set " + k + "=N"
		}
		fp.Warnings = append(fp.Warnings, fmt.Sprintf("the tree has attention (`%s`) but neither the config nor the tree gives %s: "+
			"attention, the KV cache and decode are not counted, so times are too fast. Give them with `%s` "+
			"(or dump with config={...} holding them)", attn, strings.Join(missing, ", "), strings.Join(set, " ")))
	case !fp.Transformer:
		fp.Attention = "none"
	case fp.MLA != nil:
		fp.Attention = "MLA"
	case fp.KVHeads == 1 && fp.Heads > 1:
		fp.Attention = "MQA"
	case fp.KVHeads < fp.Heads:
		fp.Attention = "GQA"
	default:
		fp.Attention = "MHA"
	}
	if fp.MLA != nil {
		fp.CKV = fp.MLA.KVLoraRank + fp.MLA.QKRope
	} else if fp.Transformer {
		fp.CKV = 2 * fp.KVHeads * fp.HeadDim
	}

	fp.PositionEncoding = positionEncoding(cfg, d)
	fp.Normalization = normalization(d)
	fp.GatedMLP = gatedMLP(d)
	if tie, ok := cfgBool(cfg, "tie_word_embeddings"); ok {
		fp.TiedEmbeddings = tie
	}
	for _, m := range d.Modules {
		for _, p := range m.Params {
			if p.TiedTo != "" {
				fp.TiedEmbeddings = true
			}
		}
	}
	fp.MoE = moeInfo(cfg, d, fp, &fp.Warnings)
	return fp
}

// inferFromTree fills the width, vocabulary and depth the config does not give from the module
// tree: the first embedding's weight is [vocab, hidden]; the longest list of blocks of one
// class is the layer stack. Head counts cannot be read from shapes (a [768, 2304] c_attn is
// 12 heads of 64 or 6 of 128), so they are never guessed.
func inferFromTree(d *model.Dump, fp *Fingerprint) {
	if fp.Hidden == 0 || fp.Vocab == 0 {
		for _, m := range d.Modules {
			if m.Class != "Embedding" || len(m.Params) == 0 || len(m.Params[0].Shape) != 2 {
				continue
			}
			sh := m.Params[0].Shape
			if fp.Hidden == 0 {
				fp.Hidden = sh[1]
				fp.Warnings = append(fp.Warnings, fmt.Sprintf("hidden size %d read from the embedding `%s` (the config does not give hidden_size)", sh[1], m.Name))
			}
			if fp.Vocab == 0 {
				fp.Vocab = sh[0]
			}
			break
		}
	}
	if fp.Layers == 0 {
		lists := map[string]bool{}
		for _, m := range d.Modules {
			if m.Class == "ModuleList" || m.Class == "Sequential" {
				lists[m.Name] = true
			}
		}
		best, bestName := int64(0), ""
		counts := map[string]map[string]int64{} // list -> child class -> children
		for _, m := range d.Modules {
			if m.Parent == nil || !lists[*m.Parent] {
				continue
			}
			if counts[*m.Parent] == nil {
				counts[*m.Parent] = map[string]int64{}
			}
			counts[*m.Parent][m.Class]++
			if n := counts[*m.Parent][m.Class]; n > best && len(counts[*m.Parent]) == 1 {
				best, bestName = n, *m.Parent
			}
		}
		if best > 1 && attentionModule(d) != "" {
			fp.Layers = best
			fp.Warnings = append(fp.Warnings, fmt.Sprintf("%d layers read from the block list `%s` (the config does not give num_hidden_layers)", best, bestName))
		}
	}
}

// attentionModule names the first module that looks like attention (by class or by name), or "".
// attentionSinks says whether an attention module holds a learnable softmax sink per head
// (a parameter named sinks: GPT-OSS's self_attn.sinks).
func attentionSinks(d *model.Dump) bool {
	for _, m := range d.Modules {
		for _, p := range m.Params {
			if p.Name == "sinks" {
				return true
			}
		}
	}
	return false
}

func attentionModule(d *model.Dump) string {
	for _, m := range d.Modules {
		if m.Name == "" {
			continue
		}
		leaf := strings.ToLower(m.Name[strings.LastIndexByte(m.Name, '.')+1:])
		cls := strings.ToLower(m.Class)
		if strings.Contains(cls, "attention") || strings.Contains(cls, "selfattn") ||
			leaf == "attn" || leaf == "self_attn" || leaf == "attention" || leaf == "self_attention" {
			return m.Name
		}
	}
	return ""
}

func familyOf(d *model.Dump) string {
	if t := d.Model.Source.ModelType; t != "" {
		return t
	}
	rc := d.Model.RootClass
	return rc[strings.LastIndex(rc, ".")+1:]
}

func positionEncoding(cfg map[string]any, d *model.Dump) string {
	for _, k := range []string{"rope_scaling", "rope_parameters"} {
		if rs, ok := cfg[k].(map[string]any); ok {
			t := cfgString(rs, "rope_type", "type")
			if t != "" && t != "default" {
				return fmt.Sprintf("RoPE (scaled: %s)", t)
			}
		}
	}
	if _, ok := cfg["rope_theta"]; ok {
		return "RoPE"
	}
	if rp, ok := cfg["rope_parameters"].(map[string]any); ok && len(rp) > 0 {
		return "RoPE"
	}
	for _, m := range d.Modules {
		n := strings.ToLower(m.Name)
		if strings.HasSuffix(n, "wpe") || strings.Contains(n, "position_embedding") || strings.Contains(n, "embed_positions") {
			return "learned absolute"
		}
		if strings.Contains(strings.ToLower(m.Class), "rotary") {
			return "RoPE"
		}
	}
	if cfgString(cfg, "position_embedding_type") == "alibi" || cfg["alibi"] == true {
		return "ALiBi"
	}
	return "none detected"
}

func normalization(d *model.Dump) string {
	counts := map[string]int{}
	for _, m := range d.Modules {
		c := strings.ToLower(m.Class)
		switch {
		case strings.Contains(c, "rmsnorm"):
			counts["RMSNorm"]++
		case strings.Contains(c, "layernorm"):
			counts["LayerNorm"]++
		case strings.Contains(c, "batchnorm"):
			counts["BatchNorm"]++
		}
	}
	best, n := "none detected", 0
	for _, k := range []string{"RMSNorm", "LayerNorm", "BatchNorm"} {
		if counts[k] > n {
			best, n = k, counts[k]
		}
	}
	return best
}

func gatedMLP(d *model.Dump) bool {
	for _, m := range d.Modules {
		n := m.Name[strings.LastIndex(m.Name, ".")+1:]
		if n == "gate_proj" || n == "w1" && strings.Contains(m.Name, "mlp") || n == "gate_up_proj" {
			return true
		}
		for _, p := range m.Params {
			if p.Name == "gate_up_proj" {
				return true
			}
		}
	}
	return false
}

func moeInfo(cfg map[string]any, d *model.Dump, fp Fingerprint, warn *[]string) *MoEInfo {
	e, _ := cfgIntW(cfg, warn, "n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
	if e <= 1 {
		return nil
	}
	m := &MoEInfo{RoutedExperts: e, LayerFreq: 1}
	m.TopK, _ = cfgIntW(cfg, warn, "num_experts_per_tok", "moe_top_k", "top_k", "num_selected_experts")
	if m.TopK == 0 {
		m.TopK = 1
	}
	if m.TopK > e {
		*warn = append(*warn, fmt.Sprintf("config top-k %d exceeds the %d routed experts: using %d", m.TopK, e, e))
		m.TopK = e
	}
	m.SharedExperts, _ = cfgIntW(cfg, warn, "n_shared_experts", "num_shared_experts")
	if m.SharedExperts == 0 {
		if v, ok := cfgIntW(cfg, warn, "shared_expert_intermediate_size"); ok && v > 0 {
			m.SharedExperts = 1
		}
	}
	m.DenseFirst, _ = cfgIntW(cfg, warn, "first_k_dense_replace")
	if f, ok := cfgIntW(cfg, warn, "moe_layer_freq", "decoder_sparse_step", "interleave_moe_layer_step"); ok && f > 0 {
		m.LayerFreq = f
	}
	m.ExpertFFN, _ = cfgIntW(cfg, warn, "moe_intermediate_size", "intermediate_size_moe")
	if m.ExpertFFN == 0 {
		m.ExpertFFN = fp.Intermediate
	}
	m.ScoringFunction = cfgString(cfg, "scoring_func")
	layers := map[string]bool{}
	for _, mod := range d.Modules {
		if i := strings.Index(mod.Name, ".experts"); i > 0 {
			layers[mod.Name[:i]] = true
		}
	}
	m.MoELayers = int64(len(layers))
	return m
}

// ConfigTable is the config rows the report shows, in a stable order, as strings.
func ConfigTable(d *model.Dump) [][2]string {
	cfg := d.TextConfig()
	keys := []string{"hidden_size", "n_embd", "num_hidden_layers", "n_layer", "num_attention_heads", "n_head",
		"num_key_value_heads", "head_dim", "intermediate_size", "n_inner", "moe_intermediate_size",
		"n_routed_experts", "num_local_experts", "n_shared_experts", "num_experts_per_tok", "first_k_dense_replace",
		"moe_layer_freq", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
		"scoring_func", "n_group", "topk_group", "sliding_window", "vocab_size", "max_position_embeddings",
		"n_positions", "hidden_act", "activation_function", "rope_theta", "tie_word_embeddings", "dtype"}
	var out [][2]string
	for _, k := range keys {
		v, ok := cfg[k]
		if !ok || v == nil {
			continue
		}
		switch x := v.(type) {
		case json.Number:
			out = append(out, [2]string{k, x.String()})
		case string:
			out = append(out, [2]string{k, x})
		case bool:
			out = append(out, [2]string{k, fmt.Sprint(x)})
		}
	}
	return out
}
