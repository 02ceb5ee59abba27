package calib

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/kernels"
	"github.com/mrep-dev/mrep/timing"
)

// cudnnH100 is calib/kernels_cudnn_h100.json: what calib/sources/hopper_moe_attention_kernels.py
// measured on a lent H100.
type cudnnH100 struct {
	Attention   []attnRow  `json:"attention"`
	WindowSweep []attnRow  `json:"window_sweep"`
	Eager       []eagerRow `json:"eager_passes"`
	Graphed     []eagerRow `json:"eager_rope"`
}

type eagerRow struct {
	What      string  `json:"what"`
	Us        float64 `json:"us"`
	Bytes     float64 `json:"bytes"`
	HalfElems float64 `json:"half_elems"`
	Elems     float64 `json:"elems"`
	Experts   float64 `json:"experts"`
}

type attnRow struct {
	Batch   float64 `json:"batch"`
	Seq     float64 `json:"seq"`
	HeadsQ  float64 `json:"heads_q"`
	HeadDim float64 `json:"head_dim"`
	Window  float64 `json:"window"`
	Sink    bool    `json:"sink"`
	Fwd     float64 `json:"fwd_us"`
	Bwd     float64 `json:"bwd_us"`
	Error   string  `json:"error"`
}

func loadCuDNNH100(t *testing.T) cudnnH100 {
	t.Helper()
	b, err := os.ReadFile("kernels_cudnn_h100.json")
	if err != nil {
		t.Fatal(err)
	}
	var m cudnnH100
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Attention) == 0 || len(m.WindowSweep) == 0 || len(m.Eager) == 0 || len(m.Graphed) == 0 {
		t.Fatal("kernels_cudnn_h100.json: a part is missing")
	}
	return m
}

// h100Timing is the H100's time model with its chip-level figures (the ones these measurements set).
func h100Timing(t *testing.T) *timing.Model {
	t.Helper()
	c, err := chips.Default().Lookup("H100-SXM")
	if err != nil {
		t.Fatal(err)
	}
	m, err := timing.New(c, "bf16")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// attnTime is timing's H100 prediction of one measured cuDNN kernel (forward or backward): the
// scores a causal kernel executes (a window capping each row) at 4 x head-dim tensor FLOPs each.
func attnTime(m *timing.Model, r attnRow, bwd bool) float64 {
	q := r.Seq
	scores := q * (q + 1) / 2
	if r.Window > 0 && r.Window < q {
		scores = r.Window*(r.Window+1)/2 + (q-r.Window)*r.Window
	}
	flops := r.Batch * r.HeadsQ * scores * 4 * r.HeadDim
	if bwd {
		flops *= analyzer.FlashBwdFactor
	}
	k := kernels.Kernel{Kind: kernels.Attention, Count: 1, FLOPs: flops, DType: "bf16", Batch: r.Batch, Heads: r.HeadsQ, Queries: q,
		HeadDim: r.HeadDim, Backward: bwd, Sink: r.Sink}
	if r.Window > 0 && r.Window < q {
		k.Window = r.Window
	}
	return m.Kernel(k).Compute
}

// The sliding-window and sink figures against every cuDNN kernel measured on the lent H100,
// each as a ratio to the causal kernel of its shape (which the lanes' attention fractions own):
// the window sweep the figures were fitted to, the 128-key windows at 2k-16k tokens and the
// sink's backward, which they were not.
func TestMeasuredCuDNNWindowsAndSinks(t *testing.T) {
	meas, m := loadCuDNNH100(t), h100Timing(t)
	causal := func(rows []attnRow, r attnRow) (attnRow, bool) {
		for _, f := range rows {
			if f.Error == "" && f.Window == 0 && !f.Sink && f.Seq == r.Seq && f.HeadDim == r.HeadDim && f.Batch == r.Batch {
				return f, true
			}
		}
		return attnRow{}, false
	}
	check := func(set string, rows []attnRow, tol float64) {
		n := 0
		for _, r := range rows {
			if r.Error != "" || r.Window == 0 || r.Sink || r.Seq < 2048 {
				continue
			}
			f, ok := causal(rows, r)
			if !ok {
				continue
			}
			for _, bwd := range []bool{false, true} {
				got, base := r.Fwd, f.Fwd
				if bwd {
					got, base = r.Bwd, f.Bwd
				}
				pred := attnTime(m, r, bwd) / attnTime(m, f, bwd)
				if e := pred/(got/base) - 1; math.Abs(e) > tol {
					t.Errorf("%s: %g tokens, window %g, head %g, sink %v, backward %v: predicted %.3f of the causal time, measured %.3f (%+.0f%%)",
						set, r.Seq, r.Window, r.HeadDim, r.Sink, bwd, pred, got/base, 100*e)
				}
				n++
			}
		}
		if n < 8 {
			t.Fatalf("%s: only %d kernels compared", set, n)
		}
	}
	check("window sweep", meas.WindowSweep, 0.15)
	check("128-key windows", meas.Attention, 0.25)

	// the sink: what it adds to the backward, against the kernel of the same window without it
	n := 0
	for _, r := range meas.Attention {
		if !r.Sink || r.Error != "" || r.Seq < 2048 {
			continue
		}
		for _, p := range meas.Attention {
			if p.Sink || p.Error != "" || p.Seq != r.Seq || p.Window != r.Window || p.HeadDim != r.HeadDim || p.Batch != r.Batch {
				continue
			}
			got := (r.Bwd - p.Bwd) * 1e-6
			pred := attnTime(m, r, true) - attnTime(m, p, true)
			if e := pred/got - 1; math.Abs(e) > 0.3 {
				t.Errorf("sink at %g tokens, window %g: adds %.0f us to the backward, predicted %.0f us (%+.0f%%)", r.Seq, r.Window, got*1e6, pred*1e6, 100*e)
			}
			n++
		}
	}
	if n < 6 {
		t.Fatalf("only %d sink kernels compared", n)
	}
}

// The eager passes Megatron makes around GPT-OSS's experts and its YaRN RoPE, timed on the lent
// H100, against their counted bytes at the measured eager share of the chip's memory rate:
// eager where the GPU outpaces the host's launches, and replayed from CUDA graphs (the GPU's
// time alone, as when the host runs ahead in training), which also holds the backward passes
// the eager runs left host-bound.
func TestMeasuredEagerPasses(t *testing.T) {
	meas, m := loadCuDNNH100(t), h100Timing(t)
	mem := func(bytes, launches float64) float64 {
		return m.Kernel(kernels.Kernel{Kind: kernels.Memory, Count: launches, Bytes: bytes, MemShare: analyzer.EagerPassShare}).Time()
	}
	n := 0
	for _, e := range append(meas.Eager, meas.Graphed...) {
		var pred float64
		switch e.What {
		case "glu clamp forward", "glu clamp forward, graphed":
			pred = mem(8*2*e.HalfElems, 3)
		case "glu clamp forward+backward", "glu clamp forward+backward, graphed":
			pred = mem(8*2*e.HalfElems, 3) + mem((11*2+8)*e.HalfElems, 7)
		case "expert bias fp32 forward":
			pred = mem(28*e.Elems, 2*e.Experts+2)
		case "expert bias fp32 forward+backward, graphed":
			pred = mem(28*e.Elems, 2*e.Experts+2) + mem(36*e.Elems, 4*e.Experts+2)
		case "rope forward, graphed":
			pred = mem(12*2*e.Elems, 6)
		case "rope forward+backward, graphed":
			pred = mem(12*2*e.Elems, 6) + mem(13*2*e.Elems, 7)
		default:
			continue // the copy is the reference; eager RoPE and the bias's eager backward ran at the host's pace
		}
		n++
		if r := pred / (e.Us * 1e-6); r < 0.8 || r > 1.25 {
			t.Errorf("%s: predicted %.0f us, measured %.0f us (%.2fx)", e.What, pred*1e6, e.Us, r)
		}
	}
	if n != 10 {
		t.Fatalf("%d eager passes compared, want 10", n)
	}
}
