package layout

import (
	"math"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
)

func fineTuned(t *testing.T, name string, f analyzer.FineTune) *analyzer.Model {
	t.Helper()
	m, err := zooModel(t, name).WithFineTune(f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func one(mbs, seq int64) Layout {
	return Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 1, EP: 1, MBS: mbs, GBS: mbs, Seq: seq}
}

// QLoRA keeps no 16-bit copy of its base: Llama-2-7B's 32 layers hold 6,476,005,376 linear
// weights (per layer 4·4096² + 3·4096·11008) in NF4 at 4.127 bits, the embedding and LM head
// (2 x 32000 x 4096) and the norms in 16 bits. Counted by hand, against plain LoRA's 2 bytes
// for every parameter.
func TestQLoRAWeightsByHand(t *testing.T) {
	linear := 32.0 * (4*4096*4096 + 3*4096*11008)
	rest := 6738415616 - linear
	l := one(4, 1024)
	q := TrainingMemory(fineTuned(t, "Llama-2-7b", analyzer.FineTune{LoRARank: 8, LoRATargets: []string{"*q_proj", "*v_proj"}, QLoRA: true}), l)
	lora := TrainingMemory(fineTuned(t, "Llama-2-7b", analyzer.FineTune{LoRARank: 8, LoRATargets: []string{"*q_proj", "*v_proj"}}), l)
	adapters := 32.0 * 2 * 8 * (4096 + 4096)
	want := linear*analyzer.NF4Bytes + 2*rest + 2*adapters
	if math.Abs(q.Weights-want) > 1e6 {
		t.Errorf("QLoRA weights %.4g B, by hand %.4g B", q.Weights, want)
	}
	if want := 2 * (6738415616 + adapters); math.Abs(lora.Weights-want) > 1e6 {
		t.Errorf("LoRA weights %.4g B, by hand %.4g B", lora.Weights, want)
	}
	// the Hugging Face stack's kbit preparation upcasts what it left unquantized
	l.Stack, l.UpcastUnquantized = "hf", true
	up := TrainingMemory(fineTuned(t, "Llama-2-7b", analyzer.FineTune{LoRARank: 8, LoRATargets: []string{"*q_proj", "*v_proj"}, QLoRA: true}), l)
	if d := up.Weights - q.Weights; math.Abs(d-2*rest) > 1e6 {
		t.Errorf("prepare_model_for_kbit_training adds %.4g B, want 2 B x %.0f unquantized parameters", d, rest)
	}
}

// A frozen base is sharded like any parameter under ZeRO-3 and FSDP (it was replicated): the 8 x
// H100 Llama-2-70B LoRA run of PEFT's DeepSpeed guide holds an eighth of the base per GPU; an
// FP8 base (NeMo's FP8 LoRA) is its data and transpose, 2 bytes a weight, never 16 bits plus a
// cast copy.
func TestFrozenBaseShardedAndFP8(t *testing.T) {
	m := fineTuned(t, "Llama-2-70b", analyzer.FineTune{LoRARank: 8})
	l := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 8, GBS: 64, Seq: 2048, ZeRO: 3, Framework: DeepSpeed, Recompute: "full"}
	mem := TrainingMemory(m, l)
	if base := 2 * float64(zooModel(t, "Llama-2-70b").TotalParams) / 8; mem.Weights > 1.01*base || mem.Weights < base {
		t.Errorf("ZeRO-3 LoRA base per GPU %.1f GiB, want an eighth of 2 B x 69B = %.1f GiB", mem.Weights/(1<<30), base/(1<<30))
	}
	l.ZeRO = 1
	if rep := TrainingMemory(m, l); rep.Weights < 7*mem.Weights {
		t.Errorf("ZeRO-1 keeps the whole base on each GPU: %.1f GiB", rep.Weights/(1<<30))
	}
	fp8 := fineTuned(t, "Llama-2-70b", analyzer.FineTune{LoRARank: 16, LoRATargets: []string{"*q_proj", "*k_proj", "*v_proj"}, BaseDType: "fp8"})
	meg := Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 1, MBS: 1, GBS: 8, Seq: 4096, ZeRO: 1, DistOptimizer: true, Precision: "fp8"}
	got := TrainingMemory(fp8, meg).Weights
	bf16 := TrainingMemory(fineTuned(t, "Llama-2-70b", analyzer.FineTune{LoRARank: 16, LoRATargets: []string{"*q_proj", "*k_proj", "*v_proj"}}), meg).Weights
	if got > 0.55*bf16 || got < 2*64e9 {
		t.Errorf("FP8 base %.1f GiB against a 16-bit base with its FP8 cache %.1f GiB: want 2 B a linear weight", got/(1<<30), bf16/(1<<30))
	}
}

// What trainable parameters cost per stack's precision policy: mixed 2 + 4 + 4 + 8, pure bf16
// 2 + 2 + 4 (torch.optim's moments take the parameters' dtype), fp32 under autocast 4 + 4 + 8.
func TestParamDTypeBytes(t *testing.T) {
	m := zooModel(t, "Llama-3.2-1B-Instruct")
	n := float64(m.TotalParams)
	for _, c := range []struct {
		dtype string
		want  float64
	}{{"", 18}, {"bf16", 8}, {"fp32", 16}} {
		l := one(1, 512)
		l.ParamDType = c.dtype
		mem := TrainingMemory(m, l)
		got := (mem.Weights + mem.Gradients + mem.MasterWeights + mem.Optimizer) / n
		if math.Abs(got-c.want) > 0.3 { // the tied embedding is counted once
			t.Errorf("param dtype %q: %.2f B per parameter, want %.0f", c.dtype, got, c.want)
		}
	}
}

// Frozen layers keep only what their input gradient needs: LoRA on q and v saves less than LoRA
// on every linear layer, which saves less than full training; freezing the lower half of a
// model (no adapters there) runs no backward through it, so it saves about half as much.
func TestFrozenActivations(t *testing.T) {
	l := one(4, 2048)
	l.Framework = FSDP
	full := TrainingMemory(zooModel(t, "Llama-3.1-8B"), l).Activations
	all := TrainingMemory(fineTuned(t, "Llama-3.1-8B", analyzer.FineTune{LoRARank: 16}), l).Activations
	qv := TrainingMemory(fineTuned(t, "Llama-3.1-8B", analyzer.FineTune{LoRARank: 16, LoRATargets: []string{"*q_proj", "*v_proj"}}), l).Activations
	if !(qv < 0.9*all && math.Abs(all/full-1) < 0.01) {
		t.Errorf("activations: LoRA q,v %.2f, LoRA all-linear %.2f (the adapters' rank-16 intermediates beside full training's), full %.2f GiB", qv/(1<<30), all/(1<<30), full/(1<<30))
	}
	half := TrainingMemory(fineTuned(t, "Llama-3.1-8B", analyzer.FineTune{Freeze: []string{"model.embed_tokens", "model.layers.[0-9].*", "model.layers.1[0-5].*"}}), l).Activations
	if r := half / full; r < 0.45 || r > 0.55 {
		t.Errorf("the lower 16 of 32 layers frozen: %.2f of full training's activations, want about half", r)
	}
	drop := TrainingMemory(fineTuned(t, "Llama-3.1-8B", analyzer.FineTune{LoRARank: 16, LoRADropout: 0.1}), l).Activations
	if drop <= all {
		t.Errorf("LoRA dropout saves each adapter's dropped-out input: %.2f <= %.2f GiB", drop/(1<<30), all/(1<<30))
	}
}

// The loss modes hold the logits as their code does: eager 10 B a vocabulary entry, chunked 3,
// fused 2.
func TestLossModes(t *testing.T) {
	m := zooModel(t, "Llama-3.1-8B")
	tokens, V := 4.0*2048, 128256.0
	for _, c := range []struct {
		loss string
		per  float64
	}{{LossEager, 10}, {LossChunked, 3}, {LossFused, 2}} {
		l := one(4, 2048)
		l.Framework, l.Loss = FSDP, c.loss
		if got := TrainingMemory(m, l).Logits; math.Abs(got-c.per*tokens*V) > 1 {
			t.Errorf("loss %s: logits %.3g B, want %.0f B x %.0f tokens x %.0f", c.loss, got, c.per, tokens, V)
		}
	}
}

// Every stack validates, names its source, and its knobs are accepted by a layout.
func TestStacks(t *testing.T) {
	m := zooModel(t, "Llama-3.1-8B")
	for _, name := range StackNames() {
		st := Stacks[name]
		if st.Source == "" || st.Title == "" || st.Name != name {
			t.Errorf("stack %s: name, title and source are required", name)
		}
		l := st.Knobs().Apply(one(1, 2048))
		l.ZeRO, l.Recompute = st.ZeRO, st.DefaultRecompute(false)
		if err := l.Validate(m.Fingerprint); err != nil {
			t.Errorf("stack %s: %v", name, err)
		}
		if !strings.Contains(l.String(), name) {
			t.Errorf("stack %s: the layout's name %q does not say it", name, l.String())
		}
	}
	if _, err := LookupStack("nope"); err == nil || !strings.Contains(err.Error(), "torchtune") {
		t.Errorf("an unknown stack lists the known ones: %v", err)
	}
}

// A layout predicted over the GPU's memory but within the uncertainty is "tight" and may run,
// but it never ranks above a layout under the capacity unless asked (--allow-tight); when only
// such layouts remain, the plan says so and names a change that brings one under the capacity.
func TestOverCapacityRanksLast(t *testing.T) {
	m, k := llama70b(t)
	tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 8)
	o := PlanOptions{GPUs: 64, GBS: 128, Seq: 8192, MemoryBytes: 1 << 50, Domain: 8, Top: 200, ZeRO: []int{1}}
	free, err := tr.PlanTrain(o)
	if err != nil || free.Feasible == 0 {
		t.Fatal(err)
	}
	// a capacity just under the fastest layout's memory: it becomes tight and over
	o.MemoryBytes = free.Top[0].Memory.Total / 1.03
	plan, err := tr.PlanTrain(o)
	if err != nil {
		t.Fatal(err)
	}
	seenUnder := false
	for i, c := range plan.Top {
		if c.Fit.Over && i+1 < len(plan.Top) && !plan.Top[i+1].Fit.Over {
			t.Fatalf("rank %d is over the capacity (%s) yet ranks above rank %d, which is under it", i+1, c.Fit.Verdict(), i+2)
		}
		seenUnder = seenUnder || !c.Fit.Over
	}
	if !seenUnder || plan.Top[0].Fit.Over {
		t.Fatalf("a layout under the capacity exists and must rank first: %s", plan.Top[0].Fit.Verdict())
	}
	if !strings.Contains(free.Top[0].Fit.Verdict(), "fits") || !strings.Contains(CheckTraining("t", free.Top[0].Memory, o.MemoryBytes).Verdict(), "over the capacity") {
		t.Errorf("the verdict must say over the capacity")
	}
	o.AllowTight = true
	allowed, err := tr.PlanTrain(o)
	if err != nil {
		t.Fatal(err)
	}
	if allowed.Top[0].Step.StepTime > plan.Top[0].Step.StepTime {
		t.Errorf("--allow-tight ranks by speed: %.3f s first, slower than without it (%.3f s)", allowed.Top[0].Step.StepTime, plan.Top[0].Step.StepTime)
	}
}
