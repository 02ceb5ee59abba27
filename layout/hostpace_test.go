package layout

import (
	"math"
	"testing"
)

// The synchronized forward, by hand. Qwen3-30B-A3B's MoE layer at EP8 under MXFP8 issues
// 15 + 16 x 4 = 79 kernels after its forward's synchronization, 15 before it and 30 + 16 x 6 =
// 126 in its backward; at 50 µs each that is 3.95, 0.75 and 6.3 ms. With the GPU taking 2.6 ms
// for the experts' forward, 1.9 ms for the rest of the forward and 14.2 ms in all, a layer runs
// max(3.95, 2.6) + max(0.75, 1.9) + max(6.3, 14.2 - 4.5) = 15.55 ms: longer than the host's
// 11.0 ms and the GPU's 14.2, either of which alone set the pace before the synchronization
// was counted.
func TestSynchronizedForwardByHand(t *testing.T) {
	ph := moeLaunches{experts: 79, router: 15, forwards: 1, backward: 126}
	const launch, layers = 50e-6, 48.0
	got := moeHostPace(launch, ph, layers, layers*2.6e-3, layers*1.9e-3, layers*14.2e-3)
	if want := layers * 15.55e-3; math.Abs(got-want) > 1e-9 {
		t.Errorf("synchronized layers %.4f s, want %.4f", got, want)
	}
	host := launch * layers * (ph.experts + ph.router + ph.backward)
	// far ahead in every phase, the GPU sets the pace; far behind, the host does
	if got, gpu := moeHostPace(launch, ph, layers, layers*20e-3, layers*20e-3, layers*100e-3), layers*100e-3; math.Abs(got-gpu) > 1e-9 {
		t.Errorf("GPU-bound: %.4f s, want the GPU's %.4f", got, gpu)
	}
	if got := moeHostPace(launch, ph, layers, layers*0.1e-3, layers*0.1e-3, layers*0.5e-3); math.Abs(got-host) > 1e-9 {
		t.Errorf("host-bound: %.4f s, want the host's %.4f", got, host)
	}
	// full recompute runs (and synchronizes) the forward again inside the backward
	re := ph
	re.forwards = 2
	if got, want := moeHostPace(launch, re, layers, layers*2.6e-3, layers*1.9e-3, layers*18.7e-3), layers*(2*5.85e-3+math.Max(6.3e-3, 9.7e-3)); math.Abs(got-want) > 1e-9 {
		t.Errorf("recomputed forward: %.4f s, want %.4f", got, want)
	}
}

// On a real step: Qwen3-30B-A3B on 8 GB300 at MBS 8 under MXFP8, eager, as NVIDIA's 26.02-26.04
// presets run it. The host's launches and the GPU's kernels are close there, so the
// synchronized forward makes the kernels longer than either alone, never longer than both end to
// end; replayed from a full-iteration graph, only the GPU's time is left.
func TestSynchronizedForwardOnAStep(t *testing.T) {
	tr := megatronTrainer(t, "Qwen3-30B-A3B", "GB300", "fp8")
	l := Layout{Framework: Megatron, TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 8, ETP: 1, MBS: 8, GBS: 512, Seq: 4096,
		DistOptimizer: true, Precision: "mxfp8", Dispatcher: "hybridep", FP8ParamGather: true}
	if err := l.Validate(tr.m.Fingerprint); err != nil {
		t.Fatal(err)
	}
	eager, err := tr.Train(l)
	if err != nil {
		t.Fatal(err)
	}
	g := l
	g.CUDAGraph = true
	graphed, err := tr.Train(g)
	if err != nil {
		t.Fatal(err)
	}
	fp := tr.m.Fingerprint
	host := float64(l.GA()) * tr.p.(interface{ MoELaunch() float64 }).MoELaunch() * float64(fp.MoE.MoELayers) * l.MoELaunches(fp)
	gpu := graphed.Kernels
	if !(host > 0.5*gpu && host < gpu) {
		t.Fatalf("host %.3f s against the GPU's %.3f: not the close case this checks", host, gpu)
	}
	if !(eager.Kernels > math.Max(host, gpu)*1.02 && eager.Kernels < host+gpu) {
		t.Errorf("eager kernels %.3f s: want above max(host %.3f, GPU %.3f) and below their sum", eager.Kernels, host, gpu)
	}
	// what is not the host's is the GPU's own time (a graph's replay also drops the eager
	// launches' few microseconds each)
	if d := eager.Kernels - eager.HostBound - gpu; d < 0 || d > 0.01*gpu {
		t.Errorf("host-bound share %.3f s of kernels %.3f s leaves %.3f s, want the graphed GPU's %.3f (+1%%)", eager.HostBound, eager.Kernels, eager.Kernels-eager.HostBound, gpu)
	}
}

// The knobs analyze names for a host-bound step move it: a larger micro-batch (fewer
// micro-batches, the same kernels each) and more expert parallelism (fewer local experts, fewer
// kernels each) each shorten what the host adds, and HostPace reports the pace and the count the
// step was timed with (Qwen3-30B-A3B on 8 B200 under MXFP8, eager).
func TestHostBoundKnobs(t *testing.T) {
	tr := megatronTrainer(t, "Qwen3-30B-A3B", "B200", "fp8")
	base := Layout{Framework: Megatron, TP: 1, PP: 1, VP: 1, CP: 1, DP: 8, EP: 4, ETP: 1, MBS: 2, GBS: 512, Seq: 4096,
		DistOptimizer: true, Precision: "mxfp8"}
	step := func(l Layout) Step {
		t.Helper()
		if err := l.Validate(tr.m.Fingerprint); err != nil {
			t.Fatal(err)
		}
		s, err := tr.Train(l)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := step(base)
	if s.HostBound <= 0 {
		t.Fatalf("%s: not host-bound, the case this checks", base)
	}
	launch, n := tr.HostPace(base)
	if want := tr.p.(interface{ MoELaunch() float64 }).MoELaunch(); launch != want || n != base.MoELaunches(tr.m.Fingerprint) {
		t.Errorf("HostPace %g s x %g kernels, want %g s x %g", launch, n, want, base.MoELaunches(tr.m.Fingerprint))
	}
	bigger, wider := base, base
	bigger.MBS *= 2
	wider.EP *= 2
	for _, l := range []Layout{bigger, wider} {
		if got := step(l); got.HostBound >= s.HostBound || got.StepTime >= s.StepTime {
			t.Errorf("%s: host adds %.2f s of a %.2f s step, not less than %s's %.2f of %.2f", l, got.HostBound, got.StepTime, base, s.HostBound, s.StepTime)
		}
	}
}
