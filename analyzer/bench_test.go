package analyzer

import (
	"testing"

	"github.com/mrep-dev/mrep/chips"
)

// DeepSeek-V3 for all phases, both profiles and three chips, from a loaded dump (the op list
// is built inside the loop too). Goal (issue 4): well under 100 ms on 2 cores.
func BenchmarkAnalyzeDeepSeekV3(b *testing.B) {
	d := load(b, "DeepSeek-V3")
	db := chips.Default()
	var targets []Target
	for _, n := range []string{"H100-SXM", "H200", "B200"} {
		c, _ := db.Lookup(n)
		t, err := NewTarget(c, "bf16")
		if err != nil {
			b.Fatal(err)
		}
		targets = append(targets, t)
	}
	s := DefaultScenario()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := NewModel(d)
		a, err := Run(m, s, targets, []ExecProfile{Naive, Efficient}, Phases)
		if err != nil || len(a.Results) != 18 {
			b.Fatal(err)
		}
	}
}
