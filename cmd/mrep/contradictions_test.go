package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Flags that say two things at once are refused naming both, instead of being timed as one of
// them (issue 37's list); the consistent forms next to them are timed.
func TestContradictoryFlagsAreRefused(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	base := []string{"analyze", "Llama-3.1-8B", "--phase", "training", "--gpus", "8", "--gbs", "64"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--recompute", "none", "--recompute-layers", "2"}, "--recompute-layers 2 counts fully recomputed layers: it needs --recompute full"},
		{[]string{"--fp8-param-gather"}, "--fp8-param-gather gathers FP8 parameters: it needs --dtype fp8"},
		{[]string{"--dtype", "fp8", "--recipe", "fp8-cs", "--fp8-output-proj"}, "--fp8-output-proj puts Megatron's LM head under MXFP8: it needs --framework megatron and --recipe mxfp8"},
		{[]string{"--dtype", "fp8", "--recipe", "fp8-blockwise", "--fp8-dot-product-attention"}, "--fp8-dot-product-attention runs Megatron's attention in the recipe's FP8: it needs --framework megatron and --recipe fp8-cs, fp8-ds or mxfp8"},
		{[]string{"--framework", "fsdp", "--dtype", "fp8", "--recipe", "fp8-cs", "--fp8-dot-product-attention"}, "--fp8-dot-product-attention runs Megatron's attention in the recipe's FP8: it needs --framework megatron"},
		{[]string{"--fp8-dot-product-attention"}, "--fp8-dot-product-attention runs Megatron's attention in the recipe's FP8: it needs --framework megatron and --recipe fp8-cs, fp8-ds or mxfp8, the recipes Megatron passes it to Transformer Engine for (the run is megatron, bf16)"},
		{[]string{"--framework", "megatron", "--hsdp-replicas", "2"}, "--hsdp-replicas 2 is FSDP's hybrid sharding"},
		{[]string{"--framework", "megatron", "--no-reshard"}, "--no-reshard is FSDP's reshard_after_forward=False"},
		{[]string{"--framework", "fsdp", "--fused-grouped-mlp"}, "--fused-grouped-mlp is Megatron's fused expert MLP (Transformer Engine's CuTe DSL kernels): it needs --framework megatron"},
		{[]string{"--fused-grouped-mlp"}, "fused grouped MLP fuses the routed experts' activation into their GEMMs, and the model is dense"},
		{[]string{"--first-stage-layers", "2"}, "first/last stage layers need pp >= 2"},
		{[]string{"--pp", "2", "--first-stage-layers", "2", "--pipeline-account"}, "uneven first/last stages and accounting the embedding or loss as layers are Megatron alternatives"},
		{[]string{"--framework", "fsdp", "--act-fp8-input-store"}, "act-fp8-input-store is Megatron's activation_func_fp8_input_store: it needs --framework megatron"},
		{[]string{"--framework", "fsdp", "--zero", "1"}, "--framework fsdp --zero 1: FSDP shards gradients and optimizer state"},
		{[]string{"--dp", "3"}, "--gpus 8 and --dp 3 disagree"},
		{[]string{"--dispatcher", "deepep"}, "dispatcher deepep dispatches tokens to experts, and the model is dense"},
		{[]string{"--ep", "8"}, "ep 8 splits experts, and the model is dense"},
		// Megatron's CPU offload runs without pipelining or recompute (transformer_config.py)
		{[]string{"--pp", "2", "--offload-activations", "4"}, "Megatron offloads without pipeline parallelism (pp 2)"},
		{[]string{"--recompute", "selective", "--offload-activations", "4"}, "Megatron offloads without activation recompute"},
		{[]string{"--offload", "params", "--zero", "1"}, "--offload params streams ZeRO-3's parameter shards from host memory (ZeRO-Infinity): it needs --zero 3"},
	} {
		_, _, err := run(t, db, append(append([]string{}, base...), c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze", "Llama-3.1-8B", "--phase", "training", "--gpus", "8", "--gbs", "64", "--freeze", "*"}, "freezes every parameter of Llama-3.1-8B: nothing would train"},
		{[]string{"analyze", "Llama-3.1-8B", "--phase", "training", "--gpus", "8", "--gbs", "64", "--lora-rank", "8192"}, "lora rank 8192 exceeds the width of"},
		// plan train tries stages: none of them 3 is the same contradiction, not "no layout divides"
		{[]string{"plan", "train", "Llama-3.1-8B", "--gpus", "8", "--gbs", "64", "--offload", "params", "--zero", "1", "--zero", "2"}, "it needs --zero 3 (--zero 1, 2 keeps"},
		// Megatron stores the activation's input in FP8 for SwiGLU only (TransformerConfig)
		{[]string{"analyze", "gpt2", "--phase", "training", "--gpus", "8", "--gbs", "64", "--seq", "1024", "--act-fp8-input-store"}, "Megatron stores the activation input in FP8 for SwiGLU only"},
	} {
		if _, _, err := run(t, db, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	for _, ok := range [][]string{{"--dp", "8"}, {"--recompute", "full", "--recompute-layers", "2"}, {"--dtype", "fp8", "--fp8-param-gather"},
		{"--framework", "fsdp", "--no-reshard", "--zero", "2"}, {"--chip", "GB300", "--dtype", "fp8", "--recipe", "mxfp8", "--fp8-output-proj"}, {"--act-fp8-input-store"},
		{"--chip", "GB200", "--dtype", "fp8", "--recipe", "mxfp8", "--fp8-dot-product-attention"},
		{"--pp", "2", "--first-stage-layers", "14"}} {
		if out := mustRun(t, db, append(append([]string{}, base...), ok...)...); !strings.Contains(out, "**Training on 8 GPUs") {
			t.Errorf("%v: %.300s", ok, out)
		}
	}
}

// A fit too large to finish in minutes is refused at once, saying how to narrow it (issue 37:
// 100,000 rows ran for over ten minutes).
func TestCalibrateRefusesUnboundedFits(t *testing.T) {
	dir := t.TempDir()
	var rows []string
	for i := 0; i <= MaxFitRows; i++ {
		rows = append(rows, fmt.Sprintf(`{"id":"r%d","kind":"train_throughput","source":"bound","model":"Llama-3.1-8B","chip":"H100-SXM","dtype":"bf16","gpus":8,"tp":1,"seq":4096,"gbs":64,"mbs":1,"measured":%d,"unit":"tok/s/gpu"}`, i, 1000+i))
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"rows":[`+strings.Join(rows, ",")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err := run(t, filepath.Join(dir, "none.db"), "calibrate", big)
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "5001 rows, more than one fit takes (5000): narrow them with --where") {
		t.Errorf("%d rows: %v", MaxFitRows+1, err)
	}
	t.Logf("refused in %v", time.Since(start))
}

// A training layout that does not fit is answered with the fastest setting its framework
// offers that does (issue 34): Llama-3.1-70B at TP1, two 8k sequences per micro-batch, on 64
// GB200 fits only with activations offloaded; a layout nothing saves says so.
func TestAnalyzeNamesTheSettingThatFits(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	out := mustRun(t, db, "analyze", "Llama-3.1-70B-Instruct", "--phase", "training", "--chip", "GB200", "--dtype", "fp8", "--recipe", "fp8-cs",
		"--gpus", "64", "--gbs", "256", "--mbs", "2", "-s", "8192", "--zero", "3")
	if !strings.Contains(out, "training does NOT fit") || !strings.Contains(out, "offloaded to host (`--offload-activations ") {
		t.Errorf("no fitting setting named:\n%.2000s", out)
	}
	out = mustRun(t, db, "analyze", "Llama-3.1-405B", "--phase", "training", "--chip", "H100", "--gpus", "8", "--gbs", "8")
	if !strings.Contains(out, "None of the settings its framework offers to save memory") {
		t.Errorf("a layout nothing saves:\n%.2000s", out)
	}
}

// --act-fp8-input-store reaches the layout: Llama-3.1-8B's SwiGLU inputs (2 x 14,336 a token in
// each of 32 layers, 8,192 tokens a micro-batch on one GPU) kept in one byte instead of two,
// 7.0 GiB fewer activations by hand.
func TestActFP8InputStoreFlag(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	base := []string{"analyze", "Llama-3.1-8B", "--phase", "training", "--gpus", "8", "--gbs", "64", "--seq", "8192"}
	acts := func(out string) float64 {
		t.Helper()
		m := regexp.MustCompile(`activations ([0-9.]+),`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no activations in %.400s", out)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	plain, stored := acts(mustRun(t, db, base...)), acts(mustRun(t, db, append(base, "--act-fp8-input-store")...))
	want := 8192.0 * 2 * 14336 * 32 / (1 << 30)
	if d := plain - stored; d < want-0.1 || d > want+0.1 {
		t.Errorf("activations %.1f GiB without the store, %.1f with: %.2f fewer, want %.2f", plain, stored, d, want)
	}
}
