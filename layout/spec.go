package layout

import "fmt"

// Spec is a training layout as a user states it (analyze's flags): the degrees, batches and
// recompute given, 0 for those left to their defaults. Layout fills the defaults, so every
// command that takes a layout from a user fills them the same way.
type Spec struct {
	TP, PP, VP, CP, DP, EP, ETP int64
	// GPUs, when given, sets DP = GPUs / (TP x PP x CP).
	GPUs int64
	// MBS defaults to Batch (the scenario's sequences per step); GBS to MBS x DP x GradAccum.
	MBS, GBS, Batch, GradAccum int64
	Seq                        int64
	// ZeRO is the stage over DP when ZeROSet; unset, it is 1 (the distributed optimizer), or 3
	// under FSDP (which always shards its parameters).
	ZeRO            int
	ZeROSet         bool
	Recompute       string
	RecomputeLayers int64
	NoSP            bool
}

// Layout is the spec with its defaults and the framework knobs k applied.
func (s Spec) Layout(k Knobs) (Layout, error) {
	zero := 1
	if s.ZeROSet {
		zero = s.ZeRO
	}
	l := Layout{TP: s.TP, PP: s.PP, VP: s.VP, CP: s.CP, DP: s.DP, EP: s.EP, ETP: s.ETP, MBS: s.MBS, GBS: s.GBS, Seq: s.Seq,
		ZeRO: zero, Recompute: s.Recompute, NoSP: s.NoSP, RecomputeLayers: s.RecomputeLayers}
	l.DistOptimizer = l.ZeRO >= 1
	l = k.Apply(l)
	if l.Framework == FSDP && !s.ZeROSet {
		l.ZeRO = 3
	}
	if l.MBS == 0 {
		l.MBS = s.Batch
	}
	if s.GPUs > 0 {
		per := l.TP * max(l.PP, 1) * max(l.CP, 1)
		if per <= 0 || s.GPUs%per != 0 {
			return l, fmt.Errorf("--gpus %d is not a multiple of TP x PP x CP = %d x %d x %d", s.GPUs, l.TP, l.PP, l.CP)
		}
		l.DP = s.GPUs / per
	}
	if l.GBS == 0 {
		l.GBS = l.MBS * l.DP * max(s.GradAccum, 1)
	}
	return l, nil
}
