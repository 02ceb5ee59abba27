package render

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/model"
)

// NotATransformer says whether the time model's transformer phases do not apply: no attention
// anywhere (a CNN, an RNN, a plain MLP). A model with attention whose sizes are unknown is not
// one of these: its fingerprint warns and names the override instead.
func NotATransformer(fp analyzer.Fingerprint) bool { return !fp.Transformer && fp.Attention == "none" }

// notTransformerNote is the one sentence that replaces the transformer sections.
const notTransformerNote = "This model has no attention (no heads, hidden size and layers in its config or module tree), " +
	"so it is not a transformer: the time model's training step, prefill, decode, KV cache, `B_crit` and tokens/s " +
	"do not apply. Parameters, memory and weight statistics above are exact; FLOPs per module come from a trace " +
	"(`dump_model(..., trace=...)`: PyTorch's FlopCounterMode counts convolutions and matrix products)."

// WriteNotATransformer writes the sentence and, when the run was traced, its FLOPs per module.
func WriteNotATransformer(out io.Writer, tr *model.Trace) error {
	w := &errWriter{w: out}
	w.printf("%s\n", notTransformerNote)
	if tr == nil {
		w.printf("\nThis run was not traced.\n")
		return w.err
	}
	if w.err != nil {
		return w.err
	}
	return WriteTracedFLOPs(out, tr)
}

// WriteTracedFLOPs is a trace's FLOPs per module, with each module's operators.
func WriteTracedFLOPs(out io.Writer, tr *model.Trace) error {
	w := &errWriter{w: out}
	w.printf("\n### Traced FLOPs per module\n\nOne forward at batch %d on %s, %s in all (modules up to three levels deep, inclusive of their children).\n\n",
		tr.Batch, Visible(tr.Device), SI(float64(tr.TotalFlops), "FLOP"))
	var rows [][]string
	for _, m := range tr.Modules {
		if strings.Count(m.Name, ".") > 2 {
			continue
		}
		name := m.Name
		if name == "" {
			name = "(model)"
		}
		ops := make([]string, 0, len(m.Ops))
		for op := range m.Ops {
			ops = append(ops, op)
		}
		sort.Slice(ops, func(i, j int) bool {
			return m.Ops[ops[i]] > m.Ops[ops[j]] || m.Ops[ops[i]] == m.Ops[ops[j]] && ops[i] < ops[j]
		})
		var parts []string
		for _, op := range ops {
			parts = append(parts, fmt.Sprintf("%s %s", code(op), pct(float64(m.Ops[op]), float64(m.Flops))))
		}
		rows = append(rows, []string{code(name), Comma(m.Flops), pct(float64(m.Flops), float64(tr.TotalFlops)), strings.Join(parts, ", ")})
	}
	table(w, []string{"Module", "FLOPs", "Share", "Operators"}, "lrrl", rows)
	return w.err
}
