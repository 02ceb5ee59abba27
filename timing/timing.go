// Package timing turns counted kernels into time on a chip: what GEMMs, attention kernels,
// memory-bound passes and collectives actually achieve, as opposed to the datasheet roofline.
// Every parameter comes from the chip database (chips.Efficiency) with its source. Pure: no
// I/O, no knowledge of models or layouts.
package timing

import (
	"fmt"
	"math"

	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/kernels"
)

// Model times kernels on one chip for a step whose headline precision is DType (the peak
// F_realizable and MFU are quoted against).
type Model struct {
	Chip  chips.Chip
	DType string
	Eff   chips.Efficiency

	peak    float64 // FLOP/s of DType
	bw      float64 // achievable HBM B/s
	vec     float64 // vector (non-tensor-core) FLOP/s
	lat     float64 // s per kernel launch
	host    float64 // s per eager launch from the host
	step    float64 // s per step
	upBW    float64 // achievable scale-up B/s per direction
	outBW   float64 // achievable scale-out B/s per direction
	upLat   float64
	outLat  float64
	tiles   [][2]float64
	peakFor map[string]float64
}

// New resolves a chip's efficiency parameters for a step in dtype.
func New(c chips.Chip, dtype string) (*Model, error) {
	peak, err := c.Peak(dtype)
	if err != nil {
		return nil, err
	}
	e := c.Efficiency
	if e.HBMFrac <= 0 || e.HBMFrac > 1 {
		return nil, fmt.Errorf("chip %s: efficiency.hbm_frac must be in (0, 1], got %g", c.Name, e.HBMFrac)
	}
	m := &Model{Chip: c, DType: dtype, Eff: e, peak: peak, bw: c.HBMBytesPerSec() * e.HBMFrac,
		lat: e.KernelLatencyUs * 1e-6, host: e.HostLaunchUs * 1e-6, step: e.StepOverheadUs * 1e-6,
		upBW: c.NetBytesPerSec() * e.ScaleUpFrac, outBW: c.ScaleOutGBps * 1e9 * e.ScaleOutFrac,
		upLat: e.ScaleUpLatencyUs * 1e-6, outLat: e.ScaleOutLatencyUs * 1e-6, peakFor: map[string]float64{}}
	m.vec = c.PeakTFLOPs["fp32"] * 1e12
	if m.vec <= 0 { // no published vector rate (TPUs): the VPU is a small fraction of the MXU
		m.vec = peak / 16
	}
	for _, t := range e.GEMMTiles {
		m.tiles = append(m.tiles, [2]float64{float64(t[0]), float64(t[1])})
	}
	return m, nil
}

// Peak is the dense tensor-core peak of dtype in FLOP/s, falling back to the step's peak when
// the chip has none for it (an fp8 GEMM on a chip without fp8 runs at its bf16 rate).
func (m *Model) Peak(dtype string) float64 {
	if p, ok := m.peakFor[dtype]; ok {
		return p
	}
	p, err := m.Chip.Peak(dtype)
	if err != nil {
		if p, err = m.Chip.Peak("bf16"); err != nil {
			p = m.peak
		}
	}
	m.peakFor[dtype] = p
	return p
}

// GEMMFrac is the achieved fraction of peak a large, well-shaped GEMM in dtype reaches.
func (m *Model) GEMMFrac(dtype string) float64 {
	if f, ok := m.Eff.GEMMFrac[dtype]; ok {
		return f
	}
	if f, ok := m.Eff.GEMMFrac["bf16"]; ok {
		return f
	}
	return 1
}

// WaveEfficiency is the share of a wave of SMs doing useful work for a GEMM of groups x
// [M,N] output tiles: tile quantization (a partial tile computes a full one), then wave
// quantization (the last wave of tiles leaves SMs idle). Small grids split K across idle
// SMs (split-K / stream-K, as cuBLAS and CUTLASS do), bounded by K/128 slices. Of the tile
// shapes the chip's kernels offer, the best is taken, as a kernel heuristic would.
func (m *Model) WaveEfficiency(M, N, K, groups float64) float64 {
	sms := float64(m.Chip.SMs)
	if sms <= 0 || len(m.tiles) == 0 || M <= 0 || N <= 0 {
		return 1
	}
	groups = math.Max(groups, 1)
	best := 0.0
	for _, t := range m.tiles {
		tm, tn := math.Ceil(M/t[0]), math.Ceil(N/t[1])
		quant := M / (tm * t[0]) * N / (tn * t[1])
		n := tm * tn * groups
		split := 1.0
		if n < sms {
			split = math.Max(1, math.Min(math.Floor(sms/n), math.Floor(K/128)))
		}
		n *= split
		wave := n / (math.Ceil(n/sms) * sms)
		best = math.Max(best, quant*wave)
	}
	return best
}

// GEMMEta is the achieved fraction of dtype's peak for one GEMM shape. A GEMM whose M varies
// from step to step around k.M (a serving engine's mixed steps) pays the tile quantization of
// the M values it meets, not of one: the time is averaged over M spread evenly across one
// period of the tallest tile, so the prediction does not jump as the mean crosses a tile edge.
func (m *Model) GEMMEta(k kernels.Kernel) float64 {
	// never above the peak, however deep: the depth term lifts a fitted fraction past K = 4,096
	frac := math.Min(1, m.GEMMFrac(k.DType)*m.depthShare(k))
	if k.Grouped {
		if f, ok := m.Eff.MoEGEMMFrac[k.DType]; ok {
			frac *= f
		} else if m.Eff.GroupedGEMMFrac > 0 {
			frac *= m.Eff.GroupedGEMMFrac
		}
	}
	if k.BlockScaled && m.Eff.MXFP8GEMMShare > 0 {
		frac *= m.Eff.MXFP8GEMMShare
	}
	if !k.VaryingM || len(m.tiles) == 0 || k.M <= 0 {
		return frac * m.WaveEfficiency(k.M, k.N, k.K, k.Groups)
	}
	period := 0.0
	for _, t := range m.tiles {
		period = math.Max(period, t[0])
	}
	const samples = 8
	var t float64 // sum of M_i / eff_i: time up to a constant
	for i := 0; i < samples; i++ {
		mi := math.Max(1, k.M+period*((float64(i)+0.5)/samples-0.5))
		t += mi / m.WaveEfficiency(mi, k.N, k.K, k.Groups)
	}
	return frac * k.M * samples / t
}

// gemmKRef is the depth the fitted GEMM fractions describe: the training lanes' and engines'
// figures are fractions at K = 4,096, and the depth term scales them to other depths.
const gemmKRef = 4096

// depthShare is a GEMM's rate at depth K relative to one of depth gemmKRef: each output tile
// spends K0 steps' time outside its K loop (chips.Efficiency.GEMMK0), so depth K runs at
// K(gemmKRef+K0) / (gemmKRef(K+K0)) of it, below 1 for shallower GEMMs and above 1 (up to
// (gemmKRef+K0)/gemmKRef) for deeper ones. K0 is fitted to shallow GEMMs only (K < 4,096,
// write_gemm_depth.py); NVIDIA's measured tables at K = 8,192 and 16,384 follow the same curve
// (FP8 on Blackwell runs 4-8% above its K = 4,096 rate at 16,384; BF16 and Hopper stay within
// 2-3%: TestGEMMDepthCarriesPastTheFitRange). FP4 and INT8 take FP8's K0 where they have none
// (a low-precision main loop, a scaling epilogue), other dtypes BF16's.
func (m *Model) depthShare(k kernels.Kernel) float64 {
	k0, ok := m.Eff.GEMMK0[k.DType]
	if !ok {
		k0 = m.Eff.GEMMK0["bf16"]
		if k.DType == "fp4" || k.DType == "int8" {
			k0 = m.Eff.GEMMK0["fp8"]
		}
	}
	if k0 <= 0 || k.K <= 0 {
		return 1
	}
	return k.K * (gemmKRef + k0) / (gemmKRef * (k.K + k0))
}

// KernelTime is one kernel's prediction.
type KernelTime struct {
	Compute, Memory, Latency, Comm float64 // seconds; Comm is the collective's full time
	Eta                            float64 // achieved fraction of the kernel's own peak
}

// Time is the kernel's wall time: the slower of compute and memory (a kernel overlaps its
// loads with its math), plus its launch latency; a collective's own time.
func (kt KernelTime) Time() float64 { return math.Max(kt.Compute, kt.Memory) + kt.Latency + kt.Comm }

// hostBound is the extra time eager launches add: the host issues one kernel per host_launch,
// so Count launches take at least Count x host_launch even when the GPU finishes sooner.
func (m *Model) hostBound(k kernels.Kernel, gpu float64) float64 {
	if k.Graphed || k.Count == 0 {
		return 0
	}
	return math.Max(0, k.Count*m.host-gpu)
}

// Kernel times one kernel (all Count launches).
func (m *Model) Kernel(k kernels.Kernel) KernelTime {
	var kt KernelTime
	kt.Latency = k.Count * m.lat
	kt.Memory = k.Bytes / m.bw
	if k.MemShare > 0 {
		kt.Memory /= k.MemShare
	}
	if k.Kind == kernels.Attention && k.Decode {
		// decode attention streams the KV cache at its kernels' own share of the bandwidth,
		// lower still for an 8-bit cache it dequantizes as it reads (lanes fitted to the
		// engines' measured kernels: mrep calibrate --kernels)
		frac := m.Eff.AttnDecodeHBMFrac
		if k.EightBitKV() && m.Eff.AttnDecodeHBMFrac8 > 0 {
			frac = m.Eff.AttnDecodeHBMFrac8
		}
		if frac > 0 {
			kt.Memory = k.Bytes / (m.Chip.HBMBytesPerSec() * frac)
		}
	}
	if k.Kind == kernels.Attention && !k.Backward {
		// a serving engine's attention op beyond its kernel (cache write, metadata, plan)
		over := m.Eff.AttnOverheadUs
		if k.Decode {
			over = m.Eff.AttnDecodeOverheadUs
		}
		kt.Latency += k.Count * over * 1e-6
	}
	if k.Kind == kernels.GEMM && k.Grouped {
		// a serving engine's fused MoE op: its weight streaming, and beyond its GEMMs the
		// routing, permutation and un-permute (forward passes)
		if m.Eff.MoEHBMFrac > 0 {
			kt.Memory = k.Bytes / (m.Chip.HBMBytesPerSec() * m.Eff.MoEHBMFrac)
		}
		if !k.Backward {
			kt.Latency += k.Count * m.Eff.MoEOverheadUs * 1e-6
		}
	}
	switch k.Kind {
	case kernels.GEMM:
		kt.Eta = m.GEMMEta(k)
		kt.Compute = k.FLOPs/(m.Peak(k.DType)*kt.Eta) + k.VectorFLOPs/m.vec
	case kernels.Attention:
		peak := m.Peak(k.DType)
		if k.Latent && k.EightBitKV() && m.Eff.MLAFP8Math {
			peak = m.Peak("fp8") // latent attention over an FP8 cache, in FP8 (chips.Efficiency.MLAFP8Math)
		}
		if k.Decode {
			// A decode attention kernel streams the KV cache: its M is the query rows sharing one
			// KV head, so MHA (M = 1) runs on the vector units and a wide GQA group or MLA's
			// shared latent fills tensor-core tiles; either way it never falls below the vector rate.
			frac := m.Eff.AttnFrac
			if k.Latent && m.Eff.MLADecodeFrac > 0 {
				frac = m.Eff.MLADecodeFrac
			}
			if k.Latent && k.EightBitKV() && m.Eff.MLADecodeFrac8 > 0 {
				frac = m.Eff.MLADecodeFrac8
			}
			kt.Eta = frac * math.Min(1, k.GroupM/64)
			rate := math.Max(m.vec, peak*kt.Eta)
			kt.Eta = rate / peak
			kt.Compute = (k.FLOPs + k.VectorFLOPs) / rate
			break
		}
		frac := m.Eff.AttnFrac
		if k.Latent && m.Eff.MLAFrac > 0 {
			frac = m.Eff.MLAFrac
		}
		if k.Backward {
			frac = m.Eff.AttnBwdFrac
		}
		fp8 := false
		if !k.Latent || k.Backward || m.Eff.MLAFrac == 0 {
			if f, ok := m.fp8Attention(k, frac); ok {
				frac, fp8 = f, true
			} else if k.DType == "fp8" {
				// FP8 attention on a chip without its measured figures: timed as the 16-bit
				// kernel, its gain unclaimed
				peak = m.Peak("bf16")
			}
		}
		// Flash kernels tile queries in blocks of 128 per (sequence, head): short prompts and
		// few heads leave SMs idle, exactly as a GEMM's waves do.
		kt.Eta = frac * m.WaveEfficiency(k.Queries, 128, 128, k.Batch*k.Heads) / m.expShare(k, peak)
		k0 := m.Eff.AttnWindowK0
		if k.Backward {
			k0 = m.Eff.AttnWindowK0Bwd
		}
		switch {
		case k.Window > 0 && fp8 && k.Backward:
			// cuDNN's FP8 backward skips no tile outside the window: it runs the whole causal
			// triangle (NVIDIA's published GPT-OSS shape, 128-key windows, runs 4-8x slower than
			// its 16-bit backward at 4,096-8,192 tokens, twice as much slower at twice the tokens)
			kt.Eta *= windowedShare(k.Queries, k.Window)
		case k.Window > 0 && k0 > 0:
			// a short key loop per query tile; never slower than the causal kernel the window
			// trims (its scores at the causal kernel's rate)
			kt.Eta *= math.Max(k.Window/(k.Window+k0), windowedShare(k.Queries, k.Window))
		}
		kt.Compute = k.FLOPs / (peak * kt.Eta)
		if k.Backward && k.Sink {
			kt.Compute += k.Count * k.Batch * k.Queries * k.Heads * m.Eff.AttnSinkBwdNs * 1e-9
		}
	case kernels.Memory:
		kt.Compute = k.VectorFLOPs / m.vec
	case kernels.Collective:
		kt.Latency, kt.Memory = 0, 0
		kt.Comm = k.Count * m.collective(k)
	}
	return kt
}

// fp8Attention is a training attention kernel's fraction of the FP8 peak where it runs in FP8
// (analyzer.Scenario.FP8Attention) and the chip has cuDNN's measured figures for its scaling and
// pass (chips.Efficiency.TrainAttnFrac): the lane's 16-bit fraction (frac16, the one its GEMM
// figures were fitted beside) times cuDNN's measured 8-bit over 16-bit fraction, so FP8 gains
// what the kernels measure over the 16-bit attention the lane times.
func (m *Model) fp8Attention(k kernels.Kernel, frac16 float64) (float64, bool) {
	if k.DType != "fp8" || k.Decode {
		return 0, false
	}
	key, base := "fp8", "bf16"
	if k.BlockScaled {
		key = "mxfp8"
	}
	if k.Backward {
		key, base = key+"_bwd", base+"_bwd"
	}
	f, b := m.Eff.TrainAttnFrac[key], m.Eff.TrainAttnFrac[base]
	if f <= 0 || b <= 0 {
		return 0, false
	}
	return frac16 * f / b, true
}

// windowedShare is the share of a causal kernel's scores over q tokens a window of w keys keeps.
func windowedShare(q, w float64) float64 {
	if q <= 0 || w >= q {
		return 1
	}
	return (w*(w+1)/2 + (q-w)*w) / (q * (q + 1) / 2)
}

// refHeadDim is the head dimension the attention figures (AttnFrac, AttnBwdFrac) describe:
// the engines' and frameworks' measured kernels they are fitted to are mostly of 128-wide heads.
const refHeadDim = 128

// flashBwdFLOPs is a flash backward's tensor-core FLOPs per score over the forward's: it
// recomputes the scores (one exponential each) and runs five GEMMs to the forward's two.
const flashBwdFLOPs = 2.5

// expShare is how much longer a flash-attention kernel takes per tensor-core FLOP than one of
// 128-wide heads, from the exponential each score takes beside its 4·d FLOPs: per score the
// kernel spends 4·d/P on the tensor cores and 1/E on the exponential unit, so its time goes as
// d + d0 with d0 = P / 4E, and relative to d = 128 a head of d takes (d+d0)/d x 128/(128+d0).
// On H100 d0 is 64 (4,096 BF16 FLOPs and 16 exponentials per SM per clock), on B200 112 and on
// Blackwell Ultra, whose exponential rate doubled, 53: a 64-wide head runs at 0.75, 0.68 and
// 0.77 of a 128-wide one's FLOP rate (aiconfigurator's measured context attention: 0.77, 0.60
// and 0.72; validate --kernels). A backward runs 2.5x the tensor FLOPs per exponential. MLA
// timed with its own fitted figure (mla_frac: a serving engine's tables, of its one head
// shape) keeps it; MLA timed as flash attention (training: 192-wide query-key and 128-wide
// value heads, HeadDim 160; a lane without mla_frac) pays the term as any head does.
func (m *Model) expShare(k kernels.Kernel, peak float64) float64 {
	if k.HeadDim <= 0 || m.Chip.ExpTera <= 0 || k.Latent && m.Eff.MLAFrac > 0 && !k.Backward {
		return 1
	}
	d0 := peak / (4 * m.Chip.ExpTera * 1e12)
	if k.Backward {
		d0 /= flashBwdFLOPs
	}
	return (k.HeadDim + d0) / k.HeadDim * refHeadDim / (refHeadDim + d0)
}

// collective is one launch: a fixed latency plus the bytes each GPU sends over its link at
// achievable bandwidth (kernels.RingFactor).
func (m *Model) collective(k kernels.Kernel) float64 {
	if k.Ranks <= 1 && k.Coll != kernels.P2P {
		return 0
	}
	bw, lat := m.upBW, m.upLat
	if m.scaleOut(k) {
		bw, lat = m.outBW, m.outLat
		if g := k.DomainRanks; g > 1 && k.Coll != kernels.AllToAll && k.Coll != kernels.P2P {
			// multi-rail rings: the domain's g ranks each drive their own NIC
			bw = math.Min(g*m.outBW, math.Max(m.upBW, m.outBW))
		}
	}
	if bw <= 0 {
		return math.Inf(1)
	}
	return lat + kernels.RingFactor(k.Coll, k.Ranks)*k.Message/bw
}

// scaleOut: a collective runs on the scale-out network when asked to, or when its group is
// larger than the chip's scale-up domain.
func (m *Model) scaleOut(k kernels.Kernel) bool {
	return k.Tier == kernels.ScaleOut || k.Ranks > float64(m.Eff.ScaleUpDomain)
}

// idealNet is a collective at the nominal link bandwidth with no latency.
func (m *Model) idealNet(k kernels.Kernel) float64 {
	factor := kernels.RingFactor(k.Coll, k.Ranks)
	bw := m.Chip.NetBytesPerSec()
	if m.scaleOut(k) {
		up := bw
		bw = m.Chip.ScaleOutGBps * 1e9
		if g := k.DomainRanks; g > 1 && k.Coll != kernels.AllToAll && k.Coll != kernels.P2P {
			bw = math.Min(g*bw, math.Max(up, bw))
		}
	}
	if bw <= 0 {
		return math.Inf(1)
	}
	return k.Count * factor * k.Message / bw
}

// PipelineStepOverhead is the fixed cost of one micro-batch step of a pipeline stage beyond
// its kernels, in seconds (serve's pipelines ask for it).
// EagerElementwise is the chip's (or lane's) byte multiplier for eager PyTorch elementwise ops.
func (m *Model) EagerElementwise() float64 { return m.Eff.EagerElementwise }

// SeqOverhead is an engine step's host seconds per running sequence.
func (m *Model) SeqOverhead() float64 { return m.Eff.SeqOverheadUs * 1e-6 }

// RequestOverhead is the seconds a request waits beyond the engine's steps before its first
// token reaches the client (API server, tokenizer, streaming).
func (m *Model) RequestOverhead() float64 { return m.Eff.RequestOverheadUs * 1e-6 }

// MoELaunch is the host's seconds per kernel it issues in an eager MoE layer.
func (m *Model) MoELaunch() float64 { return m.Eff.MoELaunchUs * 1e-6 }

func (m *Model) PipelineStepOverhead() float64 { return m.Eff.PPStepUs * 1e-6 }

// SMs is the chip's streaming multiprocessors (compute units on AMD): what communication
// kernels running beside the computation take their share of.
func (m *Model) SMs() float64 { return float64(m.Chip.SMs) }

// Predict times a step: kernels run one after another on the GPU (a kernel overlaps its own
// memory and math, not its neighbour's), collectives add their exposed share, and every step
// pays the per-step overhead once.
func (m *Model) Predict(ks []kernels.Kernel) kernels.Time {
	var t kernels.Time
	t.TLatency, t.TOverhead = m.step, m.step
	for _, k := range ks {
		kt := m.Kernel(k)
		t.TComp += kt.Compute
		t.THBM += kt.Memory
		t.THBMIdeal += k.Bytes / m.Chip.HBMBytesPerSec()
		if k.FLOPs > 0 {
			t.TCompIdeal += k.FLOPs / m.Peak(k.DType)
		}
		if k.Kind == kernels.Collective {
			t.TNetIdeal += m.idealNet(k)
			t.TNet += kt.Comm
			exposed := k.Exposed
			if exposed < 0 || exposed > 1 {
				exposed = 1
			}
			t.TComm += exposed * kt.Comm
			continue
		}
		t.Launches += k.Count
		body := math.Max(kt.Compute, kt.Memory)
		t.TLatency += kt.Latency + m.hostBound(k, body+kt.Latency)
		if kt.Compute >= kt.Memory {
			t.TComputeBound += body
		} else {
			t.TMemoryBound += body
		}
		switch k.Kind {
		case kernels.GEMM:
			t.TGEMM += body
		case kernels.Attention:
			t.TAttention += body
		default:
			t.TMemory += body
		}
	}
	t.TEst = t.TGEMM + t.TAttention + t.TMemory + t.TComm + t.TLatency
	// Communication hidden behind compute still cannot finish faster than its links carry it.
	if t.TNet > t.TEst {
		t.TComm += t.TNet - t.TEst
		t.TEst = t.TNet
	}
	t.FRealizable = t.TComp * m.peak
	t.TRoofline, t.RooflineRegime = t.TCompIdeal, "compute-bound"
	if t.THBMIdeal > t.TRoofline {
		t.TRoofline, t.RooflineRegime = t.THBMIdeal, "hbm-bound"
	}
	if t.TNetIdeal > t.TRoofline {
		t.TRoofline, t.RooflineRegime = t.TNetIdeal, "net-bound"
	}
	t.Regime = "compute-bound"
	best := t.TComputeBound
	for _, c := range []struct {
		v float64
		r string
	}{{t.TMemoryBound, "hbm-bound"}, {t.TComm, "net-bound"}, {t.TLatency, "latency-bound"}} {
		if c.v > best {
			best, t.Regime = c.v, c.r
		}
	}
	return t
}

// Lanes are the chip's lanes (its training frameworks' and serving engines' figures, chips.json
// efficiency.lanes) as time models at dtype, by lane name.
func Lanes(c chips.Chip, dtype string) (map[string]kernels.Predictor, error) {
	out := map[string]kernels.Predictor{}
	for name := range c.Efficiency.Lanes {
		lc := c
		lc.Efficiency = c.Efficiency.Lane(name)
		tm, err := New(lc, dtype)
		if err != nil {
			return nil, fmt.Errorf("lane %s: %w", name, err)
		}
		out[name] = tm
	}
	return out, nil
}
