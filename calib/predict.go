package calib

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/layout"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/serve"
	"github.com/mrep-dev/mrep/timing"
)

// Models resolves a row's model name to a dump.
type Models func(name string) (*model.Dump, error)

// Prepared is a row made ready to predict: its steps are counted once (counting does not
// depend on the chip's efficiency), so re-timing them under other parameters is cheap.
type Prepared struct {
	Row  Row
	Skip error // why the row cannot be predicted (ErrNotExpressible), nil if it can
	Chip chips.Chip
	// PrefillChip is a disaggregated run's prefill pool's chip (the row's chip when it names none).
	PrefillChip chips.Chip
	// Fits says whether the run's weights and KV cache fit in one GPU at its layout.
	Fits    bool
	FitNote string
	// Stated is a training row's layout as its source states it where that does not fit in
	// memory and a setting the framework offers does (Setting): the row is then predicted,
	// fitted and reported under that setting, and its stated layout beside it (nil otherwise).
	Stated  *layout.Layout
	Setting string

	steps  []weighted
	moe    bool                    // the model routes tokens to experts
	value  func(t float64) float64 // total step time -> the row's measured quantity
	train  *trainRow               // a training row on a parallel layout
	memory *layout.Memory          // a peak-memory row: the memory model's terms
	serve  *analyzer.Model         // a serving row: the engine's offline steady state
}

type trainRow struct {
	m  *analyzer.Model
	s  analyzer.Scenario
	l  layout.Layout
	tr *layout.Trainer // its counted steps, reused across efficiency figures
}

type weighted struct {
	step analyzer.Step
	w    float64
}

// DecodeSamples is how many decode steps a static-batch run is integrated over: step time is
// linear in the KV length while the regime holds, so the midpoint rule over a few segments
// is exact up to regime changes.
const DecodeSamples = 8

// Prepare counts every expressible row's steps. Unknown chips and models are errors (with the
// row's id); rows that need features mrep lacks are kept with Skip set.
func Prepare(rows []Row, db *chips.DB, models Models) ([]Prepared, error) {
	cache := map[string]*analyzer.Model{}
	var out []Prepared
	for _, r := range rows {
		chip, err := db.Lookup(r.Chip)
		if err != nil {
			return nil, fmt.Errorf("row %s: %w", r.ID, err)
		}
		if _, err := chip.Peak(r.DType); err != nil {
			return nil, fmt.Errorf("row %s: %w", r.ID, err)
		}
		m, err := rowModel(cache, models, r)
		if err != nil {
			return nil, err
		}
		p := Prepared{Row: r, Chip: chip, PrefillChip: chip, moe: m.Fingerprint.MoE != nil}
		if r.PrefillChip != "" {
			if p.PrefillChip, err = db.Lookup(r.PrefillChip); err != nil {
				return nil, fmt.Errorf("row %s: prefill_chip: %w", r.ID, err)
			}
		}
		if p.Skip = r.Expressible(); p.Skip != nil {
			out = append(out, p)
			continue
		}
		if err := p.count(m); err != nil {
			return nil, fmt.Errorf("row %s: %w", r.ID, err)
		}
		if err := p.underFittingSetting(); err != nil {
			return nil, fmt.Errorf("row %s: %w", r.ID, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// rowModel is the row's model with its fine-tune applied, built once per model and fine-tune.
func rowModel(cache map[string]*analyzer.Model, models Models, r Row) (*analyzer.Model, error) {
	ft := r.FineTune()
	key := r.Model
	if ft.Active() {
		key += "\x00" + strings.Join(ft.Flags(), " ")
	}
	if m, ok := cache[key]; ok {
		return m, nil
	}
	base, ok := cache[r.Model]
	if !ok {
		d, err := models(r.Model)
		if err != nil {
			return nil, fmt.Errorf("row %s: model %q: %w", r.ID, r.Model, err)
		}
		base = analyzer.NewModel(d)
		cache[r.Model] = base
	}
	m, err := base.WithFineTune(ft)
	if err != nil {
		return nil, fmt.Errorf("row %s: %w", r.ID, err)
	}
	cache[key] = m
	return m, nil
}

// Scenario is the row's precision recipe and layout as an analyzer scenario.
func (r Row) Scenario() (analyzer.Scenario, error) {
	s := analyzer.DefaultScenario()
	if err := s.SetPrecision(analyzer.Precision{Compute: r.DType, Weight: r.WeightDType, Act: r.ActDType, KV: r.KVDType}); err != nil {
		return s, err
	}
	s.TP, s.EP = max(r.TP, 1), max(r.EP, 1)
	return s, nil
}

func (p *Prepared) count(m *analyzer.Model) error {
	r := p.Row
	s, err := r.Scenario()
	if err != nil {
		return err
	}
	add := func(ph analyzer.Phase, s analyzer.Scenario, w float64) error {
		st, err := m.AnalyzeTotals(ph, s, analyzer.Achievable) // per-module rows are ~60 KB a row, unused here
		if err != nil {
			return err
		}
		p.steps = append(p.steps, weighted{st, w})
		return nil
	}
	fit := s
	switch r.Kind {
	case KindTTFT:
		s.Batch, s.Seq = max(r.Batch, 1), r.ISL
		fit.Batch, fit.Seq, fit.KVLen = s.Batch, r.ISL, r.ISL+1
		err = add(analyzer.Prefill, s, 1)
		p.value = func(t float64) float64 { return t }
	case KindDecodeStep:
		s.Batch, s.KVLen = max(r.Batch, 1), r.ISL
		fit.Batch, fit.Seq, fit.KVLen = s.Batch, 1, r.ISL+1
		err = add(analyzer.Decode, s, 1)
		p.value = func(t float64) float64 { return t }
	case KindStatic, KindBatchLatency:
		s.Batch, s.Seq = r.Batch, r.ISL
		fit.Batch, fit.Seq, fit.KVLen = r.Batch, r.ISL, r.ISL+r.OSL
		if err = add(analyzer.Prefill, s, 1); err != nil {
			return err
		}
		// decode step j (1..OSL-1) attends over ISL+j tokens
		steps := float64(r.OSL - 1)
		n := math.Min(steps, DecodeSamples)
		for i := 0; i < int(n); i++ {
			lo, hi := 1+steps*float64(i)/n, 1+steps*float64(i+1)/n
			d := s
			d.KVLen = r.ISL + int64(math.Round((lo+hi)/2-0.5))
			if err = add(analyzer.Decode, d, hi-lo); err != nil {
				return err
			}
		}
		tokens := float64(r.Batch * r.OSL)
		gpus := float64(s.TP)
		switch r.Kind {
		case KindBatchLatency:
			p.value = func(t float64) float64 { return t }
		default:
			p.value = func(t float64) float64 { return tokens / t / gpus }
		}
	case KindBenchServe:
		// the benchmark's requests run through the engine's scheduler step by step
		p.serve = m
		p.Fits = serve.KVTokens(m, s, p.Chip.MemoryBytes(), rowEngine(m, r, p.Chip)) >= float64(r.ISL+r.OSL)*(1+r.LengthSpread)
		p.FitNote = "KV cache holds the longest request"
		return nil
	case KindServing, KindWave:
		// a wave of prompts admitted together is timed as the engine's offline steady state at
		// that many sequences (within the KV cache): prefill and decode interleaved as the wave
		// drains, the KV cache bounding how many run at once
		p.serve = m
		p.Fits = serve.KVTokens(m, s, p.Chip.MemoryBytes(), benchEngine(m, r, p.Chip)) >= float64(r.ISL+r.OSL)
		p.FitNote = "KV cache holds at least one sequence"
		return nil
	case KindTrainMemory:
		l := r.Layout()
		if err := l.Validate(m.Fingerprint); err != nil {
			return err
		}
		mem := layout.TrainingMemory(m, l)
		p.memory = &mem
		f := layout.CheckTraining("training", mem, p.Chip.MemoryBytes())
		p.Fits, p.FitNote = f.Fits, f.Verdict()
		return nil
	case KindTrainStep, KindTrainTokens:
		l := r.Layout()
		if err := l.Validate(m.Fingerprint); err != nil {
			return err
		}
		p.train = &trainRow{m: m, s: s, l: l, tr: layout.NewTrainer(m, s, nil, 0, 0)}
		p.value = func(t float64) float64 { return t }
		if r.Kind == KindTrainTokens {
			tokens := float64(r.GBS*r.Seq) / float64(r.GPUs)
			p.value = func(t float64) float64 { return tokens / t }
		}
	default:
		return fmt.Errorf("kind %s is not predictable", r.Kind)
	}
	if err != nil {
		return err
	}
	var f layout.Fit
	if p.train != nil {
		f = layout.CheckTraining("training", layout.TrainingMemory(m, p.train.l), p.Chip.MemoryBytes())
	} else {
		f = layout.Check("inference", layout.InferenceMemory(m, fit, 1, 0), p.Chip.MemoryBytes())
	}
	p.Fits, p.FitNote = f.Fits, f.Verdict()
	return nil
}

// rowEngine is the engine a serving row ran: vLLM's or SGLang's documented defaults for the
// engine it names (serve.EnginePreset), else trtllm-bench's (benchEngine); the limits and KV
// fraction the row states it set itself override either.
func rowEngine(m *analyzer.Model, r Row, chip chips.Chip) serve.Engine {
	if e := engineOf(r, chip); e != "trtllm" {
		// a named engine's documented defaults (trtllm rows are trtllm-bench runs: benchEngine)
		if eng, err := serve.EnginePreset(e, chip.MemoryGiB); err == nil {
			tp, ep := max(r.TP, 1), max(r.EP, 1)
			return r.limits(m, eng).ForLayout(max(tp, ep), r.PP, max(1, ep/tp))
		}
	}
	return benchEngine(m, r, chip)
}

// limits is e with the limits, KV fraction and speculative decoding the row states its run
// set itself.
func (r Row) limits(m *analyzer.Model, e serve.Engine) serve.Engine {
	if r.SpecTokens > 0 {
		e.SpecTokens, e.SpecAccept, e.SpecDraftCost = int(r.SpecTokens), r.SpecAccept, r.SpecDraftCost
		// what the row does not state is the engine's measured MTP figures (serve.Figures),
		// else an MTP head of one layer, as plan serve's default
		if e.SpecAccept == 0 {
			e.SpecAccept = e.MTP.AcceptAt(e.SpecTokens)
		}
		if e.SpecDraftCost == 0 {
			e.SpecDraftCost = e.MTP.MTPDraftCost
		}
		if e.SpecDraftCost == 0 && m.Fingerprint.Layers > 0 {
			e.SpecDraftCost = 1 / float64(m.Fingerprint.Layers)
		}
	}
	if r.MaxBatch > 0 {
		e.MaxBatch = float64(r.MaxBatch)
	}
	if r.MaxNumTokens > 0 {
		e.TokenBudget = float64(r.MaxNumTokens)
	}
	if r.KVFraction > 0 {
		e.KVFraction, e.AutoKVFraction = r.KVFraction, false
	}
	return e
}

// bench predicts a serving benchmark's figure. Its roofline: for throughput, the engine's
// steady state at the row's concurrency on ideal kernels (no run beats it); a time under
// queueing has no such bound and reports 0.
func (p Prepared) bench(rp serve.Replica, eff chips.Efficiency) (pred, roof float64, err error) {
	r := p.Row
	load := serve.Load{Kind: serve.Users, N: int(r.Concurrency), Requests: int(r.Requests), Seed: 1,
		Lengths: benchLengths(r)}
	if r.RequestRate > 0 {
		load.Kind, load.N, load.Rate = serve.Rate, 0, r.RequestRate
	}
	res, err := simulated(rp, load, r, eff)
	if err != nil {
		return 0, 0, err
	}
	pick := func(d serve.Dist) float64 {
		switch r.Stat {
		case "median":
			return d.P50
		case "p90":
			return d.P90
		case "p99":
			return d.P99
		}
		return d.Mean
	}
	switch r.Metric {
	case "ttft":
		pred = pick(res.TTFT)
	case "tpot":
		pred = pick(res.TPOT)
	case "e2e":
		pred = pick(res.E2E)
	default:
		pred = res.OutputTokS
		want := math.Inf(1)
		if r.Concurrency > 0 {
			want = float64(r.Concurrency)
		}
		ss, err := rp.At(r.ISL, r.OSL, want)
		if err != nil {
			return 0, 0, err
		}
		return pred, ss.RooflineTokS, nil // the full engine on ideal kernels: no run beats it
	}
	return pred, 0, nil
}

// disagg predicts a disaggregated run's figure: its closed loop over the two pools in steady
// state (serve.DisaggUsers), dec the decode replica. A steady state has one value per figure,
// so every statistic of it is predicted as its mean. Its roofline, for throughput: the decode
// pool's steady state on ideal kernels.
func (p Prepared) disagg(dec serve.Replica, chip chips.Chip) (pred, roof float64, err error) {
	r := p.Row
	pre := dec
	node := int64(max(chip.Efficiency.ScaleUpDomain, 1))
	if r.PrefillChip != "" && p.PrefillChip.Name != chip.Name {
		// the prefill pool on chips of its own, timed with their figures in the engine's lane;
		// the KV cache crosses the scale-out network (no scale-up link joins two kinds of GPU)
		pc := p.PrefillChip
		pc.Efficiency = pc.Efficiency.Lane(engineOf(r, pc))
		tm, err := timing.New(pc, dec.Scenario.ComputeDType)
		if err != nil {
			return 0, 0, fmt.Errorf("prefill chip: %w", err)
		}
		pre.Pred, pre.MemBytes, node = tm, pc.MemoryBytes(), 0
		pre.Engine = rowEngine(dec.Model, r, pc)
	}
	pre.Scenario.TP, pre.Scenario.EP = max(r.PrefillTP, 1), max(r.PrefillEP, 1)
	pre.Scenario.ETP = serve.InferenceETP(pre.Scenario.TP, pre.Scenario.EP)
	pre.Engine.PP = max(r.PrefillPP, 1)
	// the prefill pool's own layout's defaults (a no-op for engines whose defaults have none)
	pre.Engine = pre.Engine.ForLayout(max(pre.Scenario.TP, pre.Scenario.EP), pre.Engine.PP, max(1, pre.Scenario.EP/pre.Scenario.TP))
	res, err := serve.DisaggUsers(pre, dec, r.PrefillReplicas, max(r.DecodeReplicas, 1), r.ISL, r.OSL, float64(r.Concurrency), node)
	if err != nil {
		return 0, 0, err
	}
	switch r.Metric {
	case "ttft":
		return res.TTFT, 0, nil
	case "tpot":
		return res.TPOT, 0, nil
	case "e2e":
		return res.E2E, 0, nil
	}
	return res.OutputTokS, res.RooflineTokS, nil
}

// benchLengths is the benchmark's requests: ISL and OSL about their means, uniform over
// mean x [1-s, 1+s] (the random dataset of vllm bench serve and sglang.bench_serving with a
// range ratio), stratified so a few requests still cover the range, in a fixed shuffled order.
func benchLengths(r Row) []serve.Request {
	n := int(r.Requests)
	var w serve.Workload
	for i := 0; i < n; i++ {
		q := (float64(i) + 0.5) / float64(n)
		// the output lengths are stratified in the reverse order so long prompts do not always
		// come with long outputs
		isl := math.Max(1, math.Round(float64(r.ISL)*(1+r.LengthSpread*(2*q-1))))
		osl := math.Max(1, math.Round(float64(r.OSL)*(1+r.LengthSpread*(1-2*q))))
		w.ISL, w.OSL, w.Weight = append(w.ISL, isl), append(w.OSL, osl), append(w.Weight, 1)
	}
	return w.Sample(n)
}

// benchEngine is the engine a trtllm-bench row ran: serve's preset for its lengths, layout,
// precisions and chip, with the limits and KV fraction the row states it set itself.
func benchEngine(m *analyzer.Model, r Row, chip chips.Chip) serve.Engine {
	// the row's dtypes were checked by Prepare (its Scenario); no shipped row sets act_dtype, so
	// the KV cache is the compute precision's unless the row names its own
	s, _ := r.Scenario()
	e := serve.TRTLLMBench(m, serve.BenchRun{ISL: r.ISL, OSL: r.OSL, TP: r.TP, PP: r.PP,
		WeightBytes: s.WeightBytes, KVBytes: s.KVBytes, MemBytes: chip.MemoryBytes()})
	e.MTP = serve.Figures("trtllm") // its MTP figures; an offline run has no request path
	return r.limits(m, e)
}

// Predict times the row's steps with the chip's efficiency replaced by eff: the predicted
// value and the ideal roofline's value (the bound no run beats).
func (p Prepared) Predict(eff chips.Efficiency) (pred, roof float64, err error) {
	if m := p.memory; m != nil {
		// a peak memory: the reading the row reports, in GiB; its bound is the parameter
		// state alone (weights, gradients, master weights, optimizer), which no peak is below
		return MemoryReading(*m, p.Row.MemoryStat) / (1 << 30), (m.Weights + m.Gradients + m.MasterWeights + m.Optimizer) / (1 << 30), nil
	}
	chip := p.Chip
	chip.Efficiency = eff
	if p.train != nil {
		chip.Efficiency = eff.Lane(p.train.l.Framework) // the training framework's figures
	} else {
		chip.Efficiency = eff.Lane(engineOf(p.Row, p.Chip)) // the serving engine's figures on this chip
	}
	s, err := p.Row.Scenario()
	if err != nil {
		return 0, 0, err
	}
	tm, err := timing.New(chip, s.ComputeDType)
	if err != nil {
		return 0, 0, err
	}
	tg, err := analyzer.NewTarget(chip, s.ComputeDType, tm)
	if err != nil {
		return 0, 0, err
	}
	if m := p.serve; m != nil {
		s.ETP = serve.InferenceETP(s.TP, s.EP) // experts fill the TP group (EP > TP: the attention data-parallel, unsplit)
		if p.Row.ETP > 0 {
			s.ETP = p.Row.ETP
		}
		rp := serve.Replica{Model: m, Scenario: s, Pred: tm, MemBytes: chip.MemoryBytes(), Engine: rowEngine(m, p.Row, chip)}
		if p.Row.Kind == KindBenchServe && p.Row.PrefillReplicas > 0 {
			return p.disagg(rp, chip)
		}
		if p.Row.Kind == KindBenchServe {
			return p.bench(rp, chip.Efficiency)
		}
		want := math.Inf(1)
		if p.Row.Concurrency > 0 {
			want = float64(p.Row.Concurrency)
		}
		if p.Row.Kind == KindWave {
			want = float64(p.Row.Batch)
		}
		res, err := rp.At(p.Row.ISL, p.Row.OSL, want)
		if err != nil {
			return 0, 0, err
		}
		if p.Row.Kind == KindWave { // the node's input and output tokens
			f := float64(p.Row.ISL+p.Row.OSL) / float64(p.Row.OSL)
			return res.OutputTokS * f, res.RooflineTokS * f, nil
		}
		return res.OutputTokS, res.RooflineTokS, nil
	}
	if tr := p.train; tr != nil {
		t := tr.tr.With(tm, tg.Peak, chip)
		st, err := t.Train(tr.l)
		if err != nil {
			return 0, 0, err
		}
		return p.value(st.StepTime), p.value(st.Roofline), nil
	}
	var t, r float64
	for _, ws := range p.steps {
		res := analyzer.Evaluate(ws.step, tg)
		t += ws.w * res.Timing.TEst
		r += ws.w * res.Timing.TRoofline
	}
	return p.value(t), p.value(r), nil
}

// Refit is the fastest setting under which a training row that does not fit as stated fits
// in memory, and the prediction under it: a time that holds only under a configuration the
// memory model says cannot run is no prediction, so the row is predicted under the setting and
// validate names it.
type Refit struct {
	Setting   string  `json:"setting"`
	Predicted float64 `json:"predicted"`
	Ratio     float64 `json:"ratio"` // predicted / measured
}

// underFittingSetting moves a training row that does not fit in memory as stated to the
// fastest setting its framework offers that fits, chosen with the chip's shipped figures (once,
// so a fit's evaluations all time the same layout): a time that holds only under a layout the
// memory model refuses is no prediction, and no fit. A row no setting fits stays as stated.
func (p *Prepared) underFittingSetting() error {
	if p.train == nil || p.Fits || p.Row.Lacks != "" {
		return nil // fits, or the run used what mrep lacks: as stated, flagged
	}
	rf, l, ok, err := p.fastestFit(p.Chip.Efficiency)
	if err != nil || !ok {
		return err
	}
	stated := p.train.l
	tr := *p.train
	tr.l = l
	p.train, p.Stated, p.Setting, p.Fits = &tr, &stated, rf.Setting, true
	return nil
}

// AsStated is p predicted at the layout its source states (Stated), where that does not fit.
func (p Prepared) AsStated(eff chips.Efficiency) (float64, error) {
	if p.Stated == nil {
		return 0, nil
	}
	tr := *p.train
	tr.l = *p.Stated
	p.train = &tr
	pred, _, err := p.Predict(eff)
	return pred, err
}

// fastestFit tries layout.MemorySavers on a training row that does not fit as stated, and the
// layout of the release preset it cites (Row.Preset), and predicts, with eff, the fastest of
// those that fit (a published recipe is tuned for speed within its memory); ok is false when
// none fits.
func (p Prepared) fastestFit(eff chips.Efficiency) (Refit, layout.Layout, bool, error) {
	var bestL layout.Layout
	var best Refit
	found := false
	savers := layout.MemorySavers(p.train.l, p.train.m.Fingerprint)
	if pr := p.Row.Preset; pr != nil {
		savers = append(savers, layout.Saver{Name: "its release's preset " + pr.Name, Flags: pr.Flags(), Layout: pr.layout(p.Row, p.train.l)})
	}
	// the savers' steps are timed with the row's lane (Predict), not the trainer's own figures
	for _, v := range savers {
		if v.Layout.Validate(p.train.m.Fingerprint) != nil {
			continue
		}
		if !layout.CheckTraining("training", layout.TrainingMemory(p.train.m, v.Layout), p.Chip.MemoryBytes()).Fits {
			continue
		}
		q := p
		tr := *p.train
		tr.l = v.Layout
		q.train = &tr
		pred, _, err := q.Predict(eff)
		if err != nil {
			return Refit{}, bestL, false, err
		}
		better := pred > best.Predicted // a throughput
		if p.Row.TimeLike() {
			better = !found || pred < best.Predicted
		}
		if !found || better {
			best, bestL, found = Refit{Setting: v.Name + " (" + v.Flags + ")", Predicted: pred, Ratio: pred / p.Row.Measured}, v.Layout, true
		}
	}
	return best, bestL, found, nil
}

// Result is one row's prediction.
type Result struct {
	ID        string  `json:"id"`
	Phase     string  `json:"phase"`
	Measured  float64 `json:"measured"`
	Predicted float64 `json:"predicted"`
	Ratio     float64 `json:"ratio"` // predicted / measured
	Unit      string  `json:"unit"`
	Model     string  `json:"model"`
	Chip      string  `json:"chip"`
	// Roofline is the ideal roofline's value: a time-like prediction never below it, a
	// throughput never above it.
	Roofline          float64 `json:"roofline"`
	FasterThanPhysics bool    `json:"faster_than_physics,omitempty"`
	// Impossible: the measurement itself beats the ideal roofline (a time below it, a
	// throughput above it), so the row's tokens, GPUs, chip or figure is wrong, or mrep's
	// count is. Such a row is left out of every error and fit, and named.
	Impossible string `json:"impossible,omitempty"`
	// KnownIssue: the source says the run hit a defect of its stack (Row.KnownIssue); the
	// row is predicted but counted in no error.
	KnownIssue string `json:"known_issue,omitempty"`
	Fits       bool   `json:"fits"`
	// FitsWith, for a training row that does not fit in memory as stated, is the fastest
	// setting its framework offers that fits, under which the row is predicted (Predicted) and
	// fitted; AsStated is the prediction at the stated layout (nil, 0: it fits as stated, or
	// nothing fits and Fits is false).
	FitsWith *Refit  `json:"fits_with,omitempty"`
	AsStated float64 `json:"predicted_as_stated,omitempty"`
	// UnusedPreset names the release preset a row cites (Row.Preset) whose layout differs from
	// the one the row states and is predicted at, because that one fits: the source disagrees
	// with itself there, and the reader should see it.
	UnusedPreset string `json:"unused_preset,omitempty"`
	// Lacks is the row's named mechanism mrep does not model (Row.Lacks).
	Lacks   string `json:"lacks,omitempty"`
	Skipped string `json:"not_expressible,omitempty"`
}

// Err is the signed relative error, predicted / measured - 1.
func (r Result) Err() float64 { return r.Ratio - 1 }

// Summary is one phase's accuracy.
type Summary struct {
	Rows           int     `json:"rows"`
	MedianAbsErr   float64 `json:"median_abs_err"`
	WorstAbsErr    float64 `json:"worst_abs_err"`
	NotExpressible int     `json:"not_expressible"`
	Impossible     int     `json:"impossible,omitempty"`
	KnownIssue     int     `json:"known_issue,omitempty"`
}

// ErrImpossible: a row measures a run faster than the ideal roofline of its configuration.
var ErrImpossible = errors.New("measurement beats the roofline")

// CheckPossible is an error naming every row whose measurement beats its roofline (at most
// five, then a count), nil when there is none.
func (r Report) CheckPossible() error {
	var bad []string
	for _, res := range r.Rows {
		if res.Impossible != "" {
			bad = append(bad, fmt.Sprintf("row %s (%s on %s): %s", res.ID, res.Model, res.Chip, res.Impossible))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	n, more := len(bad), ""
	if n > 5 {
		more = fmt.Sprintf("; and %d more", len(bad)-5)
		bad = bad[:5]
	}
	what := "rows measure runs"
	if n == 1 {
		what = "row measures a run"
	}
	return fmt.Errorf("%d %s faster than physics allows: %s%s: %w", n, what, strings.Join(bad, "; "), more, ErrImpossible)
}

// impossible says why a row's measurement cannot have happened: it beats the ideal roofline
// of its own configuration (every FLOP at peak, every byte at full bandwidth, nothing else).
// A margin of 1e-6 keeps rounding in the published figure from tripping it.
func impossible(r Row, roof float64) string {
	if roof <= 0 || math.IsInf(roof, 0) || math.IsNaN(roof) {
		return ""
	}
	if r.Kind == KindTrainMemory && r.Measured < roof*(1-1e-6) {
		return fmt.Sprintf("measured %.4g GiB is below the parameter state alone, %.4g GiB (weights, gradients, master weights, optimizer): the row's layout, stack, fine-tune or figure is wrong", r.Measured, roof)
	}
	if r.TimeLike() && r.Measured < roof*(1-1e-6) {
		return fmt.Sprintf("measured %.4g %s is below the ideal roofline's %.4g %s (every FLOP at peak, every byte at full bandwidth): no run is that fast, so the row's tokens, GPUs, chip or figure is wrong", r.Measured, r.Unit, roof, r.Unit)
	}
	if !r.TimeLike() && r.Measured > roof*(1+1e-6) {
		return fmt.Sprintf("measured %.4g %s is above the ideal roofline's %.4g %s (every FLOP at peak, every byte at full bandwidth): no run is that fast, so the row's tokens, GPUs, chip or figure is wrong", r.Measured, r.Unit, roof, r.Unit)
	}
	return ""
}

// Report is a validation: every row, and per phase the median and worst |error|.
type Report struct {
	Rows    []Result           `json:"rows"`
	Summary map[string]Summary `json:"summary"`
	// Groups summarises the rows of each model, chip, layout and phase: a group's median ratio
	// is its bias (below 1: mrep predicts less than was measured), which a phase's median
	// absolute error hides.
	Groups []GroupSummary `json:"groups"`
	// Lanes summarises the training rows by lane: framework x dense/MoE x chip family.
	Lanes []GroupSummary `json:"lanes,omitempty"`
	// Sources summarises the training rows by source (SourceOf: a publisher's table, a
	// release), the unit leave-one-source-out holds out.
	Sources []GroupSummary `json:"sources,omitempty"`
	// Engines summarises the inference rows by serving engine, chip family and dense or MoE.
	Engines []GroupSummary `json:"engines,omitempty"`
	// EngineChips summarises them by serving engine and chip, per figure (throughput, TTFT,
	// TPOT): the lane a plan on that chip with that engine is timed with.
	EngineChips []GroupSummary `json:"engine_chips,omitempty"`
	// Releases summarises them by engine release as each row states it, against the release
	// its lane on the chip was fitted on: the drift between releases.
	Releases []GroupSummary `json:"releases,omitempty"`
	// LeaveOneSourceOut: each training source predicted by lanes fitted without it.
	LeaveOneSourceOut []SourceError `json:"leave_one_source_out,omitempty"`
	// LeaveOneSourceOutPending is how many training sources a leave-one-source-out check would
	// refit without (validate --loo), while it has not been run.
	LeaveOneSourceOutPending int `json:"leave_one_source_out_pending,omitempty"`
}

// GroupSummary is the error of one model on one chip at one layout in one phase.
type GroupSummary struct {
	Group        string  `json:"group"`
	Phase        string  `json:"phase"`
	Rows         int     `json:"rows"`
	MedianRatio  float64 `json:"median_ratio"`
	MedianAbsErr float64 `json:"median_abs_err"`
	WorstAbsErr  float64 `json:"worst_abs_err"`
}

// group names a row's model, chip and layout.
func (r Row) group(chip string) string {
	g := fmt.Sprintf("%s on %s, TP%d", r.Model, chip, max(r.TP, 1))
	if r.PP > 1 {
		g += fmt.Sprintf(" PP%d", r.PP)
	}
	if r.CP > 1 {
		g += fmt.Sprintf(" CP%d", r.CP)
	}
	if r.EP > 1 {
		g += fmt.Sprintf(" EP%d", r.EP)
	}
	if r.GPUs > max(r.TP, 1)*max(r.PP, 1) {
		g += fmt.Sprintf(", %d GPUs", r.GPUs)
	}
	return g
}

// gkey is a summary group: its name and phase.
type gkey struct{ group, phase string }

// grouper collects the results of groups in the order they first appear.
type grouper struct {
	order  []gkey
	ratios map[gkey][]float64
	errs   map[gkey][]float64
}

func newGrouper() *grouper {
	return &grouper{ratios: map[gkey][]float64{}, errs: map[gkey][]float64{}}
}

func (g *grouper) add(k gkey, res Result) {
	if g.ratios[k] == nil {
		g.order = append(g.order, k)
	}
	g.ratios[k] = append(g.ratios[k], res.Ratio)
	g.errs[k] = append(g.errs[k], math.Abs(res.Err()))
}

// summaries are the groups sorted by name, then phase.
func (g *grouper) summaries() []GroupSummary {
	keys := append([]gkey(nil), g.order...)
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].group != keys[j].group {
			return keys[i].group < keys[j].group
		}
		return keys[i].phase < keys[j].phase
	})
	return g.summarise(keys)
}

// inOrder are the groups in the order their first rows came.
func (g *grouper) inOrder() []GroupSummary { return g.summarise(g.order) }

func (g *grouper) summarise(keys []gkey) []GroupSummary {
	var out []GroupSummary
	for _, k := range keys {
		rs, es := append([]float64(nil), g.ratios[k]...), append([]float64(nil), g.errs[k]...)
		sort.Float64s(rs)
		sort.Float64s(es)
		out = append(out, GroupSummary{Group: k.group, Phase: k.phase, Rows: len(rs), MedianRatio: median(rs), MedianAbsErr: median(es), WorstAbsErr: es[len(es)-1]})
	}
	return out
}

// releaseGroup names a row's engine release beside the one its lane on the chip was fitted on.
func releaseGroup(engine string, r Row, chip chips.Chip) string {
	rel := strings.TrimSpace(r.EngineVersion)
	if rel == "" {
		rel = "release not stated"
	}
	lane := "no lane on " + chip.Name
	if l, ok := chip.Efficiency.Lanes[engine]; ok {
		lane = "lane on " + chip.Name + " fitted on " + l.Release
		if l.Release == "" {
			lane = "lane on " + chip.Name + ", release not recorded"
		}
	}
	return fmt.Sprintf("%s %s (%s)", engine, rel, lane)
}

// Validate predicts every row with each chip's own efficiency (or the override for a chip
// name, as a fit produces).
func Validate(ps []Prepared, override map[string]chips.Efficiency) (Report, error) {
	rep := Report{Summary: map[string]Summary{}}
	errs := map[string][]float64{}
	groups := newGrouper() // by model, chip and layout, per phase
	var lanes []string
	lratio, lerr := map[string][]float64{}, map[string][]float64{}
	isTrain := map[string]bool{}
	sratio, serr := map[string][]float64{}, map[string][]float64{}
	var sources []string
	inf := newGrouper() // inference rows by engine x chip and by release
	rel := newGrouper()
	for _, p := range ps {
		r := p.Row
		res := Result{ID: r.ID, Phase: r.Phase(), Measured: r.Measured, Unit: r.Unit, Model: r.Model, Chip: p.Chip.Name, Fits: p.Fits, Lacks: r.Lacks}
		if p.Skip != nil {
			res.Skipped = p.Skip.Error()
			sum := rep.Summary[res.Phase]
			sum.NotExpressible++
			rep.Summary[res.Phase] = sum
			rep.Rows = append(rep.Rows, res)
			continue
		}
		eff := p.Chip.Efficiency
		if o, ok := override[p.Chip.Name]; ok {
			eff = o
		}
		pred, roof, err := p.Predict(eff)
		if err != nil {
			return rep, fmt.Errorf("row %s: %w", r.ID, err)
		}
		res.Predicted, res.Roofline, res.Ratio = pred, roof, pred/r.Measured
		if p.Stated != nil {
			stated, err := p.AsStated(eff)
			if err != nil {
				return rep, fmt.Errorf("row %s: %w", r.ID, err)
			}
			res.FitsWith = &Refit{Setting: p.Setting, Predicted: pred, Ratio: pred / r.Measured}
			res.AsStated = stated
		}
		if pr := r.Preset; pr != nil && p.Stated == nil && p.train != nil {
			res.UnusedPreset = pr.Name + " (" + pr.Flags() + "; " + pr.Source + ")"
		}
		if r.TimeLike() {
			res.FasterThanPhysics = pred < roof*(1-1e-9)
		} else {
			res.FasterThanPhysics = pred > roof*(1+1e-9)
		}
		if why := impossible(r, roof); why != "" {
			res.Impossible = why
			sum := rep.Summary[res.Phase]
			sum.Impossible++
			rep.Summary[res.Phase] = sum
			rep.Rows = append(rep.Rows, res)
			continue
		}
		if r.KnownIssue != "" {
			res.KnownIssue = r.KnownIssue
			sum := rep.Summary[res.Phase]
			sum.KnownIssue++
			rep.Summary[res.Phase] = sum
			rep.Rows = append(rep.Rows, res)
			continue
		}
		errs[res.Phase] = append(errs[res.Phase], math.Abs(res.Err()))
		groups.add(gkey{r.group(p.Chip.Name), res.Phase}, res)
		ln := EngineName(p)
		if p.train != nil {
			ln = LaneName(p)
		}
		if lratio[ln] == nil {
			lanes = append(lanes, ln)
		}
		lratio[ln] = append(lratio[ln], res.Ratio)
		lerr[ln] = append(lerr[ln], math.Abs(res.Err()))
		isTrain[ln] = p.train != nil
		if p.train == nil {
			eng := engineOf(r, p.Chip)
			inf.add(gkey{eng + " on " + p.Chip.Name, res.Phase}, res)
			rel.add(gkey{releaseGroup(eng, r, p.Chip), res.Phase}, res)
		}
		if p.train != nil {
			src := SourceOf(r)
			if serr[src] == nil {
				sources = append(sources, src)
			}
			serr[src] = append(serr[src], math.Abs(res.Err()))
			sratio[src] = append(sratio[src], res.Ratio)
		}
		rep.Rows = append(rep.Rows, res)
	}
	sort.Strings(sources)
	for _, src := range sources {
		rs, es := sratio[src], serr[src]
		sort.Float64s(rs)
		sort.Float64s(es)
		rep.Sources = append(rep.Sources, GroupSummary{Group: src, Phase: "training", Rows: len(rs), MedianRatio: median(rs),
			MedianAbsErr: median(es), WorstAbsErr: es[len(es)-1]})
	}
	sort.Strings(lanes)
	for _, ln := range lanes {
		rs, es := lratio[ln], lerr[ln]
		sort.Float64s(rs)
		sort.Float64s(es)
		g := GroupSummary{Group: ln, Phase: "training", Rows: len(rs), MedianRatio: median(rs),
			MedianAbsErr: median(es), WorstAbsErr: es[len(es)-1]}
		if isTrain[ln] {
			rep.Lanes = append(rep.Lanes, g)
		} else {
			g.Phase = "inference"
			rep.Engines = append(rep.Engines, g)
		}
	}
	rep.Groups, rep.EngineChips, rep.Releases = groups.inOrder(), inf.summaries(), rel.summaries()
	for ph, es := range errs {
		sort.Float64s(es)
		sum := rep.Summary[ph]
		sum.Rows, sum.MedianAbsErr, sum.WorstAbsErr = len(es), median(es), es[len(es)-1]
		rep.Summary[ph] = sum
	}
	return rep, nil
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Phases lists a report's phases in a stable order.
func (r Report) Phases() []string {
	var out []string
	for ph := range r.Summary {
		out = append(out, ph)
	}
	sort.Strings(out)
	return out
}

// One benchmark run gives several rows (TTFT, TPOT, end to end and throughput, each at several
// statistics) that one simulation answers: simulated runs it once per run and efficiency, so a
// fit over a user's results (calibrate --from-history) simulates each run once per evaluation.
var simCache = struct {
	sync.Mutex
	m map[string]serve.SimResult
}{m: map[string]serve.SimResult{}}

// maxSimCache bounds the cache (a fit's evaluations each bring new efficiencies).
const maxSimCache = 4096

func simulated(rp serve.Replica, load serve.Load, r Row, eff chips.Efficiency) (serve.SimResult, error) {
	run := r
	run.ID, run.Metric, run.Stat, run.Measured, run.Unit, run.Note, run.Source = "", "", "", 0, "", "", ""
	kb, err := json.Marshal(struct {
		Run Row
		Eff chips.Efficiency
	}{run, eff})
	if err != nil {
		return rp.Simulate(load)
	}
	key := string(kb)
	simCache.Lock()
	res, ok := simCache.m[key]
	simCache.Unlock()
	if ok {
		return res, nil
	}
	res, err = rp.Simulate(load)
	if err != nil {
		return res, err
	}
	simCache.Lock()
	if len(simCache.m) >= maxSimCache {
		clear(simCache.m)
	}
	simCache.m[key] = res
	simCache.Unlock()
	return res, nil
}
