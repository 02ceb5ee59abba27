package analyzer

import "fmt"

// Analysis is a model costed for several phases and profiles and timed on several targets.
type Analysis struct {
	Version  string        `json:"analyzer_version"`
	Model    *Model        `json:"model"`
	Scenario Scenario      `json:"scenario"`
	Targets  []Target      `json:"targets"`
	Profiles []ExecProfile `json:"profiles"`
	Steps    []Step        `json:"steps"`   // phase x profile, target-independent
	Results  []Result      `json:"results"` // target x phase x profile
}

// Run costs every phase under every profile once and times each step on every target.
func Run(m *Model, s Scenario, targets []Target, profiles []ExecProfile, phases []Phase) (Analysis, error) {
	if len(targets) == 0 || len(profiles) == 0 || len(phases) == 0 {
		return Analysis{}, fmt.Errorf("analysis needs at least one target, profile and phase")
	}
	a := Analysis{Version: Version, Model: m, Scenario: s, Targets: targets, Profiles: profiles}
	for _, ph := range phases {
		for _, p := range profiles {
			st, err := m.Analyze(ph, s, p)
			if err != nil {
				return Analysis{}, fmt.Errorf("analyze %s/%s: %w", ph, p.Name, err)
			}
			a.Steps = append(a.Steps, st)
		}
	}
	for _, t := range targets {
		for _, st := range a.Steps {
			a.Results = append(a.Results, Evaluate(st, t))
		}
	}
	return a, nil
}

// Find returns the result for a target label, phase and profile.
func (a Analysis) Find(target string, ph Phase, profile string) (Result, bool) {
	for _, r := range a.Results {
		if r.Target == target && r.Step.Phase == ph && r.Step.Profile == profile {
			return r, true
		}
	}
	return Result{}, false
}

// RunInfo identifies the run in the report.
type RunInfo struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Label string `json:"label,omitempty"`
	Step  *int64 `json:"step,omitempty"`
	Hash  string `json:"content_hash"`
}
