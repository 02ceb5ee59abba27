package calib

import (
	"encoding/json"
	"flag"
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

var updateREADME = flag.Bool("update", false, "rewrite the README's moe-host block from calib/moe_host_h100.json")

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
	Size        float64 `json:"size"`
	PerCall     float64 `json:"us_per_call"`
}

// moeHost is what calib/moe_host_h100.json says of the host's pace (microseconds).
type moeHost struct {
	experts       [2]float64 // the sweep's fewest and most local experts
	lo, hi, mid   float64    // Megatron's layer: best and median steps per kernel, median pace
	bareLo        float64    // bare PyTorch's layer, likewise
	bareHi        float64
	launchLo      float64 // one tiny GEMM's eager launch
	launchHi      float64
	fixed         float64 // the layer's fixed part: the intercept over the expert counts
	perExpert     float64 // SequentialMLP's kernels per expert
	at16          moeHostRun
	few           moeHostRun // the second run's fewest-expert bare layer
	ddpLo, ddpHi  float64    // what DDP adds, by median
	ddpE          [2]float64
	bare, wrapped map[float64]moeHostRun
}

func loadMoEHost(t *testing.T) moeHost {
	t.Helper()
	b, err := os.ReadFile("moe_host_h100.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Launch   []moeHostRun `json:"launch"`
		Megatron []moeHostRun `json:"megatron"`
		TorchMoE []moeHostRun `json:"torch_moe"`
		DDP      []moeHostRun `json:"megatron_ddp"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("calib/moe_host_h100.json: %v", err)
	}
	// the host's own rows: so few tokens that the GPU idles
	var mega, bare []moeHostRun
	for _, r := range f.Megatron {
		if r.Tokens == 64 {
			mega = append(mega, r)
		}
	}
	for _, r := range f.TorchMoE {
		if r.Tokens == 64 {
			bare = append(bare, r)
		}
	}
	if len(mega) < 4 || len(bare) < 4 || len(f.DDP) < 6 || len(f.Launch) < 3 {
		t.Fatalf("%d megatron, %d bare, %d DDP and %d launch rows, want the sweeps", len(mega), len(bare), len(f.DDP), len(f.Launch))
	}
	h := moeHost{lo: math.Inf(1), bareLo: math.Inf(1), launchLo: math.Inf(1), ddpLo: math.Inf(1),
		experts: [2]float64{math.Inf(1), 0}, ddpE: [2]float64{math.Inf(1), 0},
		bare: map[float64]moeHostRun{}, wrapped: map[float64]moeHostRun{}}
	var paces, xs, walls, bests, kernels []float64
	for _, r := range mega {
		if r.StepGPUUs > 0.2*r.StepWallUs {
			t.Fatalf("%g experts: the GPU ran %.0f of %.0f us, the step is not the host's", r.Experts, r.StepGPUUs, r.StepWallUs)
		}
		h.lo, h.hi = math.Min(h.lo, r.StepBestUs/r.StepKernels), math.Max(h.hi, r.StepWallUs/r.StepKernels)
		h.experts = [2]float64{math.Min(h.experts[0], r.Experts), math.Max(h.experts[1], r.Experts)}
		paces = append(paces, r.StepWallUs/r.StepKernels)
		xs, walls, bests, kernels = append(xs, r.Experts), append(walls, r.StepWallUs), append(bests, r.StepBestUs), append(kernels, r.StepKernels)
		if r.Experts == 16 {
			h.at16 = r
		}
	}
	sort.Float64s(paces)
	h.mid = paces[len(paces)/2]
	for _, r := range bare {
		h.bareLo, h.bareHi = math.Min(h.bareLo, r.StepBestUs/r.StepKernels), math.Max(h.bareHi, r.StepWallUs/r.StepKernels)
	}
	for _, r := range f.Launch {
		if r.Size > 0 {
			h.launchLo, h.launchHi = math.Min(h.launchLo, r.PerCall), math.Max(h.launchHi, r.PerCall)
		}
	}
	fixedWall, _ := lineFit(xs, walls)
	fixedBest, _ := lineFit(xs, bests)
	h.fixed = math.Min(fixedWall, fixedBest)
	_, h.perExpert = lineFit(xs, kernels)
	for _, r := range f.DDP {
		if r.DDP {
			h.wrapped[r.Experts] = r
		} else {
			h.bare[r.Experts] = r
		}
	}
	if len(h.wrapped) != len(h.bare) {
		t.Fatalf("%d bare and %d DDP-wrapped layers in the second run", len(h.bare), len(h.wrapped))
	}
	h.few.Experts = math.Inf(1)
	for e, r := range h.bare {
		w, ok := h.wrapped[e]
		if !ok {
			t.Fatalf("%g experts: no DDP-wrapped layer", e)
		}
		h.ddpLo, h.ddpHi = math.Min(h.ddpLo, w.StepWallUs-r.StepWallUs), math.Max(h.ddpHi, w.StepWallUs-r.StepWallUs)
		h.ddpE = [2]float64{math.Min(h.ddpE[0], e), math.Max(h.ddpE[1], e)}
		if e < h.few.Experts {
			h.few = r
		}
	}
	return h
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

// qwenEP8Layer is mrep's host time (us) for one Qwen3-30B-A3B MoE layer and micro-batch on one
// EP-8 rank (16 local experts) at pace us per kernel.
func qwenEP8Layer(us float64) float64 {
	fp := analyzer.Fingerprint{MoE: &analyzer.MoEInfo{RoutedExperts: 128, TopK: 8, MoELayers: 48}}
	l := layout.Layout{TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 1, GBS: 8, Seq: 4096}
	return us * l.MoELaunches(fp)
}

// x86Lane is the megatron lane's host pace on B200, whose HGX board sits beside an x86 host.
func x86Lane(t *testing.T) float64 {
	c, err := chips.Default().Lookup("B200")
	if err != nil {
		t.Fatal(err)
	}
	return c.Efficiency.Lane("megatron").MoELaunchUs
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
//   - A second run, on another machine: its fewest-expert layer costs at least the fixed part,
//     and Megatron's DDP, whose per-parameter gradient hooks run on the host, never makes a step
//     cheaper (medians; the best steps scatter more).
func TestMeasuredHostPaceBracketsTheLaneFit(t *testing.T) {
	h := loadMoEHost(t)
	t.Logf("Megatron's eager MoE layer on x86: %.1f-%.1f us per kernel (median over expert counts %.1f)", h.lo, h.hi, h.mid)
	if !(h.bareHi < h.mid && h.launchHi < h.bareLo) {
		t.Errorf("per kernel: one launch up to %.1f us, bare PyTorch's layer %.1f-%.1f, Megatron's median %.1f: want each below the next",
			h.launchHi, h.bareLo, h.bareHi, h.mid)
	}
	if MaxMoELaunchUs < h.hi {
		t.Errorf("the fit's bound %g us excludes the measured pace up to %.1f us", float64(MaxMoELaunchUs), h.hi)
	}
	if h.at16.Experts == 0 || !(h.fixed > 0 && h.fixed < h.at16.StepBestUs) {
		t.Fatalf("fixed part %.0f us, 16-expert layer %+v", h.fixed, h.at16)
	}
	for _, name := range []string{"B200", "H100-SXM"} { // the x86-hosted chips with fitted MoE rows
		c, err := chips.Default().Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		us := c.Efficiency.Lane("megatron").MoELaunchUs
		if us < h.lo || us > h.hi {
			t.Errorf("%s: the lane's %.1f us per MoE kernel is outside the measured %.1f-%.1f us", name, us, h.lo, h.hi)
		}
		layer := qwenEP8Layer(us)
		t.Logf("%s: mrep %.1f ms per layer and micro-batch; measured fixed part %.1f ms, SequentialMLP layer %.1f-%.1f ms",
			name, layer/1e3, h.fixed/1e3, h.at16.StepBestUs/1e3, h.at16.StepWallUs/1e3)
		if layer < h.fixed || layer > h.at16.StepWallUs {
			t.Errorf("%s: mrep's %.0f us per layer is outside the measured %.0f-%.0f us", name, layer, h.fixed, h.at16.StepWallUs)
		}
	}
	for e, r := range h.bare {
		if w := h.wrapped[e]; w.StepWallUs < r.StepWallUs {
			t.Errorf("%g experts: DDP-wrapped %.0f us below the bare layer's %.0f", e, w.StepWallUs, r.StepWallUs)
		}
		if r.Experts <= 4 && r.StepBestUs < h.fixed {
			t.Errorf("%g experts: %.0f us, below the fixed part %.0f us", e, r.StepBestUs, h.fixed)
		}
	}
}

// moeHostBlock is the README's account of the measurement, every figure from the file.
func moeHostBlock(h moeHost, lane float64) string {
	return fmt.Sprintf("On a lent H100 machine's x86 host (an Emerald Rapids guest, DGX B200's CPU generation), "+
		"Megatron-core's own eager MoE layer (local spec, Qwen3-30B-A3B's shapes, %.0f-%.0f local experts, 64 tokens so the GPU idles) "+
		"issues a kernel every %.0f-%.0f µs (best to median steps; median over expert counts %.0f µs), "+
		"bare PyTorch the same layer every %.0f-%.0f µs, and one tiny GEMM launch takes %.1f-%.0f µs "+
		"(`calib/moe_host_h100.json`, `calib/sources/megatron_moe_host.py`). "+
		"The pooled fit, %.1f µs, lies inside that band, and its %.1f ms per Qwen3-30B-A3B layer and micro-batch on one EP-8 rank "+
		"lies between the measured layer's fixed part (%.1f ms: router, permutation, dispatch, combine) and the whole measured layer "+
		"(%.0f-%.0f ms with SequentialMLP's ~%.0f Python-issued kernels per expert, where Transformer Engine issues 6 from C++). "+
		"A second run on another machine puts the layer at %.0f experts at %.1f-%.1f ms (%.0f kernels), above that fixed part, "+
		"and Megatron's DistributedDataParallel, whose gradient hooks run on the host once per parameter, "+
		"adds %.1f-%.1f ms a step by median at %.0f-%.0f experts (its best steps scatter too much to split that per parameter). "+
		"`TestMeasuredHostPaceBracketsTheLaneFit` holds all of it.",
		h.experts[0], h.experts[1], h.lo, h.hi, h.mid, h.bareLo, h.bareHi, h.launchLo, h.launchHi,
		lane, qwenEP8Layer(lane)/1e3, h.fixed/1e3, h.at16.StepBestUs/1e3, h.at16.StepWallUs/1e3, h.perExpert,
		h.few.Experts, h.few.StepBestUs/1e3, h.few.StepWallUs/1e3, h.few.StepKernels,
		h.ddpLo/1e3, h.ddpHi/1e3, h.ddpE[0], h.ddpE[1])
}

// wrap breaks s into lines of at most width columns at spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		if i > 0 {
			if n+1+len([]rune(w)) > width {
				b.WriteByte('\n')
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(w)
		n += len([]rune(w))
	}
	return b.String()
}

// The README's moe-host block is the measurement's own figures (go test ./calib -run
// READMEMoEHost -update rewrites it).
func TestREADMEMoEHostBlock(t *testing.T) {
	const open, close = "<!-- moe-host -->\n", "\n<!-- /moe-host -->"
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, open), strings.Index(s, close)
	if i < 0 || j < i {
		t.Fatal("README.md has no moe-host block")
	}
	want := wrap(moeHostBlock(loadMoEHost(t), x86Lane(t)), 100)
	got := s[i+len(open) : j]
	if got == want {
		return
	}
	if *updateREADME {
		if err := os.WriteFile("../README.md", []byte(s[:i+len(open)]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's moe-host block differs from the measurement's figures (go test ./calib -run READMEMoEHost -update):\n got: %s\nwant: %s", got, want)
}
