package serve

import (
	"math"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/mrep-dev/mrep/timing"
)

func simReplica(t testing.TB) Replica {
	t.Helper()
	m := model(t, "Llama-3.1-8B")
	s := analyzer.DefaultScenario()
	s.WeightBytes, s.ActBytes, s.KVBytes, s.ComputeDType = 1, 1, 1, "fp8"
	chip, _ := chips.Default().Lookup("H100")
	tm, err := timing.New(chip, "fp8")
	if err != nil {
		t.Fatal(err)
	}
	return Replica{Model: m, Scenario: s, Pred: tm, MemBytes: chip.MemoryBytes(), Engine: DefaultEngine()}
}

// One request alone, by hand: its TTFT is the step that prefills its 2,000-token prompt (one
// chunk under the 8,192-token budget), its TPOT the step that decodes it alone at its mean
// context; the wave's throughput is its 500 tokens over its end-to-end time.
func TestSimulateOneRequestByHand(t *testing.T) {
	rp := simReplica(t)
	r, err := rp.Simulate(Load{Kind: Wave, N: 1, Lengths: []Request{{2000, 500}}})
	if err != nil {
		t.Fatal(err)
	}
	pre, err := cycle(rp.Model, rp.Scenario, rp.Pred, rp.Engine, 0, 1, 2000, 2000)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "TTFT", r.TTFT.Mean, pre.TEst, 1e-9)
	dec, err := cycle(rp.Model, rp.Scenario, rp.Pred, rp.Engine, 1, 2250, 0, 2000)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "TPOT", r.TPOT.Mean, dec.TEst, 0.01) // contexts 2,001..2,499 about the mean, bucketed
	testutil.Near(t, "output tok/s", r.OutputTokS, 500/r.E2E.Mean, 1e-9)
	if r.QueueWait.Mean != 0 || r.Requests != 1 || r.Mix.Steps != 500 {
		t.Errorf("queue %g, requests %d, steps %d", r.QueueWait.Mean, r.Requests, r.Mix.Steps)
	}
}

// A closed loop of many users reaches the steady state the analytic model gives for the same
// concurrency (the first burst and the tail are a small part of 20 requests per user), and
// TTFT under load is longer than alone: chunks share steps with decodes, prompts queue for
// the token budget.
func TestSimulateUsersMatchesSteadyState(t *testing.T) {
	rp := simReplica(t)
	lengths := []Request{{1000, 1000}}
	sim, err := rp.Simulate(Load{Kind: Users, N: 64, Requests: 64 * 20, Lengths: lengths})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := rp.At(1000, 1000, 64)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "output tok/s against the steady state", sim.OutputTokS, ss.OutputTokS, 0.10)
	testutil.Near(t, "TPOT against the steady state", sim.TPOT.Mean, ss.TPOT, 0.10)
	alone, err := rp.Simulate(Load{Kind: Wave, N: 1, Lengths: lengths})
	if err != nil {
		t.Fatal(err)
	}
	if !(sim.TTFT.Mean > alone.TTFT.Mean) || !(sim.TTFT.P90 >= sim.TTFT.P50) || !(sim.TTFT.P99 >= sim.TTFT.P90) {
		t.Errorf("TTFT under load %+v, alone %+v", sim.TTFT, alone.TTFT)
	}
	if sim.PeakSeqs != 64 || sim.Requests != 64*20 {
		t.Errorf("peak %d, requests %d", sim.PeakSeqs, sim.Requests)
	}
}

// A pipelined replica simulated a cycle at a time meets its own steady state: each running
// sequence advances one token per cycle of PP micro-batch steps.
func TestSimulatePipelineMatchesSteadyState(t *testing.T) {
	rp := simReplica(t)
	rp.Engine.PP = 2
	lengths := []Request{{1000, 1000}}
	sim, err := rp.Simulate(Load{Kind: Users, N: 64, Requests: 64 * 20, Lengths: lengths})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := rp.At(1000, 1000, 64)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Near(t, "PP2 output tok/s against the steady state", sim.OutputTokS, ss.OutputTokS, 0.10)
	testutil.Near(t, "PP2 TPOT against the steady state", sim.TPOT.Mean, ss.TPOT, 0.10)
	flat := simReplica(t)
	one, err := flat.Simulate(Load{Kind: Wave, N: 1, Lengths: []Request{{100, 50}}})
	if err != nil {
		t.Fatal(err)
	}
	two, err := rp.Simulate(Load{Kind: Wave, N: 1, Lengths: []Request{{100, 50}}})
	if err != nil {
		t.Fatal(err)
	}
	// one sequence alone gains nothing from the pipeline and pays its hand-offs
	if !(two.TPOT.Mean > one.TPOT.Mean) {
		t.Errorf("one sequence: PP2 TPOT %g, PP1 %g", two.TPOT.Mean, one.TPOT.Mean)
	}
}

// A wave larger than the batch cap queues: the last admitted wait for earlier requests to
// finish, so p90 TTFT is many times the median's first-burst TTFT; an open loop below
// capacity barely queues, one above it queues without bound (TTFT grows with the requests).
func TestSimulateQueues(t *testing.T) {
	rp := simReplica(t)
	rp.Engine.MaxBatch = 32
	lengths := []Request{{500, 200}}
	w, err := rp.Simulate(Load{Kind: Wave, N: 128, Lengths: lengths})
	if err != nil {
		t.Fatal(err)
	}
	if !(w.QueueWait.P90 > 0) || !(w.TTFT.P90 > 3*w.TTFT.P50/2) || w.PeakSeqs != 32 {
		t.Errorf("wave of 128 over 32 slots: queue %+v, TTFT %+v, peak %d", w.QueueWait, w.TTFT, w.PeakSeqs)
	}
	full, err := rp.At(500, 200, 32)
	if err != nil {
		t.Fatal(err)
	}
	capacity := full.Concurrency / full.E2E // requests/s at the cap
	low, err := rp.Simulate(Load{Kind: Rate, Rate: 0.3 * capacity, Requests: 300, Lengths: lengths, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	high, err := rp.Simulate(Load{Kind: Rate, Rate: 2 * capacity, Requests: 300, Lengths: lengths, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !(low.QueueWait.Mean < 0.1*low.E2E.Mean) || !(high.QueueWait.Mean > low.E2E.Mean) {
		t.Errorf("queue wait at 0.3x capacity %g (E2E %g), at 2x %g", low.QueueWait.Mean, low.E2E.Mean, high.QueueWait.Mean)
	}
	again, _ := rp.Simulate(Load{Kind: Rate, Rate: 0.3 * capacity, Requests: 300, Lengths: lengths, Seed: 1})
	if again.TTFT != low.TTFT {
		t.Error("the same seed must give the same run")
	}
	if _, err := rp.Simulate(Load{Kind: Rate, Rate: math.Inf(1), Lengths: lengths}); err == nil {
		t.Error("an infinite rate must be refused")
	}
	if _, err := rp.Simulate(Load{Kind: Users, N: 4, Lengths: []Request{{1 << 30, 1}}}); err == nil {
		t.Error("a request larger than the KV cache must be refused")
	}
}

func BenchmarkSimulateUsers(b *testing.B) {
	rp := simReplica(b)
	for i := 0; i < b.N; i++ {
		if _, err := rp.Simulate(Load{Kind: Users, N: 64, Requests: 640, Lengths: []Request{{1000, 1000}}}); err != nil {
			b.Fatal(err)
		}
	}
}

// SGLang's prefill-only steps: with mixed chunks off a step that prefills decodes nothing, so
// the running sequences stall while prompts are prefilled.
func TestSimulatePrefillOnlySteps(t *testing.T) {
	rp := simReplica(t)
	load := Load{Kind: Users, N: 32, Requests: 320, Lengths: []Request{{2000, 300}}}
	mixed, err := rp.Simulate(load)
	if err != nil {
		t.Fatal(err)
	}
	rp.Engine.PrefillOnlySteps = true
	split, err := rp.Simulate(load)
	if err != nil {
		t.Fatal(err)
	}
	// the steps that prefill carry no decodes, so a step decodes fewer sequences on average
	if split.Requests != 320 || !(split.Mix.DecodeSeqs < mixed.Mix.DecodeSeqs) || split.TPOT == mixed.TPOT {
		t.Errorf("prefill-only steps: %d requests, %.1f decodes per step (mixed %.1f), TPOT %+v (mixed %+v)",
			split.Requests, split.Mix.DecodeSeqs, mixed.Mix.DecodeSeqs, split.TPOT, mixed.TPOT)
	}
}

// BenchmarkPlanServeEngines is issue 21's speed target: plan serve over four chips and the
// three engines' presets, disaggregated deployments included, for a 70B dense model (<= 0.5 s)
// and DeepSeek-V3 (<= 1 s), each engine timed with its lane where the chip has one.
func BenchmarkPlanServeEngines(b *testing.B) {
	for _, c := range []struct {
		name, model string
		o           PlanOptions
	}{
		{"70B-users-disagg", "Llama-3.1-70B-Instruct", PlanOptions{ISL: 2000, OSL: 500, Users: 100, TPOT: 0.05, TTFT: 1, Disagg: true}},
		{"DeepSeek-V3-offline-disagg", "DeepSeek-V3", PlanOptions{ISL: 2000, OSL: 500, TPOT: 0.05, GPUs: 16, Disagg: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := model(b, c.model)
			type job struct {
				o  PlanOptions
				ts []Target
			}
			var jobs []job
			for _, engine := range []string{"trtllm", "vllm", "sglang"} {
				o := c.o
				o.Scenario = fp8()
				e, err := EnginePreset(engine, 80)
				if err != nil {
					b.Fatal(err)
				}
				o.Engine = e
				var ts []Target
				for _, chip := range []string{"H100", "H200", "B200", "MI300X"} {
					tg := target(b, chip)
					lc := tg.Chip
					lc.Efficiency = lc.Efficiency.Lane(engine)
					if tg.Pred, err = timing.New(lc, "fp8"); err != nil {
						b.Fatal(err)
					}
					ts = append(ts, tg)
				}
				jobs = append(jobs, job{o, ts})
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, j := range jobs {
					if _, err := PlanServe(m, j.ts, j.o); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// With the attention data-parallel (DeepSeek-V3, EP8 over eight attention groups, SGLang's
// defaults), plan serve's steady state and its own step-by-step simulation agree on the
// throughput a closed loop of users gets, long prompts included: the groups prefill in phase
// (each a chunk of chunked_prefill_size / dp), in both.
func TestAttentionDPSteadyStateMatchesSimulation(t *testing.T) {
	m := model(t, "DeepSeek-V3")
	for _, name := range []string{"B200", "H200", "MI355X"} {
		chip, err := chips.Default().Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		chip.Efficiency = chip.Efficiency.Lane("sglang")
		tm, err := timing.New(chip, "fp8")
		if err != nil {
			t.Fatal(err)
		}
		s := analyzer.DefaultScenario()
		s.WeightBytes, s.ActBytes, s.KVBytes, s.ComputeDType = 1, 1, 1, "fp8"
		s.TP, s.EP, s.ETP = 1, 8, InferenceETP(1, 8)
		e, err := EnginePreset("sglang", chip.MemoryGiB)
		if err != nil {
			t.Fatal(err)
		}
		e = e.ForLayout(8, 1, 8)
		if want := math.Floor(e.chunk / 8); e.TokenBudget != want {
			t.Fatalf("%s: budget %g per attention group, want chunked_prefill_size %g / 8", name, e.TokenBudget, e.chunk)
		}
		if again := e.ForLayout(8, 1, 8); again.TokenBudget != e.TokenBudget {
			t.Fatalf("%s: a layout applied twice divides the chunk twice (%g, then %g)", name, e.TokenBudget, again.TokenBudget)
		}
		rp := Replica{Model: m, Scenario: s, Pred: tm, MemBytes: chip.MemoryBytes(), Engine: e}
		for _, c := range []struct {
			isl, osl int64
			users    int
		}{{8192, 1024, 64}, {1024, 1024, 64}, {8192, 1024, 256}} {
			st, err := rp.At(c.isl, c.osl, float64(c.users))
			if err != nil {
				t.Fatal(err)
			}
			sim, err := rp.Simulate(Load{Kind: Users, N: c.users, Requests: 4 * c.users, Seed: 1, Lengths: []Request{{ISL: c.isl, OSL: c.osl}}})
			if err != nil {
				t.Fatal(err)
			}
			if r := st.OutputTokS / sim.OutputTokS; math.Abs(r-1) > 0.10 {
				t.Errorf("%s %d/%d at %d users: steady state %.0f tok/s, simulated %.0f (ratio %.2f)", name, c.isl, c.osl, c.users, st.OutputTokS, sim.OutputTokS, r)
			}
		}
	}
}
