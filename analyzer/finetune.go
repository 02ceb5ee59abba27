package analyzer

import (
	"fmt"
	"path"
	"strings"
)

// NF4Bytes is QLoRA's storage per base weight: 4-bit NormalFloat with double quantization,
// 4 + 8/64 + 32/(64·256) bits = 4.127 bits (Dettmers et al. 2023, section 3: 0.127 bits of
// constants per parameter after double quantization, blocks of 64 then 256).
const NF4Bytes = (4 + 8.0/64 + 32.0/(64*256)) / 8

// FineTune is how a training job changes the dumped model: parameters frozen by pattern,
// low-rank adapters (LoRA, Hu et al. 2021) on the matching linear layers, and QLoRA's 4-bit
// base (Dettmers et al. 2023). The zero value trains every parameter the dump marks trainable.
type FineTune struct {
	// Freeze are glob patterns (path.Match: * matches any run of characters, dots included)
	// over module names and module.param names; a match freezes the parameter.
	Freeze []string `json:"freeze,omitempty"`
	// LoRARank > 0 adds adapters A (in x r) and B (r x out) beside each targeted linear layer
	// and freezes every other parameter, as PEFT does.
	LoRARank int64 `json:"lora_rank,omitempty"`
	// LoRATargets are glob patterns over module names; empty is every linear layer of the
	// attention and MLP blocks (PEFT's "all-linear": not the LM head, not routed experts).
	LoRATargets []string `json:"lora_targets,omitempty"`
	// QLoRA keeps the frozen base of the targeted layers in NF4, dequantized to 16 bits for
	// each forward and backward pass.
	QLoRA bool `json:"qlora,omitempty"`
	// BaseDType is how the frozen base of the adapted layers is stored: bf16 (""), fp8 (NeMo's
	// and Megatron-Bridge's FP8 LoRA recipes keep the base as Transformer Engine FP8 parameters:
	// the data and its transpose for the input-gradient GEMM, no 16-bit copy), fp4 (NVFP4 with
	// an E4M3 scale per 16, both orientations) or nf4 (QLoRA).
	BaseDType string `json:"base_dtype,omitempty"`
	// LoRADropout > 0 applies dropout to each adapter's input, as PEFT's lora_dropout does: every
	// adapted layer then saves its own dropped-out copy of the input and the mask.
	LoRADropout float64 `json:"lora_dropout,omitempty"`
}

// BaseBytes is a frozen base weight's storage per element under a base dtype (0: the
// scenario's weight bytes).
func BaseBytes(dtype string) (float64, error) {
	switch strings.ToLower(dtype) {
	case "", "bf16", "fp16":
		return 0, nil
	case "fp8":
		return 2, nil // FP8 data and its transpose (Transformer Engine's Float8Tensor caches both)
	case "fp4", "nvfp4":
		return 2 * (0.5 + 1.0/16), nil // row- and column-wise NVFP4 with E4M3 scales per 16
	case "nf4":
		return NF4Bytes, nil
	}
	return 0, fmt.Errorf("base dtype %q: want bf16, fp8, fp4 or nf4", dtype)
}

// baseBytes is the storage of an adapted layer's frozen base.
func (f FineTune) baseBytes() float64 {
	if f.QLoRA {
		return NF4Bytes
	}
	b, _ := BaseBytes(f.BaseDType)
	return b
}

// Flags are the command-line flags that ask for this fine-tune (analyze, plan train), as
// argument words: what a printed command carries to reproduce it.
func (f FineTune) Flags() []string {
	var out []string
	for _, p := range f.Freeze {
		out = append(out, "--freeze", p)
	}
	if f.LoRARank > 0 {
		out = append(out, "--lora-rank", fmt.Sprint(f.LoRARank))
	}
	for _, p := range f.LoRATargets {
		out = append(out, "--lora-targets", p)
	}
	if f.QLoRA {
		out = append(out, "--qlora")
	}
	if f.BaseDType != "" && !f.QLoRA {
		out = append(out, "--base-dtype", f.BaseDType)
	}
	if f.LoRADropout > 0 {
		out = append(out, "--lora-dropout", fmt.Sprint(f.LoRADropout))
	}
	return out
}

// Active says whether the fine-tune changes anything.
func (f FineTune) Active() bool { return len(f.Freeze) > 0 || f.LoRARank > 0 || f.QLoRA }

// Quantized says whether the adapted base is stored below 16 bits.
func (f FineTune) Quantized() bool { return f.baseBytes() > 0 }

// Kind names the fine-tune for plans and reports: "QLoRA r=64", "LoRA r=16 (fp8 base)",
// "frozen: PATTERNS", or "" for full training.
func (f FineTune) Kind() string {
	switch {
	case f.QLoRA:
		return fmt.Sprintf("QLoRA r=%d (nf4 base)", f.LoRARank)
	case f.LoRARank > 0 && f.BaseDType != "":
		return fmt.Sprintf("LoRA r=%d (%s base)", f.LoRARank, strings.ToLower(f.BaseDType))
	case f.LoRARank > 0:
		return fmt.Sprintf("LoRA r=%d", f.LoRARank)
	case len(f.Freeze) > 0:
		return "frozen: " + strings.Join(f.Freeze, ", ")
	}
	return ""
}

// Validate checks the patterns and sizes.
func (f FineTune) Validate() error {
	for _, p := range append(append([]string(nil), f.Freeze...), f.LoRATargets...) {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("pattern %q: %w", p, err)
		}
	}
	switch {
	case f.LoRARank < 0 || f.LoRARank > 1<<16:
		return fmt.Errorf("lora rank %d: want 1 to 65536", f.LoRARank)
	case f.QLoRA && f.LoRARank == 0:
		return fmt.Errorf("qlora needs a lora rank (the adapters are what trains)")
	case len(f.LoRATargets) > 0 && f.LoRARank == 0:
		return fmt.Errorf("lora targets need a lora rank")
	case f.LoRADropout < 0 || f.LoRADropout >= 1 || f.LoRADropout != f.LoRADropout:
		return fmt.Errorf("lora dropout %v: want 0 to <1", f.LoRADropout)
	case f.LoRADropout > 0 && f.LoRARank == 0:
		return fmt.Errorf("lora dropout needs a lora rank")
	case f.BaseDType != "" && f.LoRARank == 0:
		return fmt.Errorf("a base dtype describes a LoRA's frozen base: it needs a lora rank")
	case f.QLoRA && f.BaseDType != "" && strings.ToLower(f.BaseDType) != "nf4":
		return fmt.Errorf("qlora keeps its base in nf4, not %s", f.BaseDType)
	}
	if _, err := BaseBytes(f.BaseDType); err != nil {
		return err
	}
	return nil
}

func matchAny(patterns []string, names ...string) bool {
	for _, p := range patterns {
		for _, n := range names {
			if ok, _ := path.Match(p, n); ok {
				return true
			}
		}
	}
	return false
}

// loraTarget says whether an op gets an adapter.
func (f FineTune) loraTarget(op Op) bool {
	if op.Kind != OpGEMM || op.Tied {
		return false
	}
	if len(f.LoRATargets) > 0 {
		return matchAny(f.LoRATargets, op.Module)
	}
	switch op.Category {
	case CatAttention, CatDenseFFN, CatSharedExperts:
		return true
	}
	return false
}

// WithFineTune is the model a fine-tune trains: frozen ops marked, LoRA adapters added as
// trainable GEMMs beside their base, the QLoRA base stored in NF4. m is not changed.
func (m *Model) WithFineTune(f FineTune) (*Model, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if !f.Active() {
		return m, nil
	}
	out := *m
	out.Ops = nil
	matched, targets, weighted, frozenWeights := 0, 0, 0, 0
	for _, op := range m.Ops {
		if op.Numel > 0 {
			weighted++
		}
		if len(f.Freeze) > 0 && matchAny(f.Freeze, op.Module, op.Module+"."+strings.TrimPrefix(op.Name, op.Module+".")) {
			op.Frozen = true
			matched++
			if op.Numel > 0 {
				frozenWeights++
			}
		}
		if f.LoRARank > 0 {
			target := f.loraTarget(op)
			op.Frozen = true // LoRA trains the adapters only
			if op.Kind == OpGEMM && !op.Tied && op.Layer >= 0 && f.Quantized() {
				// a quantized base is every linear layer of the decoder layers, adapted or not
				// (bitsandbytes' load_in_4bit replaces each nn.Linear but the LM head; NeMo's
				// FP8 parameters are every Transformer Engine linear)
				op.QuantBytes = f.baseBytes()
				op.QuantNative = !f.QLoRA
			}
			if target {
				if w := min(op.In, op.Out); w > 0 && f.LoRARank > w {
					return nil, fmt.Errorf("lora rank %d exceeds the width of %s (%d in, %d out): an adapter's rank is at most its layer's", f.LoRARank, op.Module, op.In, op.Out)
				}
				targets++
				op.Adapter = f.LoRARank
				op.AdapterDropout = f.LoRADropout
				out.Ops = append(out.Ops, op,
					Op{Module: op.Module + ".lora_A", Name: "lora_A", Kind: OpGEMM, Category: op.Category, Layer: op.Layer, Numel: op.In * f.LoRARank, In: op.In, Out: f.LoRARank},
					Op{Module: op.Module + ".lora_B", Name: "lora_B", Kind: OpGEMM, Category: op.Category, Layer: op.Layer, Numel: f.LoRARank * op.Out, In: f.LoRARank, Out: op.Out})
				continue
			}
		}
		out.Ops = append(out.Ops, op)
	}
	if f.LoRARank == 0 && frozenWeights > 0 && frozenWeights >= weighted {
		return nil, fmt.Errorf("--freeze %s freezes every parameter of %s: nothing would train (add --lora-rank to train adapters beside the frozen base)", strings.Join(f.Freeze, ","), m.Name)
	}
	if len(f.Freeze) > 0 && matched == 0 {
		return nil, fmt.Errorf("--freeze %s matches no parameter of %s (patterns match module names such as %q)", strings.Join(f.Freeze, ","), m.Name, sampleModule(m))
	}
	if f.LoRARank > 0 && targets == 0 {
		return nil, fmt.Errorf("--lora-targets %s matches no linear layer of %s (patterns match module names such as %q)", strings.Join(f.LoRATargets, ","), m.Name, sampleModule(m))
	}
	ft := f
	out.FineTune = &ft
	out.Params = map[Category]int64{}
	for c, n := range ParamCategories(nil, out.Ops) {
		out.Params[c] = n
	}
	var total int64
	for _, n := range out.Params {
		total += n
	}
	out.TotalParams = total
	out.Active = ActiveParams(out.Params, out.Fingerprint)
	out.class, out.classes = classify(out.Ops)
	return &out, nil
}

func sampleModule(m *Model) string {
	for _, op := range m.Ops {
		if op.Kind == OpGEMM && op.Layer >= 0 {
			return op.Module
		}
	}
	if len(m.Ops) > 0 {
		return m.Ops[0].Module
	}
	return ""
}

// ParamSplit is a GPU's share of the parameters by what training keeps for them.
type ParamSplit struct {
	Trainable float64 // gradients and optimizer state
	Frozen    float64 // weights only
	// FrozenQuantBytes is the storage of the frozen weights kept quantized (QLoRA), in bytes.
	FrozenQuantBytes float64
	Quantized        float64 // frozen parameters stored quantized
}
