package layout

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/examples"
	"github.com/mrep-dev/mrep/model"
)

// LoRA r=16 on every linear layer of Llama-3.1-8B, counted by hand: per layer q and o
// 16·(4096+4096), k and v 16·(4096+1024), gate, up and down 16·(4096+14336): 1,310,720, times 32
// layers = 41,943,040 trainable parameters (PEFT prints the same for this configuration); the
// 8,030,261,248 base parameters are all frozen.
func TestLoRAParametersByHand(t *testing.T) {
	m := zooModel(t, "Llama-3.1-8B")
	ft, err := m.WithFineTune(analyzer.FineTune{LoRARank: 16})
	if err != nil {
		t.Fatal(err)
	}
	sp := paramsOnStage(ft, Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 1, EP: 1, MBS: 1, GBS: 1, Seq: 1}, true)
	perLayer := 2*16*(4096+4096) + 2*16*(4096+1024) + 3*16*(4096+14336)
	if perLayer != 1_310_720 || sp.Trainable != float64(32*perLayer) || sp.Frozen != float64(m.TotalParams) {
		t.Errorf("LoRA r=16: trainable %.0f (want %d), frozen %.0f (want %d)", sp.Trainable, 32*perLayer, sp.Frozen, m.TotalParams)
	}
	// the time model skips the frozen base's weight-gradient GEMMs: the backward of a LoRA
	// step does about the forward's work, not twice it
	s := analyzer.DefaultScenario()
	full, _ := m.AnalyzeTotals(analyzer.Training, s, analyzer.Achievable)
	lora, _ := ft.AnalyzeTotals(analyzer.Training, s, analyzer.Achievable)
	if r := lora.Cost.FExecuted / full.Cost.FExecuted; r < 0.6 || r > 0.72 {
		t.Errorf("a LoRA step executes %.2f of a full step's FLOPs, want about 2/3 (forward + input gradients)", r)
	}
	if _, err := m.WithFineTune(analyzer.FineTune{LoRARank: 16, LoRATargets: []string{"no.such.*"}}); err == nil || !strings.Contains(err.Error(), "matches no linear layer") {
		t.Errorf("a target that matches nothing: %v", err)
	}
	if _, err := m.WithFineTune(analyzer.FineTune{Freeze: []string{"["}}); err == nil {
		t.Error("a malformed pattern must be refused")
	}
}

// llama65B is LLaMA-65B (Touvron et al. 2023, Table 2: 8192 wide, 64 heads, 80 layers; the
// released config's 22,016-wide MLP and 32,000-token vocabulary) built from the bundled
// LLaMA-2-7B module tree, which has the same structure at 4096/11008/32 layers.
func llama65B(t testing.TB) *analyzer.Model {
	t.Helper()
	d, err := examples.Decode("Llama-2-7b")
	if err != nil {
		t.Fatal(err)
	}
	resize := func(n int64) int64 {
		switch n {
		case 4096:
			return 8192
		case 11008:
			return 22016
		}
		return n
	}
	var mods []model.Module
	for _, mod := range d.Modules {
		if !strings.Contains(mod.Name, "layers.0") && strings.Contains(mod.Name, "layers.") {
			continue
		}
		copies := 1
		if strings.Contains(mod.Name, "layers.0") {
			copies = 80
		}
		for i := 0; i < copies; i++ {
			c := mod
			c.Name = strings.Replace(mod.Name, "layers.0", fmt.Sprintf("layers.%d", i), 1)
			c.Params = nil
			for _, p := range mod.Params {
				q := p
				q.Shape = nil
				q.Numel = 1
				for _, x := range p.Shape {
					q.Shape = append(q.Shape, resize(x))
					q.Numel *= resize(x)
				}
				q.Stats = nil
				c.Params = append(c.Params, q)
			}
			mods = append(mods, c)
		}
	}
	d.Modules = mods
	cfg := map[string]any{}
	for k, v := range d.Config {
		cfg[k] = v
	}
	for k, v := range map[string]int64{"hidden_size": 8192, "intermediate_size": 22016, "num_attention_heads": 64, "num_key_value_heads": 64, "num_hidden_layers": 80} {
		cfg[k] = json.Number(fmt.Sprint(v))
	}
	d.Config = cfg
	m := analyzer.NewModel(d)
	if m.Fingerprint.Layers != 80 || m.Fingerprint.Hidden != 8192 || m.TotalParams < 65e9 || m.TotalParams > 65.5e9 {
		t.Fatalf("LLaMA-65B: %d layers, hidden %d, %d parameters", m.Fingerprint.Layers, m.Fingerprint.Hidden, m.TotalParams)
	}
	return m
}

// QLoRA (Dettmers et al. 2023): "QLoRA reduces the average memory requirements of finetuning a
// 65B parameter model from >780GB of GPU memory to <48GB". With its settings (NF4 base with
// double quantization, LoRA r=64 on every linear layer, 16-bit adapters, paged 32-bit AdamW whose
// state pages to host memory, gradient checkpointing, batch 1) LLaMA-65B fits one 48 GB GPU;
// the same job as full 16-bit fine-tuning does not come near.
func TestQLoRA65BFitsOne48GBGPU(t *testing.T) {
	base := llama65B(t)
	m, err := base.WithFineTune(analyzer.FineTune{LoRARank: 64, QLoRA: true})
	if err != nil {
		t.Fatal(err)
	}
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 1, EP: 1, MBS: 1, GBS: 16, Seq: 512, Recompute: "full", Framework: DeepSpeed, OffloadOptimizer: true}
	if err := l.Validate(m.Fingerprint); err != nil {
		t.Fatal(err)
	}
	f := CheckTraining("QLoRA of LLaMA-65B", TrainingMemory(m, l), 48*(1<<30))
	if !f.Fits {
		t.Errorf("%s", f.Verdict())
	}
	full := CheckTraining("full fine-tune", TrainingMemory(base, Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 1, EP: 1, MBS: 1, GBS: 16, Seq: 512, Recompute: "full", Framework: DeepSpeed}), 48*(1<<30))
	if full.Fits || full.Memory.Total < 780e9*0.9 {
		t.Errorf("full 16-bit fine-tuning of 65B needs over 780 GB: %s", full.Verdict())
	}
	t.Log(f.Verdict())
}

// Invariants of the memory model over many layouts and settings: freezing more never needs more
// memory; offloading never needs more GPU memory and never takes less time; more recomputation
// never keeps more activations.
func TestMemoryInvariants(t *testing.T) {
	m, k := llama70b(t)
	s := analyzer.DefaultScenario()
	freezes := [][]string{nil, {"model.embed_tokens"}, {"model.embed_tokens", "model.layers.[0-3].*"}, {"model.embed_tokens", "model.layers.*"}}
	var models []*analyzer.Model
	for _, f := range freezes {
		fm, err := m.WithFineTune(analyzer.FineTune{Freeze: f})
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, fm)
	}
	layouts := []Layout{
		{TP: 8, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 1, GBS: 64, Seq: 4096, DistOptimizer: true},
		{TP: 4, PP: 4, VP: 5, CP: 2, DP: 2, EP: 1, MBS: 1, GBS: 128, Seq: 8192, DistOptimizer: true},
		{TP: 2, PP: 1, VP: 1, CP: 1, DP: 32, EP: 1, MBS: 2, GBS: 128, Seq: 4096, ZeRO: 3, Framework: FSDP},
		{TP: 8, PP: 2, VP: 1, CP: 1, DP: 4, EP: 1, MBS: 1, GBS: 32, Seq: 8192, ZeRO: 2, Framework: DeepSpeed},
	}
	modes := []string{"none", "selective", "selective:core_attn,act", "selective:core_attn,act,layernorm", "selective:core_attn,act,layernorm,mlp", "full"}
	for _, base := range layouts {
		for _, opt := range []string{"adamw", "adamw-bf16", "adam8bit", "adafactor", "sgd"} {
			l := base
			l.Optimizer = opt
			prev := -1.0
			for i, fm := range models {
				got := TrainingMemory(fm, l).Total
				if prev >= 0 && got > prev {
					t.Errorf("%s %s: freezing more (%v) needs more memory: %.2f > %.2f GiB", describe(l), opt, freezes[i], got/(1<<30), prev/(1<<30))
				}
				prev = got
			}
		}
		prevAct := -1.0
		for _, rc := range modes {
			l := base
			l.Recompute = rc
			a := TrainingMemory(m, l).Activations
			if prevAct >= 0 && a > prevAct {
				t.Errorf("%s: recompute %s keeps more activations than the mode before it", describe(l), rc)
			}
			prevAct = a
		}
		tr := NewTrainer(m, s, k.p, k.peak, 8)
		plain, err := tr.Train(base)
		if err != nil {
			t.Fatal(err)
		}
		mem := TrainingMemory(m, base)
		for _, off := range []Layout{{OffloadOptimizer: true}, {OffloadParams: true}, {OffloadActivations: 4}} {
			l := base
			l.OffloadOptimizer, l.OffloadParams, l.OffloadActivations = off.OffloadOptimizer, off.OffloadParams, off.OffloadActivations
			if l.OffloadParams && l.Stage() < 3 {
				l.ZeRO = 3
			}
			if l.OffloadActivations > 0 && l.framework() == Megatron && l.PP > 1 {
				continue // Megatron offloads activations only without pipelining (Validate refuses it)
			}
			ref, refMem := plain, mem
			if l.ZeRO != base.ZeRO {
				noOff := l
				noOff.OffloadParams = false
				ref, _ = tr.Train(noOff)
				refMem = TrainingMemory(m, noOff)
			}
			st, err := tr.Train(l)
			if err != nil {
				t.Fatal(err)
			}
			got := TrainingMemory(m, l)
			if got.Total > refMem.Total || got.Host <= 0 {
				t.Errorf("%s offload %+v: GPU memory %.2f > %.2f GiB or nothing on the host", describe(l), off, got.Total/(1<<30), refMem.Total/(1<<30))
			}
			if st.StepTime < ref.StepTime {
				t.Errorf("%s offload %+v: %.3f s is faster than without offload %.3f s", describe(l), off, st.StepTime, ref.StepTime)
			}
		}
	}
}
