package render

import (
	"fmt"
	"io"

	"github.com/mrep-dev/mrep/calib"
)

// WriteRunDiff writes two measured runs side by side: each figure measured and predicted, and
// the parts of the engine's step (the report's step table) that moved between them.
func WriteRunDiff(out io.Writer, d calib.RunDiff) error {
	w := &errWriter{w: out}
	w.printf("# Measured run %s against %s\n\n", code(d.A), code(d.B))
	var rows [][]string
	for _, f := range d.Figures {
		rows = append(rows, []string{f.Name, value(f.MeasuredA, f.Unit), value(f.MeasuredB, f.Unit), fmt.Sprintf("%+.0f%%", 100*f.MeasuredMove),
			value(f.PredictedA, f.Unit), value(f.PredictedB, f.Unit), fmt.Sprintf("%+.0f%%", 100*f.PredictedMove)})
	}
	table(w, []string{"Figure", "Measured A", "Measured B", "Moved", "Predicted A", "Predicted B", "Predicted move"}, "lrrrrrr", rows)
	w.printf("\nWhat moved, as mrep's simulation of each run sees it: %s.\n\n", Visible(d.Predicted))
	rows = nil
	for _, m := range d.Moves {
		rows = append(rows, []string{m.Part, seconds(m.A), seconds(m.B), seconds(m.B - m.A)})
	}
	rows = append(rows, []string{"Whole step", seconds(d.StepA.MeanStep), seconds(d.StepB.MeanStep), seconds(d.StepB.MeanStep - d.StepA.MeanStep)})
	table(w, []string{"Step time (mean per step)", "A", "B", "Change"}, "lrrr", rows)
	return w.err
}
