package serve

import (
	"math"
	"testing"

	"github.com/mrep-dev/mrep/internal/testutil"
)

// The KV cache a prefill replica sends, by hand: Llama-3.1-70B keeps 80 layers x 8 KV heads x
// 128 x 2 (K, V) = 163,840 FP8 bytes per token, so a 2,000-token prompt is 327.68 MB; inside
// one node it crosses NVLink at 450 GB/s per direction x 0.83 achievable plus 10 us, split over
// the smaller replica's GPUs; across nodes it takes the scale-out network.
func TestKVTransferByHand(t *testing.T) {
	m := model(t, "Llama-3.1-70B-Instruct")
	pre, dec := replica(t, m, "H100", 1), replica(t, m, "H100", 4)
	chip := target(t, "H100").Chip
	eff := chip.Efficiency
	bytes := 2000.0 * 163840
	want := eff.ScaleUpLatencyUs*1e-6 + bytes/(chip.ScaleUpGBps/2*1e9*eff.ScaleUpFrac)
	testutil.Near(t, "KV transfer in a node", KVTransfer(m, dec.Scenario, dec.Pred, 2000, pre, dec, 8), want, 1e-9)
	pre4 := replica(t, m, "H100", 4)
	wantOut := eff.ScaleOutLatencyUs*1e-6 + bytes/4/(chip.ScaleOutGBps*1e9*eff.ScaleOutFrac)
	testutil.Near(t, "KV transfer across nodes", KVTransfer(m, dec.Scenario, dec.Pred, 2000, pre4, dec, 4), wantOut, 1e-9)
}

// A decode replica of a disaggregated deployment steps through decode tokens only: its TPOT is
// the plain decode step at that batch, shorter than the aggregated engine's step that also
// carries the prompts' chunks; a prefill replica runs whole prompts to the token budget.
func TestDisaggregatedPools(t *testing.T) {
	m := model(t, "Llama-3.1-70B-Instruct")
	agg := replica(t, m, "H100", 4)
	dec := agg
	dec.Engine.DecodeOnly = true
	const isl, osl = 2000, 500
	rd, err := dec.At(isl, osl, 128)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := mixedStep(m, dec.Scenario, dec.Pred, 128, isl+osl/2, 0, isl)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "decode-only TPOT", rd.TPOT, plain.TEst, 1e-12)
	ra, err := agg.At(isl, osl, 128)
	if err != nil {
		t.Fatal(err)
	}
	if !(rd.TPOT < ra.TPOT) || rd.PrefillTok != 0 {
		t.Errorf("decode-only TPOT %.2f ms (prefill %g tokens), aggregated %.2f ms", rd.TPOT*1e3, rd.PrefillTok, ra.TPOT*1e3)
	}
	ps, err := agg.Prefill(isl)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Prompts != 4 { // 8,192 / 2,000
		t.Errorf("%g prompts per prefill step, want 4", ps.Prompts)
	}
	step, err := mixedStep(m, agg.Scenario, agg.Pred, 0, 0, 4*isl, isl)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "prefill step", ps.StepTime, step.TEst, 1e-12)
	testutil.Near(t, "prefill requests/s", ps.ReqPerS, 4/step.TEst, 1e-12)
}

// The search with disaggregation is a superset: it never answers worse than without; its
// disaggregated answers add up (tokens/s = the smaller pool's requests/s x OSL, GPUs = both
// pools, TTFT = prefill + transfer + wait); and under a load they carry every user within the
// SLOs with the prefill pool below saturation.
func TestPlanDisaggregated(t *testing.T) {
	m := model(t, "Llama-3.1-70B-Instruct")
	tg := target(t, "H100")
	for _, o := range []PlanOptions{
		{ISL: 2000, OSL: 500, GPUs: 8, TPOT: 0.03, Scenario: fp8()},
		{ISL: 2000, OSL: 500, Users: 100, TPOT: 0.03, TTFT: 0.5, Scenario: fp8()},
		{ISL: 2000, OSL: 500, Rate: 10, TPOT: 0.03, TTFT: 1, Scenario: fp8()},
	} {
		without, err := PlanServe(m, []Target{tg}, o)
		if err != nil {
			t.Fatal(err)
		}
		o.Disagg = true
		with, err := PlanServe(m, []Target{tg}, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(with.Best) == 0 || len(without.Best) == 0 {
			t.Fatalf("%+v: nothing meets it", o)
		}
		if with.better(without.Best[0], with.Best[0]) {
			t.Errorf("%s: with disaggregation %s answers worse than without (%s)", with.Mode, with.Best[0].Layout(), without.Best[0].Layout())
		}
		n := 0
		for _, c := range with.Best {
			d := c.Disagg
			if d == nil {
				continue
			}
			n++
			if c.GPUs < d.PrefillGPUs+d.DecodeGPUs || !c.MeetsSLO || c.Result.TPOT > o.TPOT {
				t.Errorf("%s: %d GPUs, meets %v, TPOT %g", c.Layout(), c.GPUs, c.MeetsSLO, c.Result.TPOT)
			}
			testutil.Near(t, c.Layout()+" TTFT", c.Result.TTFT, d.Step.Prefill+d.RequestPath+d.KVTransfer+d.QueueWait, 1e-12)
			// a step under the load carries the prompts waiting: no more than a full step's,
			// offline a full step's
			if d.Step.Prompts > d.Prefill.Prompts || with.Mode == "offline" && d.Step != d.Prefill {
				t.Errorf("%s: prefill step of %g prompts under the load, %g in a full one", c.Layout(), d.Step.Prompts, d.Prefill.Prompts)
			}
			decRate := float64(c.Replicas) * c.Result.OutputTokS / float64(o.OSL)
			switch with.Mode {
			case "offline":
				testutil.Near(t, c.Layout()+" tokens/s", c.TokS, math.Min(float64(d.PrefillReplicas)*d.Prefill.ReqPerS, decRate)*float64(o.OSL), 1e-9)
			case "users":
				if float64(c.Replicas)*c.Result.Concurrency < o.Users*(1-1e-9) || d.Utilization >= 1 {
					t.Errorf("%s: %g sequences for %g users, prefill at %.0f%%", c.Layout(), float64(c.Replicas)*c.Result.Concurrency, o.Users, 100*d.Utilization)
				}
			case "rate":
				testutil.Near(t, c.Layout()+" tokens/s", c.TokS, o.Rate*float64(o.OSL), 1e-9)
				if d.Utilization >= 1 || decRate < o.Rate*(1-1e-9) {
					t.Errorf("%s: prefill at %.0f%%, decode completes %g of %g requests/s", c.Layout(), 100*d.Utilization, decRate, o.Rate)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no disaggregated deployment among the best", with.Mode)
		}
	}
}

// The prefill queue: nothing at an idle pool (its step starts at once), longer as the pool
// fills (by hand at 50%: half the time a busy replica, half a step to its end, 0.5 x 0.2; then
// M/D/1's 0.5 x step/4), unbounded at saturation.
func TestPrefillQueue(t *testing.T) {
	testutil.Near(t, "idle", prefillQueue(0, 0.4, 4), 0, 1e-12)
	testutil.Near(t, "half full", prefillQueue(0.5, 0.4, 4), 0.5*0.2+0.5*0.1, 1e-12)
	prev := 0.0
	for _, rho := range []float64{0, 0.3, 0.6, 0.9, 0.99} {
		w := prefillQueue(rho, 0.4, 4)
		if w < prev {
			t.Errorf("wait %g at %g below %g", w, rho, prev)
		}
		prev = w
	}
	if !math.IsInf(prefillQueue(1, 0.4, 4), 1) {
		t.Error("a saturated pool must wait forever")
	}
}

// A disaggregated deployment reports the TTFT of the workload's quantile prompts too: one
// prefill step for prompts within the token budget, more for longer ones, plus each prompt's
// KV transfer; the mean prompt's equals the table's TTFT less the prefill wait.
func TestDisaggTTFTQuantiles(t *testing.T) {
	m := model(t, "Llama-3.1-8B")
	o := PlanOptions{ISL: 1850, OSL: 290, Rate: 5, Scenario: fp8(), Top: 20, Disagg: true,
		Prompts: []int64{500, 1850, 30000}, PromptQuantiles: []float64{0.5, 0.75, 0.99}}
	pl, err := PlanServe(m, []Target{target(t, "H100")}, o)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range pl.Best {
		d := c.Disagg
		if d == nil {
			continue
		}
		n++
		q := c.TTFTQuantiles
		if len(q) != 3 || !(q[0].TTFT <= q[1].TTFT && q[1].TTFT < q[2].TTFT) {
			t.Fatalf("%s: TTFT by prompt length: %+v", c.Layout(), q)
		}
		testutil.Near(t, c.Layout()+" mean prompt's TTFT", q[1].TTFT, c.Result.TTFT-d.QueueWait, 1e-9)
		if q[2].TTFT < 3*d.Prefill.StepTime { // 30,000 tokens: four full steps of 8,192
			t.Errorf("%s: a 30k-token prompt in %g s, steps of %g s", c.Layout(), q[2].TTFT, d.Prefill.StepTime)
		}
	}
	if n == 0 {
		t.Error("no disaggregated deployment among the best")
	}
}

// A closed loop over a disaggregated deployment, by its parts: one user's TTFT is its prompt's
// prefill, the request overhead and the KV transfer, its TPOT the decode-only step of one
// sequence, and its throughput OSL over its E2E; many users on one small prefill replica are
// paced by that replica (requests/s = its rate) and wait before it, so TTFT grows with them
// while the decode pool's TPOT stays that of the sequences it carries.
func TestDisaggUsers(t *testing.T) {
	m := model(t, "Llama-3.1-70B-Instruct")
	pre, dec := replica(t, m, "H100", 2), replica(t, m, "H100", 4)
	const isl, osl = 2000, 200
	one, err := DisaggUsers(pre, dec, 1, 1, isl, osl, 1, 8)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := pre.Prefill(isl)
	if err != nil {
		t.Fatal(err)
	}
	lone, err := pre.prefillUpTo(isl, 1) // a step with its one prompt
	if err != nil {
		t.Fatal(err)
	}
	d := dec
	d.Engine.DecodeOnly = true
	alone, err := d.At(isl, osl, 1)
	if err != nil {
		t.Fatal(err)
	}
	var reqOH float64
	if ro, ok := pre.Pred.(interface{ RequestOverhead() float64 }); ok {
		reqOH = ro.RequestOverhead()
	}
	base := lone.Prefill + reqOH + KVTransfer(m, dec.Scenario, dec.Pred, isl, pre, dec, 8)
	// one user: its prompt alone in a step, and the prefill replica idle when it arrives but
	// for the share of the time it is busy (the wait, rho x half a step and M/D/1's queue of
	// rho/(2(1-rho)) steps, is a few percent of a step at rho = 7%)
	if !(one.TTFT >= base && one.TTFT <= base+0.1*lone.StepTime) || !(lone.StepTime < ps.StepTime/2) {
		t.Errorf("one user's TTFT %.4g s, want its prefill, overhead and transfer %.4g s and a little; a step of one prompt %.3g s, of %g %.3g s",
			one.TTFT, base, lone.StepTime, ps.Prompts, ps.StepTime)
	}
	testutil.Near(t, "one user's TPOT", one.TPOT, alone.TPOT, 1e-9)
	testutil.Near(t, "one user's throughput", one.OutputTokS, osl/one.E2E, 1e-3)
	if one.GPUs != 2+4 {
		t.Errorf("GPUs %d, want both pools' 6", one.GPUs)
	}
	// 400 users, one prefill replica: the loop runs at the prefill pool's rate
	many, err := DisaggUsers(pre, dec, 1, 2, isl, osl, 400, 8)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "prefill-paced request rate", many.OutputTokS/osl, ps.ReqPerS, 1e-3)
	if !(many.TTFT > 10*one.TTFT) || !(many.QueueWait > 0) {
		t.Errorf("400 users on one prefill replica: TTFT %.3g s (one user %.3g s), wait %.3g s; want them queueing", many.TTFT, one.TTFT, many.QueueWait)
	}
	// Little's law holds for the whole loop
	testutil.Near(t, "users = rate x E2E", many.OutputTokS/osl*many.E2E, 400, 2e-3)
	if _, err := DisaggUsers(pre, dec, 0, 1, isl, osl, 4, 8); err == nil {
		t.Error("a pool of no replicas must be refused")
	}
}

// At low load a disaggregated prefill replica prefills the one prompt waiting, not a full step
// of them: the TTFT is that prompt's own prefill (issue 38: full steps made it 3-4x too long).
func TestDisaggLowLoadPrefillsOnePrompt(t *testing.T) {
	m := model(t, "Llama-3.1-8B")
	o := PlanOptions{ISL: 1000, OSL: 500, Rate: 0.2, Scenario: fp8(), Top: 50, Disagg: true}
	pl, err := PlanServe(m, []Target{target(t, "H100")}, o)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range append(pl.Best, pl.Pareto...) {
		d := c.Disagg
		if d == nil {
			continue
		}
		n++
		if d.Step.Prompts != float64(max(d.PrefillPP, 1)) || !(d.Prefill.Prompts > d.Step.Prompts) || !(d.Step.Prefill < d.Prefill.Prefill) {
			t.Errorf("%s: at 0.2 requests/s a step of %g prompts (%g s), a full one %g (%g s)", c.Layout(), d.Step.Prompts, d.Step.Prefill, d.Prefill.Prompts, d.Prefill.Prefill)
		}
	}
	if n == 0 {
		t.Fatal("no disaggregated deployment planned")
	}
}
