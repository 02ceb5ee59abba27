package layout

import (
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
)

// Llama-3.1-70B on 64 H100s at the NeMo recipe's batch: the published layout (TP4 PP4 CP2 VP5
// MBS1, distributed optimizer) fits and is within 10% of the planner's best, every ranked
// layout fits, and the ranking is by step time.
func TestPlanTrainRanksThePublishedLayout(t *testing.T) {
	m, k := llama70b(t)
	tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 8)
	plan, err := tr.PlanTrain(PlanOptions{GPUs: 64, GBS: 128, Seq: 8192, MemoryBytes: 80 * (1 << 30), Domain: 8, Top: 5})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Feasible == 0 || len(plan.Top) != 5 {
		t.Fatalf("plan: %+v", plan.NoFit)
	}
	for i, c := range plan.Top {
		if c.Memory.Total > 80*(1<<30) {
			t.Errorf("rank %d does not fit", i)
		}
		if i > 0 && c.Step.StepTime < plan.Top[i-1].Step.StepTime {
			t.Errorf("rank %d is faster than rank %d", i, i-1)
		}
	}
	pub, err := tr.Train(Layout{TP: 4, PP: 4, VP: 5, CP: 2, DP: 2, EP: 1, MBS: 1, GBS: 128, Seq: 8192, DistOptimizer: true, Recompute: "none"})
	if err != nil {
		t.Fatal(err)
	}
	best := plan.Top[0].Step.StepTime
	if pub.StepTime > 1.1*best {
		t.Errorf("the published layout %.2f s is more than 10%% behind the planner's best %.2f s (%+v)", pub.StepTime, best, plan.Top[0].Step.Layout)
	}
	if plan.Top[0].Why == "" {
		t.Error("the winner does not say why it wins")
	}
}

// One GPU with too little memory: nothing fits, and the planner says which term is short.
func TestPlanTrainSaysWhyNothingFits(t *testing.T) {
	m, k := llama70b(t)
	tr := NewTrainer(m, analyzer.DefaultScenario(), k.p, k.peak, 8)
	plan, err := tr.PlanTrain(PlanOptions{GPUs: 8, GBS: 8, Seq: 8192, MemoryBytes: 80 * (1 << 30), Domain: 8, Top: 3})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Feasible != 0 || plan.NoFit == "" {
		t.Fatalf("70B on 8 GPUs with Adam cannot fit: %+v", plan)
	}
}
