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
	return out
}

// Active says whether the fine-tune changes anything.
func (f FineTune) Active() bool { return len(f.Freeze) > 0 || f.LoRARank > 0 || f.QLoRA }

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
	matched, targets := 0, 0
	for _, op := range m.Ops {
		if len(f.Freeze) > 0 && matchAny(f.Freeze, op.Module, op.Module+"."+strings.TrimPrefix(op.Name, op.Module+".")) {
			op.Frozen = true
			matched++
		}
		if f.LoRARank > 0 {
			target := f.loraTarget(op)
			op.Frozen = true // LoRA trains the adapters only
			if target {
				targets++
				if f.QLoRA {
					op.QuantBytes = NF4Bytes
				}
				out.Ops = append(out.Ops, op,
					Op{Module: op.Module + ".lora_A", Name: "lora_A", Kind: OpGEMM, Category: op.Category, Layer: op.Layer, Numel: op.In * f.LoRARank, In: op.In, Out: f.LoRARank},
					Op{Module: op.Module + ".lora_B", Name: "lora_B", Kind: OpGEMM, Category: op.Category, Layer: op.Layer, Numel: f.LoRARank * op.Out, In: f.LoRARank, Out: op.Out})
				continue
			}
		}
		out.Ops = append(out.Ops, op)
	}
	if len(f.Freeze) > 0 && matched == 0 {
		return nil, fmt.Errorf("--freeze %s matches no parameter of %s (patterns match module names such as %q)", strings.Join(f.Freeze, ","), m.Name, sampleModule(m))
	}
	if f.LoRARank > 0 && targets == 0 {
		return nil, fmt.Errorf("--lora-targets %s matches no linear layer of %s (patterns match module names such as %q)", strings.Join(f.LoRATargets, ","), m.Name, sampleModule(m))
	}
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
