package analyzer

import (
	"testing"
)

// DeepSeek-V3 for all phases, both profiles and three chips, from a loaded dump (the op list
// is built inside the loop too). Goal (issue 4): well under 100 ms on 2 cores.
func BenchmarkAnalyzeDeepSeekV3(b *testing.B) {
	d := load(b, "DeepSeek-V3")
	var targets []Target
	for _, n := range []string{"H100-SXM", "H200", "B200"} {
		targets = append(targets, target(b, n, "bf16"))
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
