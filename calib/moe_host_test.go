package calib

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/layout"
)

// moeHostRun is one row of calib/moe_host_h100.json: an eager MoE layer's forward and backward
// on a lent H100 machine's x86 host (calib/sources/megatron_moe_host.py).
type moeHostRun struct {
	Experts     float64 `json:"experts"`
	Tokens      float64 `json:"tokens"`
	StepWallUs  float64 `json:"step_wall_us"`
	StepBestUs  float64 `json:"step_best_us"`
	StepKernels float64 `json:"step_kernels"`
	StepGPUUs   float64 `json:"step_gpu_us"`
	DDP         bool    `json:"ddp"`
}

func loadMoEHost(t *testing.T) (megatron, bare, ddp []moeHostRun) {
	t.Helper()
	b, err := os.ReadFile("moe_host_h100.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Megatron []moeHostRun `json:"megatron"`
		TorchMoE []moeHostRun `json:"torch_moe"`
		DDP      []moeHostRun `json:"megatron_ddp"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("calib/moe_host_h100.json: %v", err)
	}
	host := func(rs []moeHostRun) []moeHostRun {
		var out []moeHostRun
		for _, r := range rs {
			if r.Tokens == 64 {
				out = append(out, r)
			}
		}
		return out
	}
	return host(f.Megatron), host(f.TorchMoE), host(f.DDP)
}

// lineFit is the least-squares line y = a + b x.
func lineFit(xs, ys []float64) (a, b float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	b = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return (sy - b*sx) / n, b
}

// The lanes fit the host's time per MoE kernel (moe_launch_us) on published runs, pooling x86
// and Grace hosts. A measurement no one fitted checks it: Megatron-core's own eager MoE layer
// on a lent machine's x86 host (Emerald Rapids, DGX B200's CPU generation), on so few tokens
// that the GPU idles and the step's wall time is the host's.
//   - Per kernel the layer issues, the host's pace lies between the best and the median steps'
//     (every expert count); the fitted figure on an x86 chip must lie in that band, and the fit's
//     bound must admit all of it.
//   - Per layer, mrep's host time for Qwen3-30B-A3B on one EP-8 rank (16 local experts: 2 x 30
//     fixed and 16 x 6 expert kernels a micro-batch) lies between the measured layer's fixed
//     part (the intercept over the expert counts: router, permutation, dispatch, combine) and
//     the whole measured layer at 16 experts, whose SequentialMLP issues about 18 kernels per
//     expert from Python where Transformer Engine's GroupedLinear issues 6 from C++.
func TestMeasuredHostPaceBracketsTheLaneFit(t *testing.T) {
	mega, bare, ddp := loadMoEHost(t)
	if len(mega) < 4 || len(bare) < 4 {
		t.Fatalf("%d megatron and %d bare rows at 64 tokens, want the expert sweep", len(mega), len(bare))
	}
	var paces, xs, walls, bests []float64
	lo, hi := math.Inf(1), 0.0
	var at16 moeHostRun
	for _, r := range mega {
		if r.StepGPUUs > 0.2*r.StepWallUs {
			t.Fatalf("%g experts: the GPU ran %.0f of %.0f us, the step is not the host's", r.Experts, r.StepGPUUs, r.StepWallUs)
		}
		lo, hi = math.Min(lo, r.StepBestUs/r.StepKernels), math.Max(hi, r.StepWallUs/r.StepKernels)
		paces = append(paces, r.StepWallUs/r.StepKernels)
		xs, walls, bests = append(xs, r.Experts), append(walls, r.StepWallUs), append(bests, r.StepBestUs)
		if r.Experts == 16 {
			at16 = r
		}
	}
	sort.Float64s(paces)
	t.Logf("Megatron's eager MoE layer on x86: %.1f-%.1f us per kernel (median over expert counts %.1f)", lo, hi, paces[len(paces)/2])
	// bare PyTorch issues the same layer's kernels faster: Megatron's modules add Python per kernel
	for _, r := range bare {
		if p := r.StepWallUs / r.StepKernels; p >= paces[len(paces)/2] {
			t.Errorf("bare PyTorch at %g experts: %.1f us per kernel, not below Megatron's %.1f", r.Experts, p, paces[len(paces)/2])
		}
	}
	// the README quotes the band; it follows the measurement
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("issues a kernel every %.0f-%.0f µs", lo, hi); !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), want) {
		t.Errorf("README.md does not say %q", want)
	}
	if MaxMoELaunchUs < hi {
		t.Errorf("the fit's bound %g us excludes the measured pace up to %.1f us", float64(MaxMoELaunchUs), hi)
	}
	fixedWall, _ := lineFit(xs, walls)
	fixedBest, _ := lineFit(xs, bests)
	fixed := math.Min(fixedWall, fixedBest)
	if at16.Experts == 0 || !(fixed > 0 && fixed < at16.StepBestUs) {
		t.Fatalf("fixed part %.0f us, 16-expert layer %+v", fixed, at16)
	}
	// the second run, on another machine: its fewest-expert layer costs at least the fixed part,
	// and Megatron's DDP, whose per-parameter gradient hooks run on the host, never makes a
	// step cheaper (medians; the best steps scatter more)
	few, wrapped := map[float64]moeHostRun{}, map[float64]moeHostRun{}
	for _, r := range ddp {
		if r.DDP {
			wrapped[r.Experts] = r
		} else {
			few[r.Experts] = r
		}
	}
	if len(few) < 3 || len(wrapped) != len(few) {
		t.Fatalf("%d bare and %d DDP-wrapped layers in the second run", len(few), len(wrapped))
	}
	for e, r := range few {
		if w := wrapped[e]; w.StepWallUs < r.StepWallUs {
			t.Errorf("%g experts: DDP-wrapped %.0f us below the bare layer's %.0f", e, w.StepWallUs, r.StepWallUs)
		}
		if r.Experts <= 4 && r.StepBestUs < fixed {
			t.Errorf("%g experts: %.0f us, below the fixed part %.0f us", e, r.StepBestUs, fixed)
		}
	}
	fp := analyzer.Fingerprint{MoE: &analyzer.MoEInfo{RoutedExperts: 128, TopK: 8, MoELayers: 48}}
	l := layout.Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 8, Seq: 4096}
	for _, name := range []string{"B200", "H100-SXM"} { // the x86-hosted chips with fitted MoE rows
		c, err := chips.Default().Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		us := c.Efficiency.Lane("megatron").MoELaunchUs
		if us < lo || us > hi {
			t.Errorf("%s: the lane's %.1f us per MoE kernel is outside the measured %.1f-%.1f us", name, us, lo, hi)
		}
		layer := us * l.MoELaunches(fp)
		t.Logf("%s: mrep %.1f ms per layer and micro-batch; measured fixed part %.1f ms, SequentialMLP layer %.1f-%.1f ms",
			name, layer/1e3, fixed/1e3, at16.StepBestUs/1e3, at16.StepWallUs/1e3)
		if layer < fixed || layer > at16.StepWallUs {
			t.Errorf("%s: mrep's %.0f us per layer is outside the measured %.0f-%.0f us", name, layer, fixed, at16.StepWallUs)
		}
	}
}
