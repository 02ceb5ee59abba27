package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// --fp8-dot-product-attention on a chip whose FP8 attention kernels are measured (GB200) is timed
// with them and faster than 16-bit attention; on one without (H100) it gains nothing (its
// quantize passes cost a little) and analyze says why, naming the chip and the recipe.
func TestFP8AttentionFlag(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	base := []string{"analyze", "Llama-3.1-8B", "--phase", "training", "--gpus", "8", "--gbs", "64", "--seq", "8192", "--dtype", "fp8"}
	step := func(out string) float64 {
		i := strings.Index(out, "Step ")
		if i < 0 {
			t.Fatalf("no step in %.300s", out)
		}
		var s float64
		if _, err := fmt.Sscanf(out[i:], "Step %f s", &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	gb := append(append([]string{}, base...), "--chip", "GB200", "--recipe", "mxfp8")
	with := mustRun(t, db, append(gb, "--fp8-dot-product-attention")...)
	without := mustRun(t, db, gb...)
	if !strings.Contains(with, "attention core in fp8 in training (--fp8-dot-product-attention)") || strings.Contains(without, "attention core in fp8") {
		t.Errorf("the header names the attention's precision as run: %.300s", with)
	}
	if !(step(with) < step(without)) || strings.Contains(with, "FP8 attention:") {
		t.Errorf("GB200: step %.3f s with FP8 attention, %.3f s without; want a faster step and no note", step(with), step(without))
	}
	h := append(append([]string{}, base...), "--chip", "H100-SXM", "--recipe", "fp8-cs")
	with = mustRun(t, db, append(h, "--fp8-dot-product-attention")...)
	without = mustRun(t, db, h...)
	if r := step(with) / step(without); !(r >= 1 && r < 1.02) || !strings.Contains(with, "FP8 attention: H100-SXM") || !strings.Contains(with, "fp8-cs recipe") {
		t.Errorf("H100: step %.3f s with FP8 attention, %.3f s without; want no gain, the quantize's cost, and the note naming the chip and recipe:\n%.600s",
			step(with), step(without), with)
	}
}
