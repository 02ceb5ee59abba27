package calib

import (
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/kernels"
	"github.com/mrep-dev/mrep/timing"
)

// kernelsGz is NVIDIA's measured kernel latencies (aiconfigurator-core on PyPI, Apache-2.0),
// resampled to one grid of shapes by calib/sources/aiconfigurator_kernels.py.
//
//go:embed kernels.json.gz
var kernelsGz []byte

// kernelsTorch is the same grid timed with PyTorch (cuBLAS, SDPA) by
// calib/sources/torch_kernels.py, one file per lent GPU: kernels_torch_h100.json on an H100
// and kernels_torch_h200.json on an H200, both under PyTorch 2.11.0 with CUDA 13.0. An
// independent collector, predicted with the chip's own figures (engine "torch" has no lane).
//
//go:embed kernels_torch_*.json
var kernelsTorch embed.FS

// KernelSet is measured kernels: groups of one chip, engine release, kernel family, precision
// and the kernel the engine ran, each row a shape and its latency.
type KernelSet struct {
	About  string        `json:"about"`
	Groups []KernelGroup `json:"groups"`
}

// KernelGroup is one table of measured kernels with its provenance.
type KernelGroup struct {
	Chip    string `json:"chip"`
	Engine  string `json:"engine"`
	Release string `json:"release"`
	// Family: gemm, context_attention, generation_attention, moe, or context_mla and
	// generation_mla (DeepSeek-V3's latent attention: heads are one GPU's, the latent's 576
	// elements stand as one KV head).
	Family string `json:"family"`
	// DType is the GEMM's or MoE layer's precision (bf16, fp8, fp8_block, fp4; w4a16: 4-bit
	// weights in 16-bit math) or attention's; KVDType the KV cache's (attention only).
	DType   string `json:"dtype"`
	KVDType string `json:"kv_dtype"`
	Kernel  string `json:"kernel"` // the engine's kernel, as the collector names it
	GPU     string `json:"gpu"`
	Source  string `json:"source"`
	// Cols name the row fields: m, n, k, us (gemm); batch, queries, kv_len, heads, kv_heads,
	// head_dim, us (attention); tokens, hidden, inter, experts, topk, tp, ep, us (moe: tokens
	// entering the layer over the EP group, balanced routing). us is the measured latency in
	// microseconds.
	Cols []string    `json:"cols"`
	Rows [][]float64 `json:"rows"`
}

// TorchEngine names the groups timed with plain PyTorch (no serving engine).
const TorchEngine = "torch"

// Kernels is the shipped measured kernel set.
func Kernels() (KernelSet, error) {
	var ks KernelSet
	zr, err := gzip.NewReader(bytes.NewReader(kernelsGz))
	if err != nil {
		return ks, fmt.Errorf("embedded kernel set: %w", err)
	}
	if err := json.NewDecoder(zr).Decode(&ks); err != nil {
		return ks, fmt.Errorf("embedded kernel set: %w", err)
	}
	files, err := kernelsTorch.ReadDir(".") // sorted by name: H100, then H200
	if err != nil {
		return ks, fmt.Errorf("embedded torch kernel sets: %w", err)
	}
	for _, f := range files {
		b, err := kernelsTorch.ReadFile(f.Name())
		if err != nil {
			return ks, fmt.Errorf("embedded torch kernel set %s: %w", f.Name(), err)
		}
		var torch KernelSet
		if err := json.Unmarshal(b, &torch); err != nil {
			return ks, fmt.Errorf("embedded torch kernel set %s: %w", f.Name(), err)
		}
		if !strings.Contains(ks.About, torch.About) { // the files share one description
			ks.About += " " + torch.About
		}
		ks.Groups = append(ks.Groups, torch.Groups...)
	}
	for _, g := range ks.Groups {
		want := map[string]int{"gemm": 4, "context_attention": 7, "generation_attention": 7, "moe": 8, "context_mla": 7, "generation_mla": 7}[g.Family]
		if want == 0 || len(g.Cols) != want {
			return ks, fmt.Errorf("embedded kernel set: group %s %s %s: family %q with %d columns", g.Chip, g.Engine, g.Kernel, g.Family, len(g.Cols))
		}
		for i, r := range g.Rows {
			if len(r) != want || !(r[want-1] > 0) {
				return ks, fmt.Errorf("embedded kernel set: group %s %s %s row %d: %v", g.Chip, g.Engine, g.Kernel, i, r)
			}
		}
	}
	return ks, nil
}

// KernelCheck is one group's rows predicted by mrep's time model: the chip's figures in the
// engine's lane, each shape as the analyzer counts it.
type KernelCheck struct {
	Chip    string `json:"chip"`
	Engine  string `json:"engine"`
	Release string `json:"release"`
	Family  string `json:"family"`
	DType   string `json:"dtype"`
	KVDType string `json:"kv_dtype,omitempty"`
	Kernel  string `json:"kernel"`
	Rows    int    `json:"rows"`
	// MedianRatio is the median of predicted / measured time (above 1: mrep is slower than
	// the kernel ran); the errors are |ratio - 1|.
	MedianRatio  float64 `json:"median_ratio"`
	MedianAbsErr float64 `json:"median_abs_err"`
	P90AbsErr    float64 `json:"p90_abs_err"`
	// BelowRoofline counts rows measured faster than the chip's ideal roofline allows (a
	// figure in the chip database is too low, or the row is wrong).
	BelowRoofline int `json:"below_roofline"`
	// Scale is the one factor on mrep's time that fits the group's fit half (the shapes whose
	// (N, K), or whose heads, are even in the group's sorted list: the median of measured /
	// predicted), and HeldOutAbsErr the median |error| on the other half with it applied: what
	// one efficiency figure per kernel family, fitted to these kernels, would leave.
	Scale         float64 `json:"scale"`
	HeldOutAbsErr float64 `json:"held_out_abs_err"`
	HeldOutRows   int     `json:"held_out_rows"`
}

// KernelReport is the kernel check: every group, and the rows pooled by kernel family (GEMMs
// by precision), engine and chip family.
type KernelReport struct {
	About  string         `json:"about"`
	Groups []KernelCheck  `json:"groups"`
	Pooled []GroupSummary `json:"pooled"`
}

// CheckKernels predicts every measured kernel of ks on its chip, with the engine's lane of
// figures where the chip has one.
func CheckKernels(ks KernelSet, db *chips.DB) (KernelReport, error) {
	rep := KernelReport{About: ks.About}
	pooled := map[string][]float64{}
	var order []string
	for _, g := range ks.Groups {
		chip, err := db.Lookup(g.Chip)
		if err != nil {
			return rep, fmt.Errorf("kernel group %s %s: %w", g.Chip, g.Engine, err)
		}
		chip.Efficiency = chip.Efficiency.Lane(g.Engine)
		dtype := g.timingDType()
		tm, err := timing.New(chip, dtype)
		if err != nil {
			return rep, fmt.Errorf("kernel group %s %s %s: %w", g.Chip, g.Engine, g.DType, err)
		}
		pool := fmt.Sprintf("%s %s, %s %s", g.Family, g.DType, g.Engine, ChipFamily(g.Chip))
		if g.Family != "gemm" && g.Family != "moe" {
			pool = fmt.Sprintf("%s, %s KV, %s %s", g.Family, g.KVDType, g.Engine, ChipFamily(g.Chip))
		}
		if pooled[pool] == nil {
			order = append(order, pool)
		}
		c := KernelCheck{Chip: g.Chip, Engine: g.Engine, Release: g.Release, Family: g.Family, DType: g.DType, KVDType: g.KVDType, Kernel: g.Kernel, Rows: len(g.Rows)}
		var errs, ratios, fitLog []float64
		held := g.heldOut()
		var heldRatios []float64
		for i, r := range g.Rows {
			pred := g.predict(tm, r, dtype)
			meas := r[len(r)-1] * 1e-6
			ratios = append(ratios, pred/meas)
			errs = append(errs, math.Abs(pred/meas-1))
			pooled[pool] = append(pooled[pool], pred/meas)
			if g.belowRoofline(r, chip) {
				c.BelowRoofline++
			}
			if held[i] {
				heldRatios = append(heldRatios, pred/meas)
			} else {
				fitLog = append(fitLog, math.Log(meas/pred))
			}
		}
		sort.Float64s(errs)
		sort.Float64s(ratios)
		c.MedianRatio, c.MedianAbsErr = median(ratios), median(errs)
		c.P90AbsErr = errs[int(0.9*float64(len(errs)-1))]
		if len(fitLog) > 0 && len(heldRatios) > 0 {
			sort.Float64s(fitLog)
			c.Scale = math.Exp(median(fitLog))
			var he []float64
			for _, r := range heldRatios {
				he = append(he, math.Abs(r*c.Scale-1))
			}
			sort.Float64s(he)
			c.HeldOutAbsErr, c.HeldOutRows = median(he), len(he)
		}
		rep.Groups = append(rep.Groups, c)
	}
	for _, k := range order {
		rs := append([]float64(nil), pooled[k]...)
		var es []float64
		for _, r := range rs {
			es = append(es, math.Abs(r-1))
		}
		sort.Float64s(rs)
		sort.Float64s(es)
		rep.Pooled = append(rep.Pooled, GroupSummary{Group: k, Rows: len(rs), MedianRatio: median(rs), MedianAbsErr: median(es), WorstAbsErr: es[len(es)-1]})
	}
	return rep, nil
}

// timingDType is the precision whose peak mrep times the group at: block-scaled FP8 is FP8;
// attention's matmuls and a w4a16 MoE layer's run in 16-bit (analyzer.Scenario.AttnDType).
func (g KernelGroup) timingDType() string {
	switch {
	case g.Family != "gemm" && g.Family != "moe", g.DType == "w4a16":
		return "bf16"
	case g.DType == "fp8_block":
		return "fp8"
	}
	return g.DType
}

// heldOut marks the rows of every other shape class: GEMMs by their (N, K), attention by its
// heads (query heads, KV heads, head size), MoE layers by the model's layer (hidden, expert
// width, experts), in sorted order; the rest is the fit half. Holding out by shape, not by
// row, keeps a row's neighbours of the same weight matrix out of its fit.
func (g KernelGroup) heldOut() []bool {
	key := g.shapeClass
	var classes [][3]float64
	seen := map[[3]float64]bool{}
	for _, r := range g.Rows {
		if k := key(r); !seen[k] {
			seen[k] = true
			classes = append(classes, k)
		}
	}
	sort.Slice(classes, func(i, j int) bool {
		a, b := classes[i], classes[j]
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		if a[1] != b[1] {
			return a[1] < b[1]
		}
		return a[2] < b[2]
	})
	odd := map[[3]float64]bool{}
	for i, c := range classes {
		odd[c] = i%2 == 1
	}
	out := make([]bool, len(g.Rows))
	for i, r := range g.Rows {
		out[i] = odd[key(r)]
	}
	return out
}

// shapeClass is the shape a row belongs to: a GEMM's weight (N, K), attention's heads, a MoE
// layer's (hidden, expert width, experts).
func (g KernelGroup) shapeClass(r []float64) [3]float64 {
	switch g.Family {
	case "gemm":
		return [3]float64{r[1], r[2], 0}
	case "moe":
		return [3]float64{r[1], r[2], r[3]}
	}
	return [3]float64{r[3], r[4], r[5]}
}

// predict is mrep's time for row r: its kernels' times summed.
func (g KernelGroup) predict(tm *timing.Model, r []float64, dtype string) float64 {
	var t float64
	for _, k := range g.kernels(r, dtype) {
		t += tm.Kernel(k).Time()
	}
	return t
}

// kernels are a row as mrep counts it: a dense linear layer's GEMM (weights once, activations
// in and out, at the analyzer's bytes for that precision), a fused attention launch, or a MoE
// layer's routed experts (analyzer.ExpertsKernels).
func (g KernelGroup) kernels(r []float64, dtype string) []kernels.Kernel {
	switch g.Family {
	case "gemm":
		m, n, k := r[0], r[1], r[2]
		b := analyzer.DType(dtype).Bytes() // weights and activations at the GEMM's precision, as --dtype sets them
		return []kernels.Kernel{{Name: "linear", Kind: kernels.GEMM, Count: 1, M: m, N: n, K: k, Groups: 1, FLOPs: 2 * m * n * k,
			DType: dtype, Bytes: n*k*b + m*(k+n)*b, Graphed: true}}
	case "moe":
		wb, ab := analyzer.DType(dtype).Bytes(), analyzer.DType(dtype).Bytes()
		if g.DType == "w4a16" {
			wb = analyzer.DType("fp4").Bytes()
		}
		return analyzer.ExpertsKernels(analyzer.ExpertsShape{Tokens: r[0], Hidden: int64(r[1]), Inter: int64(r[2]), Experts: int64(r[3]),
			TopK: int64(r[4]), TP: int64(r[5]), EP: int64(r[6]), DType: dtype, WeightBytes: wb, ActBytes: ab})
	}
	kv := analyzer.DType(g.KVDType).Bytes()
	k := analyzer.AttentionKernel(analyzer.AttentionShape{Batch: r[0], Queries: r[1], KVLen: r[2], Heads: int64(r[3]), KVHeads: int64(r[4]),
		HeadDim: int64(r[5]), Decode: strings.HasPrefix(g.Family, "generation_"), CacheWrite: g.Engine != TorchEngine, ActBytes: 2, KVBytes: kv,
		MLA: strings.HasSuffix(g.Family, "_mla")})
	k.Graphed = true // a kernel benchmark times the GPU, not the host's launch
	return []kernels.Kernel{k}
}

// belowRoofline says whether row r was measured faster than its kernel's ideal roofline on
// chip allows (impossible: a chip figure or the row is wrong).
func (g KernelGroup) belowRoofline(r []float64, chip chips.Chip) bool {
	dtype := g.timingDType()
	return r[len(r)-1]*1e-6 < roofline(g.kernels(r, dtype), chip, dtype)*(1-1e-9)
}

// roofline is kernels' ideal time: each one's executed FLOPs at the datasheet peak of its
// precision (dtype's unless it states its own) or its bytes at the nominal HBM bandwidth,
// whichever is longer, summed.
func roofline(ks []kernels.Kernel, chip chips.Chip, dtype string) float64 {
	peak, err := chip.Peak(dtype)
	if err != nil || peak <= 0 {
		return 0
	}
	var t float64
	for _, k := range ks {
		p := peak
		if k.DType != "" && k.DType != dtype { // a kernel at a precision of its own
			if q, err := chip.Peak(k.DType); err == nil && q > 0 {
				p = q
			}
		}
		if k.Latent && k.EightBitKV() && chip.Efficiency.MLAFP8Math {
			if q, err := chip.Peak("fp8"); err == nil && q > p { // the lane's MLA multiplies in FP8
				p = q
			}
		}
		t += math.Max(k.FLOPs/p, k.Bytes/chip.HBMBytesPerSec())
	}
	return t
}
