package analyzer

import (
	"strings"

	"github.com/mrep-dev/mrep/model"
)

// TraceRow sets PyTorch's FlopCounterMode count of one module beside mrep's GEMM FLOPs.
type TraceRow struct {
	Module string  `json:"module"`
	Traced int64   `json:"flop_counter_mode"`
	Mrep   float64 `json:"mrep_F_tensorcore"`
	Ratio  float64 `json:"ratio"`
}

// TraceCheck costs a traced run's forward (prefill at the trace's B and S, every token's
// logits) and compares mrep's GEMM FLOPs per module with the trace, for modules at most depth
// dots deep. FlopCounterMode counts matmuls only, so the comparable figure is F_tensorcore;
// F_theory adds softmax and elementwise FLOPs on top.
func TraceCheck(d *model.Dump, depth int) ([]TraceRow, error) {
	if d.Trace == nil {
		return nil, nil
	}
	m := NewModel(d)
	s := DefaultScenario()
	s.Batch, s.Seq, s.AllLogits = d.Trace.Batch, d.Trace.Seq, true
	st, err := m.Analyze(Prefill, s, Naive)
	if err != nil {
		return nil, err
	}
	tree := ModuleTree(st.Modules)
	var out []TraceRow
	for _, tm := range d.Trace.Modules {
		if strings.Count(tm.Name, ".") > depth {
			continue
		}
		r := TraceRow{Module: tm.Name, Traced: tm.Flops, Mrep: tree[tm.Name].FTensorcore}
		if tm.Flops > 0 {
			r.Ratio = r.Mrep / float64(tm.Flops)
		}
		out = append(out, r)
	}
	return out, nil
}
