package compare

import (
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/analyzer"
)

// Two runs pair phases by (target, phase, profile), whatever their order; one run under two
// scenarios pairs them by position, where the targets differ. The why speaks for the first
// target under the last profile only.
func TestDiffPairsAndWhy(t *testing.T) {
	pm := func(target string, ph analyzer.Phase, profile string, tEst float64) PhaseMetrics {
		return PhaseMetrics{Target: target, Phase: ph, Profile: profile, TEst: tEst, Regime: "memory"}
	}
	a := RunMetrics{Phases: []PhaseMetrics{pm("H100", analyzer.Prefill, "naive", 1), pm("H100", analyzer.Decode, "naive", 2)}}
	b := RunMetrics{Phases: []PhaseMetrics{pm("H100", analyzer.Decode, "naive", 4), pm("H100", analyzer.Prefill, "naive", 1)}}
	pairs := Diff{MetricsA: a, MetricsB: b}.Pairs()
	if len(pairs) != 2 || pairs[1][0].Phase != analyzer.Decode || pairs[1][1].TEst != 4 {
		t.Fatalf("two runs pair by key: %+v", pairs)
	}
	why := Diff{MetricsA: a, MetricsB: b}.Explain()
	if len(why) != 2 || !strings.Contains(why[0], "unchanged") || !strings.Contains(why[1], "(+100%)") {
		t.Errorf("why: %q", why)
	}
	b2 := RunMetrics{Phases: []PhaseMetrics{pm("H200", analyzer.Prefill, "naive", 0.5)}}
	pairs = Diff{MetricsA: a, MetricsB: b2, ScenarioA: "--chip H100", ScenarioB: "--chip H200"}.Pairs()
	if len(pairs) != 1 || pairs[0][1].Target != "H200" {
		t.Errorf("two scenarios pair by position: %+v", pairs)
	}
}

// A history splits into one series per run of equal labels, in order.
func TestHistorySeries(t *testing.T) {
	var h History
	for _, l := range []string{"a", "a", "b", "a"} {
		h.Points = append(h.Points, Point{Run: analyzer.RunInfo{Label: l}})
	}
	s := h.Series()
	if len(s) != 3 || len(s[0]) != 2 || len(s[1]) != 1 || len(s[2]) != 1 {
		t.Errorf("series %+v", s)
	}
	if (History{}).Series() != nil {
		t.Error("no points, no series")
	}
	for metric, want := range map[string]string{"T_est:decode": "T_est:decode (ms)", "MFU:training": "MFU:training (%)", "params": "params"} {
		if got := MetricLabel(metric); got != want {
			t.Errorf("MetricLabel(%q) = %q, want %q", metric, got, want)
		}
	}
}
