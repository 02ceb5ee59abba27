package serve

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/mrep-dev/mrep/timing"
)

func fp8() analyzer.Scenario {
	s := analyzer.DefaultScenario()
	s.WeightBytes, s.ActBytes, s.KVBytes, s.ComputeDType = 1, 1, 1, "fp8"
	return s
}

// target is a chip timed at FP8, the tests' usual scenario (fp8()).
func target(t testing.TB, name string) Target { return targetAt(t, name, "fp8") }

// targetAt is a chip with the time model for dtype, as the command builds it.
func targetAt(t testing.TB, name, dtype string) Target {
	t.Helper()
	db := chips.Default()
	c, err := db.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	pred, err := timing.New(c, dtype)
	if err != nil {
		t.Fatal(err)
	}
	return Target{Chip: c, Pred: pred, PriceUSDPerGPUHour: c.PriceUSDPerGPUHour, Power: db.PowerOf(c), MaxTP: 8}
}

func replica(t *testing.T, m *analyzer.Model, chip string, tp int64) Replica {
	t.Helper()
	tg := target(t, chip)
	s := fp8()
	s.TP = tp
	return Replica{Model: m, Scenario: s, Pred: tg.Pred, MemBytes: tg.Chip.MemoryBytes(), Engine: DefaultEngine()}
}

// Static mode is one prefill of the batch plus OSL-1 decode steps, each at its own KV length:
// summed here step by step from the counted steps and compared.
func TestStaticIsPrefillPlusDecodeSteps(t *testing.T) {
	m := model(t, "Llama-2-7b")
	rp := replica(t, m, "H100", 1)
	const b, isl, osl = 8, 128, 17
	got, err := Static(m, rp.Scenario, rp.Pred, b, isl, osl)
	if err != nil {
		t.Fatal(err)
	}
	sp := rp.Scenario
	sp.Batch, sp.Seq = b, isl
	pre, err := m.AnalyzeTotals(analyzer.Prefill, sp, analyzer.Achievable)
	if err != nil {
		t.Fatal(err)
	}
	want := rp.Pred.Predict(pre.Kernels).TEst
	for j := int64(0); j < osl-1; j++ {
		sd := rp.Scenario
		sd.Batch, sd.KVLen = b, isl+1+j
		dec, err := m.AnalyzeTotals(analyzer.Decode, sd, analyzer.Achievable)
		if err != nil {
			t.Fatal(err)
		}
		want += rp.Pred.Predict(dec.Kernels).TEst
	}
	testutil.Near(t, "static total", got.Total, want, 1e-12)
	testutil.Near(t, "static tokens/s", got.OutputTokS, b*osl/want, 1e-12)
	// a long output is timed in runs of steps: within 0.5% of every step timed
	long, err := Static(m, rp.Scenario, rp.Pred, b, isl, 300)
	if err != nil {
		t.Fatal(err)
	}
	exact := long.Prefill
	for j := int64(0); j < 299; j++ {
		sd := rp.Scenario
		sd.Batch, sd.KVLen = b, isl+1+j
		dec, _ := m.AnalyzeTotals(analyzer.Decode, sd, analyzer.Achievable)
		exact += rp.Pred.Predict(dec.Kernels).TEst
	}
	testutil.Near(t, "segmented static total", long.Total, exact, 5e-3)
}

// Little's law holds in both load modes: in-flight sequences = request rate x time in the
// system (queue included).
func TestLoadModesObeyLittle(t *testing.T) {
	m := model(t, "Llama-3.1-8B")
	rp := replica(t, m, "H100", 1)
	r, err := rp.Rate(2000, 500, 2)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "rate: D = lambda x E2E", r.Concurrency, 2*r.E2E, 2e-3)
	if r.Bound != "load" {
		t.Errorf("a light load binds %s, want load", r.Bound)
	}
	// more users than the KV cache holds: the rest queue, and users = completion rate x E2E
	_, limit, _ := Capacity(m, rp.Scenario, rp.MemBytes, 2000, 500, rp.Engine)
	users := 3 * limit
	u, err := rp.Users(2000, 500, users)
	if err != nil {
		t.Fatal(err)
	}
	if u.QueueWait <= 0 || u.Concurrency != limit {
		t.Errorf("users beyond capacity: queue %g s, concurrency %g (limit %g)", u.QueueWait, u.Concurrency, limit)
	}
	testutil.Near(t, "users: N = X x E2E", users, u.Concurrency/(u.E2E-u.QueueWait)*u.E2E, 1e-9)
	if _, err := rp.Rate(2000, 500, 1e6); !errors.Is(err, ErrOverloaded) {
		t.Errorf("a million requests/s on one GPU: %v, want overloaded", err)
	}
}

// A tighter TPOT never buys more tokens/s per GPU, and every answer meets its SLO.
func TestPlanTPOTMonotone(t *testing.T) {
	m := model(t, "Llama-3.1-70B-Instruct")
	prev := math.Inf(1)
	for _, tpot := range []float64{0, 0.1, 0.05, 0.03, 0.02} {
		pl, err := PlanServe(m, []Target{target(t, "H100")}, PlanOptions{ISL: 2000, OSL: 500, TPOT: tpot, GPUs: 8, Scenario: fp8()})
		if err != nil {
			t.Fatal(err)
		}
		if len(pl.Best) == 0 {
			t.Fatalf("TPOT %g: nothing meets it: %s", tpot, pl.NoConfig)
		}
		best := pl.Best[0]
		if tpot > 0 && best.Result.TPOT > tpot {
			t.Errorf("TPOT %g: the answer's TPOT is %g", tpot, best.Result.TPOT)
		}
		if best.TokSPerGPU > prev*(1+1e-9) {
			t.Errorf("TPOT %g: %g tok/s/GPU, more than the looser SLO's %g", tpot, best.TokSPerGPU, prev)
		}
		prev = best.TokSPerGPU
		if best.GPUs != 8 {
			t.Errorf("--gpus 8 answered with %d GPUs", best.GPUs)
		}
	}
}

// Sizing for users: the answer carries every user at the SLO on the fewest GPUs, and one GPU
// fewer of that layout would not (the binary search's edge).
func TestPlanUsersFewestGPUs(t *testing.T) {
	m := model(t, "Llama-3.1-70B-Instruct")
	o := PlanOptions{ISL: 2000, OSL: 500, Users: 100, TPOT: 0.05, Scenario: fp8()}
	pl, err := PlanServe(m, []Target{target(t, "H100")}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Best) == 0 {
		t.Fatal(pl.NoConfig)
	}
	b := pl.Best[0]
	if b.Result.TPOT > 0.05 || b.Result.Concurrency*float64(b.Replicas) < 100 || b.Result.QueueWait != 0 {
		t.Errorf("answer %+v does not carry 100 users under 50 ms", b)
	}
	if b.Replicas > 1 {
		rp := replica(t, m, "H100", b.TP)
		fewer, err := rp.Users(2000, 500, 100/float64(b.Replicas-1))
		if err == nil && fewer.TPOT <= 0.05 && fewer.QueueWait == 0 {
			t.Errorf("%d replicas of TP%d would do too: TPOT %g", b.Replicas-1, b.TP, fewer.TPOT)
		}
	}
	for _, c := range pl.Best[1:] {
		if c.GPUs < b.GPUs {
			t.Errorf("%d GPUs ranked below %d", c.GPUs, b.GPUs)
		}
	}
	// cost is price x GPUs / tokens: by hand
	want := 3.0 * float64(b.GPUs) / 3600 / b.TokS * 1e6
	testutil.Near(t, "$/1M tokens", b.USDPerMTok, want, 1e-12)
}

// An SLO no layout meets names the binding limit and the relaxation that works.
func TestPlanSaysWhyNothingMeets(t *testing.T) {
	m := model(t, "Llama-3.1-70B-Instruct")
	pl, err := PlanServe(m, []Target{target(t, "H100")}, PlanOptions{ISL: 2000, OSL: 500, TPOT: 0.002, Scenario: fp8()})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Meeting != 0 || !strings.Contains(pl.NoConfig, "TPOT >=") || !strings.Contains(pl.NoConfig, "streaming the weights") {
		t.Fatalf("no config: %q", pl.NoConfig)
	}
	// the relaxation it names works
	ms, err := relaxedTPOT(pl.NoConfig)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := PlanServe(m, []Target{target(t, "H100")}, PlanOptions{ISL: 2000, OSL: 500, TPOT: ms / 1e3, Scenario: fp8()})
	if err != nil || ok.Meeting == 0 {
		t.Errorf("relaxing to %g ms: %v %s", ms, err, ok.NoConfig)
	}
	for _, bad := range []PlanOptions{{ISL: 0, OSL: 1}, {ISL: 1, OSL: 1, Rate: -1}, {ISL: 1, OSL: 1, Users: 1, Rate: 1}, {ISL: 1, OSL: 1, TPOT: -1}} {
		if _, err := PlanServe(m, []Target{target(t, "H100")}, bad); !errors.Is(err, ErrBadWorkload) {
			t.Errorf("%+v: %v, want a bad-workload error", bad, err)
		}
	}
	// the caller times the kernels: a target without a predictor is refused, naming the chip
	bare := target(t, "H100")
	bare.Pred = nil
	if _, err := PlanServe(m, []Target{bare}, PlanOptions{ISL: 2000, OSL: 500, Scenario: fp8()}); !errors.Is(err, ErrNoPredictor) || !strings.Contains(err.Error(), "H100-SXM") {
		t.Errorf("no predictor: %v", err)
	}
}

// relaxedTPOT reads the "relax --tpot to N ms" figure from the explanation.
func relaxedTPOT(s string) (float64, error) {
	const mark = "relax --tpot to "
	i := strings.Index(s, mark)
	if i < 0 {
		return 0, errors.New("no relaxation named in " + s)
	}
	var ms float64
	_, err := fmt.Sscan(strings.Fields(s[i+len(mark):])[0], &ms)
	return ms, err
}

// BenchmarkPlanServe is the speed target: every layout, batch cap and replica count
// on three chips, for a load with an SLO (Llama-3.1-70B) and offline with bisection of the
// largest batch under the SLO (DeepSeek-V3, MoE: TP and EP layouts).
func BenchmarkPlanServe(b *testing.B) {
	for _, c := range []struct {
		name, model string
		o           PlanOptions
	}{
		{"70B-users", "Llama-3.1-70B-Instruct", PlanOptions{ISL: 2000, OSL: 500, Users: 100, TPOT: 0.05}},
		{"70B-users-disagg", "Llama-3.1-70B-Instruct", PlanOptions{ISL: 2000, OSL: 500, Users: 100, TPOT: 0.05, TTFT: 1, Disagg: true}},
		{"DeepSeek-V3-offline", "DeepSeek-V3", PlanOptions{ISL: 2000, OSL: 500, TPOT: 0.05, GPUs: 8}},
		{"DeepSeek-V3-offline-disagg", "DeepSeek-V3", PlanOptions{ISL: 2000, OSL: 500, TPOT: 0.05, GPUs: 16, Disagg: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := model(b, c.model)
			ts := []Target{target(b, "H100"), target(b, "H200"), target(b, "B200")}
			c.o.Scenario = fp8()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := PlanServe(m, ts, c.o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// DeepSeek-style serving: with attention data-parallel beside EP8, each GPU keeps only its own
// sequences' MLA latents (under TP8 every rank holds every latent), so the node holds several
// times the sequences, and offline throughput per GPU rises; the replica is 8 GPUs.
func TestAttentionDataParallel(t *testing.T) {
	m := model(t, "DeepSeek-V3")
	tg := target(t, "H200")
	mk := func(tp, ep, etp int64) Replica {
		s := fp8()
		s.TP, s.EP, s.ETP = tp, ep, etp
		return Replica{Model: m, Scenario: s, Pred: tg.Pred, MemBytes: tg.Chip.MemoryBytes(), Engine: DefaultEngine()}
	}
	tp8, dp8 := mk(8, 1, 8), mk(1, 8, 1)
	if a, b := m.KVBytesPerToken(tp8.Scenario), m.KVBytesPerToken(dp8.Scenario); a != b || a != 61*576 {
		t.Fatalf("KV bytes per token per GPU: TP8 %g, DP8 %g; want 35,136 both", a, b)
	}
	if kt, kd := tp8.Limit(2000, 500), dp8.Limit(2000, 500); kd < 5*kt {
		t.Errorf("DP8 holds %g sequences, TP8 %g: want several times more", kd, kt)
	}
	rt, err := tp8.At(2000, 500, math.Inf(1))
	if err != nil {
		t.Fatal(err)
	}
	rd, err := dp8.At(2000, 500, math.Inf(1))
	if err != nil {
		t.Fatal(err)
	}
	if rd.GPUs != 8 || rd.OutputTokS/8 <= rt.OutputTokS/8 {
		t.Errorf("DP8 EP8: %d GPUs, %g tok/s; TP8: %g tok/s", rd.GPUs, rd.OutputTokS, rt.OutputTokS)
	}
	// the replica is DP copies of one attention group's steady state
	one, _ := At(m, dp8.Scenario, tg.Pred, dp8.MemBytes, 2000, 500, dp8.Engine, math.Inf(1))
	testutil.Near(t, "DP scaling", rd.OutputTokS, 8*one.OutputTokS, 1e-12)
}

// Speculative decoding: the expected tokens per step follow (1-a^(k+1))/(1-a); with drafts
// the TPOT falls by about that factor at a small batch (weight streaming dominates, the
// verified rows are nearly free), never below the plain step over k+1, and costs show up as a
// longer step.
func TestSpeculativeDecoding(t *testing.T) {
	for _, c := range []struct {
		k    int
		a, w float64
	}{{0, 0.7, 1}, {3, 0, 1}, {3, 1, 4}, {3, 0.7, (1 - math.Pow(0.7, 4)) / 0.3}, {1, 0.5, 1.5}} {
		if got := (Engine{SpecTokens: c.k, SpecAccept: c.a}).SpecTokensPerStep(); math.Abs(got-c.w) > 1e-12 {
			t.Errorf("k=%d a=%g: %g tokens per step, want %g", c.k, c.a, got, c.w)
		}
	}
	r := replica(t, model(t, "Llama-3.1-8B"), "H100", 1)
	m, s, p, mem := r.Model, r.Scenario, r.Pred, r.MemBytes
	e := DefaultEngine()
	plain, err := At(m, s, p, mem, 2000, 500, e, 8)
	if err != nil {
		t.Fatal(err)
	}
	e.SpecTokens, e.SpecAccept, e.SpecDraftCost = 3, 0.7, 1.0/32
	spec, err := At(m, s, p, mem, 2000, 500, e, 8)
	if err != nil {
		t.Fatal(err)
	}
	tau := e.SpecTokensPerStep()
	if !(spec.StepTime > plain.StepTime) {
		t.Errorf("a verifying step (%g s) must cost more than a plain one (%g s)", spec.StepTime, plain.StepTime)
	}
	if !(spec.TPOT < plain.TPOT/1.8 && spec.TPOT > plain.TPOT/tau) {
		t.Errorf("TPOT %g ms with drafts against %g ms plain: want a gain below the %0.2f tokens per step", 1e3*spec.TPOT, 1e3*plain.TPOT, tau)
	}
	if !(spec.OutputTokS > 1.8*plain.OutputTokS) {
		t.Errorf("output %g tok/s with drafts against %g plain", spec.OutputTokS, plain.OutputTokS)
	}
}

// A mixed workload's quantile prompts: the TTFT grows with the prompt, and the mean prompt's
// equals the table's TTFT (the same steady state re-timed).
func TestTTFTQuantiles(t *testing.T) {
	m := model(t, "Llama-3.1-8B")
	o := PlanOptions{ISL: 1850, OSL: 290, Users: 16, Scenario: fp8(), Top: 2,
		Prompts: []int64{500, 1850, 8000}, PromptQuantiles: []float64{0.5, 0.75, 0.99}}
	pl, err := PlanServe(m, []Target{target(t, "H100")}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Best) == 0 {
		t.Fatal(pl.NoConfig)
	}
	for _, c := range pl.Best {
		q := c.TTFTQuantiles
		if len(q) != 3 || !(q[0].TTFT < q[1].TTFT && q[1].TTFT < q[2].TTFT) {
			t.Fatalf("TTFT by prompt length: %+v", q)
		}
		testutil.Near(t, "the mean prompt's TTFT", q[1].TTFT, c.Result.TTFT, 1e-9)
	}
}

// The planner states every option's range once; its error names the option as the command
// line spells it (the command prefixes "--") and is a bad workload.
func TestOptionErrorsNameTheOption(t *testing.T) {
	ok := PlanOptions{ISL: 100, OSL: 10, Engine: DefaultEngine()}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		edit func(*PlanOptions)
		want string
	}{
		{func(o *PlanOptions) { o.ISL = 0 }, "isl 0: must be at least 1"},
		{func(o *PlanOptions) { o.OSL = -5 }, "osl -5: must be at least 1"},
		{func(o *PlanOptions) { o.Users, o.Rate = 5, 1 }, "not both"},
		{func(o *PlanOptions) { o.Rate = math.Inf(1) }, "rate +Inf"},
		{func(o *PlanOptions) { o.MaxGPUs = -1 }, "max-gpus -1"},
		{func(o *PlanOptions) { o.Engine.KVFraction = 1.5 }, "kv-fraction 1.5: must be in [0.05, 1]"},
		{func(o *PlanOptions) { o.Engine.KVFraction = 1e-9 }, "kv-fraction 1e-09: must be in [0.05, 1]"},
		{func(o *PlanOptions) { o.Users = 1e-9 }, "users 1e-09: want 1 to 1e+07 concurrent users"},
		{func(o *PlanOptions) { o.Users = 1e300 }, "users 1e+300: want 1 to 1e+07"},
		{func(o *PlanOptions) { o.Rate = 1e12 }, "rate 1e+12: want at most 1e+06 requests/s"},
		{func(o *PlanOptions) { o.GPUs, o.MaxGPUs = 8, 4 }, "gpus 8: more than --max-gpus 4: give one of them"},
		{func(o *PlanOptions) { o.Top = -1 }, "top -1: want 0 (the default) or more"},
		{func(o *PlanOptions) { o.Engine.TokenBudget = math.NaN() }, "token-budget NaN"},
		{func(o *PlanOptions) { o.Engine.KVBlock = -16 }, "kv-block -16"},
		{func(o *PlanOptions) { o.Engine.PrefixHit = 1 }, "prefix-hit 1"},
		{func(o *PlanOptions) { o.Engine.SpecTokens = 17 }, "spec-tokens 17"},
		{func(o *PlanOptions) { o.SLOQuantile = "p95" }, `slo-quantile "p95": want one of mean, p50, p90, p99`},
	} {
		o := ok
		c.edit(&o)
		err := o.Validate()
		var oe *OptionError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &oe) || !errors.Is(err, ErrBadWorkload) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
}

// Costs of either kind on the reported deployments, for a 2000/500 workload: input x its price
// plus output x its price is the whole spend (blended x all tokens, all-in x output tokens); an
// aggregated deployment's input share is its prompts' marginal share of a step, strictly
// between 0 and 1; a disaggregated one's is its prefill pool's share of the GPUs.
func TestCostPerTokenOfEitherKind(t *testing.T) {
	var all []Config
	for _, name := range []string{"Llama-3.1-70B-Instruct", "Mixtral-8x7B-v0.1"} { // dense; MoE with the attention data-parallel
		pl, err := PlanServe(model(t, name), []Target{targetAt(t, "H200", "fp8")}, PlanOptions{ISL: 2000, OSL: 500, Scenario: fp8(), Disagg: true, Top: 40})
		if err != nil {
			t.Fatal(err)
		}
		all = append(append(all, pl.Best...), pl.Pareto...)
	}
	var agg, dis bool
	for _, c := range all {
		p := c.PerToken
		in, out := c.TokS*2000/500, c.TokS
		spend := c.USDPerMTok * out
		testutil.Near(t, "input + output spend", p.InputUSDPerM*in+p.OutputUSDPerM*out, spend, 1e-9)
		testutil.Near(t, "blended spend", p.BlendedUSDPerM*(in+out), spend, 1e-9)
		testutil.Near(t, "input + output energy", p.InputJ*in+p.OutputJ*out, c.JPerTok*out, 1e-9)
		if d := c.Disagg; d != nil {
			dis = true
			testutil.Near(t, "prefill pool's share of the spend", p.PrefillShareUSD, float64(d.PrefillGPUs)/float64(c.GPUs), 1e-12)
		} else {
			agg = true
			if !(p.PrefillShareUSD > 0 && p.PrefillShareUSD < 1) {
				t.Errorf("%s: prefill share %g", c.Layout(), p.PrefillShareUSD)
			}
		}
	}
	if !agg || !dis {
		t.Errorf("aggregated %v, disaggregated %v among the reported deployments", agg, dis)
	}
}

// Expert tensor parallelism in serving: a TP8 x EP4 replica splits each expert 2-way by tensor
// and 4-way by expert, so every GPU holds the same expert weights as TP8 x EP8 (8-way either
// way), and the planner searches such layouts for MoE models.
func TestServingExpertTensorParallel(t *testing.T) {
	m := model(t, "DeepSeek-V3")
	if InferenceETP(8, 4) != 2 || InferenceETP(8, 8) != 1 || InferenceETP(1, 8) != 1 || InferenceETP(8, 1) != 8 {
		t.Fatalf("InferenceETP: %d %d %d %d", InferenceETP(8, 4), InferenceETP(8, 8), InferenceETP(1, 8), InferenceETP(8, 1))
	}
	testutil.Near(t, "TP8 EP4 x ETP2 against TP8 EP8 weights per GPU", m.ParamsPerGPU(8, 1, 4, 2), m.ParamsPerGPU(8, 1, 8, 1), 1e-12)
	found := false
	for _, l := range layouts(m, 8) {
		found = found || l.tp == 8 && l.ep == 4
	}
	if !found {
		t.Error("plan serve does not search TP8 x EP4")
	}
	if got := LayoutName(8, 4, 1); got != "TP8 EP4 x ETP2" {
		t.Errorf("layout name %q", got)
	}
}

// Wide expert parallelism: a MoE model's layouts span two, four and eight scale-up domains with
// attention data-parallel on every GPU (DeepSeek-V3's 256 experts: EP16, EP32, EP64 on 8-GPU
// nodes; Mixtral's 8 experts: none), a dense model's none; the EP64 replica's all-to-all leaves
// the node, so a decode token of it costs more network time than EP8's inside it.
func TestWideExpertParallel(t *testing.T) {
	wide := func(m *analyzer.Model) []int64 {
		var eps []int64
		for _, l := range layouts(m, 8) {
			if l.ep > 8 {
				if l.tp != 1 || l.pp != 1 {
					t.Errorf("wide EP%d with TP%d PP%d", l.ep, l.tp, l.pp)
				}
				eps = append(eps, l.ep)
			}
		}
		return eps
	}
	if got := wide(model(t, "DeepSeek-V3")); len(got) != 3 || got[0] != 16 || got[2] != 64 {
		t.Errorf("DeepSeek-V3's wide EP layouts %v, want 16, 32, 64", got)
	}
	for _, name := range []string{"Llama-3.1-70B-Instruct", "Mixtral-8x7B-v0.1"} {
		if got := wide(model(t, name)); len(got) != 0 {
			t.Errorf("%s: wide EP layouts %v, want none", name, got)
		}
	}
	m := model(t, "DeepSeek-V3")
	net := func(ep int64) float64 {
		r := replica(t, m, "H100", 1)
		r.Scenario.EP, r.Scenario.Batch, r.Scenario.KVLen = ep, 64, 2048
		st, err := m.Analyze(analyzer.Decode, r.Scenario, analyzer.Achievable)
		if err != nil {
			t.Fatal(err)
		}
		return r.Pred.Predict(st.Kernels).TComm
	}
	if in, out := net(8), net(64); !(out > in) {
		t.Errorf("EP64's all-to-all %.3g s a step, EP8's %.3g s: want the cross-node one slower", out, in)
	}
}

// A workload beyond the model's context is refused with the limit named (gemma-2-9b:
// max_position_embeddings 8192): at the limit it plans, one token over it does not, and a
// workload's longest prompt counts as much as the mean.
func TestPlanRefusesBeyondContext(t *testing.T) {
	m := model(t, "gemma-2-9b")
	if m.Fingerprint.MaxPositions != 8192 {
		t.Fatalf("gemma-2-9b's context %d, want 8192", m.Fingerprint.MaxPositions)
	}
	tg := []Target{target(t, "H100")}
	if _, err := PlanServe(m, tg, PlanOptions{ISL: 8064, OSL: 128, Users: 2, Scenario: fp8()}); err != nil {
		t.Fatalf("8064 + 128 = 8192 tokens fit the context: %v", err)
	}
	for _, o := range []PlanOptions{{ISL: 8065, OSL: 128, Users: 2}, {ISL: 1000, OSL: 128, Users: 2, Prompts: []int64{1000, 16384}}} {
		o.Scenario = fp8()
		_, err := PlanServe(m, tg, o)
		if err == nil || !strings.Contains(err.Error(), "context of 8192 tokens") {
			t.Errorf("ISL %d, prompts %v: %v, want the context named", o.ISL, o.Prompts, err)
		}
	}
}

// vLLM has no expert-parallel size of its own (experts over the whole TP group, or over all
// TP x DP ranks): a vLLM plan never recommends EP groups inside TP; SGLang's does.
func TestVLLMPlansOnlyItsOwnExpertLayouts(t *testing.T) {
	m := model(t, "Qwen3-30B-A3B")
	for _, name := range []string{"vllm", "sglang"} {
		e, err := EnginePreset(name, 80)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := PlanServe(m, []Target{target(t, "H100")}, PlanOptions{ISL: 1000, OSL: 200, Users: 20, Top: 100, Engine: e, Scenario: fp8()})
		if err != nil {
			t.Fatal(err)
		}
		inner := 0
		for _, c := range pl.Best {
			if c.EP > 1 && c.EP < c.TP {
				inner++
			}
		}
		if name == "vllm" && inner > 0 || name == "sglang" && inner == 0 {
			t.Errorf("%s: %d of %d deployments with EP groups inside TP", name, inner, len(pl.Best))
		}
	}
}

// Each recommended deployment says what one GPU holds: weights, the KV pool, the reserve and
// the headroom add up to the capacity; the planned sequences fill part of the pool; the
// weights are the model's share (FP8 DeepSeek-V3 over TP8 x PP2: 671B bytes / 16 by hand).
func TestPlanServeMemoryPerGPU(t *testing.T) {
	m := model(t, "DeepSeek-V3")
	pl, err := PlanServe(m, []Target{target(t, "H100")}, PlanOptions{ISL: 2000, OSL: 500, Users: 10, Scenario: fp8()})
	if err != nil || len(pl.Best) == 0 {
		t.Fatalf("%v %s", err, pl.NoConfig)
	}
	for _, c := range pl.Best {
		mem := c.Memory
		if c.Disagg != nil {
			continue
		}
		if mem == nil {
			t.Fatalf("%s: no memory", c.Layout())
		}
		sum := mem.Weights + mem.KVPool + mem.Reserve + mem.Headroom
		if math.Abs(sum-mem.Capacity) > 1 || !(mem.KVInUse > 0 && mem.KVInUse <= mem.KVPool) || mem.Weights <= 0 {
			t.Errorf("%s: %+v (sum %g)", c.Layout(), *mem, sum)
		}
		if c.EP <= 1 && c.TP*c.PP == 16 { // TP x PP splits every weight (attention-DP replicates some)
			want := float64(m.TotalParams) / 16 // one byte per FP8 weight, spread evenly
			if r := mem.Weights / want; r < 0.97 || r > 1.1 {
				t.Errorf("%s: weights %g bytes per GPU, by hand %g", c.Layout(), mem.Weights, want)
			}
		}
	}
}

// The steady state has no burst: 200 users starting together queue for prefill, and the p99 of
// their TTFT is seconds where the steady state says tens of milliseconds. Held at p99, the
// smallest deployments are refuted by their own simulation, the plan grows them, and what it
// recommends passes when simulated again here, independently of the planner.
func TestPlanHoldsSLOUnderLoad(t *testing.T) {
	m := model(t, "Llama-3.1-8B")
	o := PlanOptions{ISL: 2000, OSL: 500, Users: 200, TTFT: 0.5, Scenario: fp8(), SLOQuantile: "p99", Top: 3}
	pl, err := PlanServe(m, []Target{target(t, "H100")}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Best) == 0 || len(pl.Refuted) == 0 {
		t.Fatalf("best %d, refuted %d: %s", len(pl.Best), len(pl.Refuted), pl.NoConfig)
	}
	for _, c := range pl.Refuted {
		if c.MeetsSLO || c.UnderLoad == nil || !(c.UnderLoad.TTFT > 0.5) || !(c.Result.TTFT <= 0.5) ||
			!strings.Contains(c.Miss, "simulated p99 TTFT") {
			t.Errorf("refuted %s x%d: steady %g s, under load %+v, miss %q", c.Layout(), c.Replicas, c.Result.TTFT, c.UnderLoad, c.Miss)
		}
	}
	if smallest := pl.Refuted[0].GPUs; pl.Best[0].GPUs <= smallest {
		t.Errorf("best has %d GPUs, the refuted first %d", pl.Best[0].GPUs, smallest)
	}
	for _, c := range pl.Best {
		if c.UnderLoad == nil || !c.UnderLoad.MeetsSLO || c.UnderLoad.TTFT > 0.5 || c.UnderLoad.Quantile != "p99" {
			t.Errorf("recommended %s x%d under load %+v", c.Layout(), c.Replicas, c.UnderLoad)
		}
	}
	b := pl.Best[0]
	rp := replica(t, m, "H100", b.TP)
	rp.Engine.PP = b.PP
	rp.Engine.MaxBatch = math.Min(rp.Engine.MaxBatch, b.BatchCap)
	n := int(math.Round(200 / float64(b.Replicas)))
	sim, err := rp.Simulate(Load{Kind: Users, N: n, Lengths: []Request{{2000, 500}}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sim.TTFT.P99 > 0.5 {
		t.Errorf("%s x%d simulated again: p99 TTFT %g s", b.Layout(), b.Replicas, sim.TTFT.P99)
	}
	testutil.Near(t, "the plan's p99 against the re-run", b.UnderLoad.TTFT, sim.TTFT.P99, 1e-9)
	if pl.Simulated == nil || !strings.Contains(pl.Simulated.Config, b.Layout()) {
		t.Errorf("the plan's simulation %+v is not its first deployment's", pl.Simulated)
	}
	// held at the median the burst is not the SLO's business: fewer GPUs pass
	o.SLOQuantile = "p50"
	med, err := PlanServe(m, []Target{target(t, "H100")}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(med.Best) == 0 || med.Best[0].GPUs >= b.GPUs {
		t.Errorf("at p50 the best has %v GPUs, at p99 %d", med.Best, b.GPUs)
	}
}

// Million-token outputs plan: the simulation runs fewer requests per user, and a load too long
// to run step by step keeps its steady state instead of failing the plan.
func TestPlanMillionTokenOutputs(t *testing.T) {
	m := model(t, "Llama-4-Scout-17B-16E-Instruct")
	pl, err := PlanServe(m, []Target{target(t, "H100")}, PlanOptions{ISL: 1000, OSL: 1_000_000, Users: 4, Scenario: fp8(), Top: 1})
	if err != nil || len(pl.Best) == 0 {
		t.Fatalf("%v %s", err, pl.NoConfig)
	}
	if s := pl.Simulated; s != nil && (s.Result.Requests < 1 || s.Result.Mix.Steps > MaxSimSteps) {
		t.Errorf("simulated %+v", s.Result)
	}
	rp := replica(t, m, "H100", 8)
	if _, err := rp.Simulate(Load{Kind: Users, N: 4, Requests: 40, Lengths: []Request{{1000, 1_000_000}}}); !errors.Is(err, ErrSimTooLong) {
		t.Errorf("40 million-token requests: %v", err)
	}
}
