package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/calib"
	"github.com/mrep-dev/mrep/store"
)

// Show is everything `mrep show` presents about one run.
type Show struct {
	Run      store.Run             `json:"run"`
	Summary  analyzer.ParamSummary `json:"summary"`
	Patterns []analyzer.PatternRow `json:"patterns"`
	Tensors  []analyzer.TensorRow  `json:"tensors"`
	// Measured is the training hook's measurement beside mrep's prediction, when the dump has one.
	Measured *calib.Comparison `json:"measured,omitempty"`
}

// ShowOptions limit long tables; 0 means no limit.
type ShowOptions struct {
	MaxPatterns int
	MaxLayers   int
	MaxStats    int
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "—"
	}
	return *s
}

// WriteShow renders a run as markdown: identity, parameter summary, memory by dtype, the
// pattern-grouped module table, layer details and weight statistics (seed sections 4.3-4.5).
func WriteShow(out io.Writer, s Show, opt ShowOptions) error {
	w := &errWriter{w: out}
	r := s.Run
	w.printf("# Run %d: %s\n\n", r.ID, r.ModelName)
	step := "—"
	if r.Step != nil {
		step = Comma(*r.Step)
	}
	tags := "—"
	if len(r.Tags) > 0 {
		tags = strings.Join(r.Tags, ", ")
	}
	table(w, []string{"Property", "Value"}, "ll", [][]string{
		{"Run id", fmt.Sprint(r.ID)},
		{"Content hash", "`" + r.ContentHash + "`"},
		{"Label", orDash(r.Label)},
		{"Step", step},
		{"Tags", tags},
		{"Root class", "`" + r.RootClass + "`"},
		{"Source", r.SourceKind + sourceDetail(r)},
		{"Created", r.CreatedAt},
		{"Ingested", r.IngestedAt.UTC().Format("2006-01-02T15:04:05Z")},
		{"Ingested by", orDashS(r.IngestedBy)},
	})

	if s.Measured != nil {
		writeMeasured(w, *s.Measured)
	}

	sm := s.Summary
	w.printf("\n## Parameter summary\n\n")
	table(w, []string{"Metric", "Value"}, "lr", [][]string{
		{"Total parameters", Comma(sm.Total)},
		{"Trainable parameters", Comma(sm.Trainable)},
		{"Frozen parameters", Comma(sm.Frozen)},
		{"Parameter memory (tensor dtypes)", IEC(float64(sm.Bytes))},
		{"Modules", Comma(int64(sm.Modules))},
		{"Parameter tensors (tied counted once)", Comma(int64(sm.Tensors))},
		{"Tied tensor references", Comma(int64(sm.Tied))},
		{"Lazy (uninitialized) tensors", Comma(int64(sm.Lazy))},
	})
	if sm.MetaDevice {
		w.printf("\nParameters are meta-initialized: memory is computed from shapes and dtypes; there are no values.\n")
	}
	if sm.Lazy > 0 {
		w.printf("\n%d lazy parameters have no shape yet; they count zero until a forward materializes them.\n", sm.Lazy)
	}

	w.printf("\n## Memory by dtype\n\n")
	var dt [][]string
	for _, d := range sm.ByDType {
		dt = append(dt, []string{"`" + d.DType + "`", Comma(int64(d.Tensors)), Comma(d.Params), IEC(float64(d.Bytes))})
	}
	table(w, []string{"dtype", "Tensors", "Parameters", "Memory"}, "lrrr", dt)

	w.printf("\n## Module breakdown\n\nModules grouped by name with layer and expert indices replaced by `*`; tied tensors count at their first occurrence.\n\n")
	pats := s.Patterns
	more := 0
	if opt.MaxPatterns > 0 && len(pats) > opt.MaxPatterns {
		more, pats = len(pats)-opt.MaxPatterns, pats[:opt.MaxPatterns]
	}
	var pr [][]string
	for _, p := range pats {
		per := Comma(p.ParamsPerInstance)
		if !p.Uniform {
			per = "varies"
		}
		name := "`" + p.Pattern + "`"
		if p.Experts > 0 {
			name += fmt.Sprintf(" (%d experts fused)", p.Experts)
		}
		pr = append(pr, []string{name, Comma(int64(p.Instances)), per, Comma(p.TotalParams),
			fmt.Sprintf("%.2f%%", p.Percent), IEC(float64(p.Bytes)), "`" + p.Example + "`"})
	}
	table(w, []string{"Module Pattern", "Instances", "Params / Instance", "Total Params", "% Total", "Memory", "Example Module"}, "lrrrrrl", pr)
	if more > 0 {
		w.printf("\n… %d more patterns (`--all` lists them)\n", more)
	}

	w.printf("\n## Layer details\n\n")
	ts := s.Tensors
	more = 0
	if opt.MaxLayers > 0 && len(ts) > opt.MaxLayers {
		more, ts = len(ts)-opt.MaxLayers, ts[:opt.MaxLayers]
	}
	var lr [][]string
	for _, t := range ts {
		grad := "✗"
		if t.RequiresGrad {
			grad = "✓"
		}
		params, mem := Comma(t.Params), IEC(float64(t.Bytes))
		if t.TiedTo != "" {
			params, mem = "tied → `"+t.TiedTo+"`", "—"
		}
		lr = append(lr, []string{"`" + t.Name + "`", Shape(t.Shape), "`" + t.DType + "`", params, mem, grad})
	}
	table(w, []string{"Layer", "Shape", "dtype", "Params", "Memory", "Grad"}, "llcrrc", lr)
	if more > 0 {
		w.printf("\n… %d more tensors (`--all` lists them)\n", more)
	}

	w.printf("\n## Weight statistics\n\n")
	if !sm.HasStats {
		w.printf("Weight statistics are unavailable: this run's parameters have no values (meta-initialized or lazy).\n")
		return w.err
	}
	withStats := largestWithStats(s.Tensors, 0)
	limit := len(withStats)
	if opt.MaxStats > 0 && limit > opt.MaxStats {
		limit = opt.MaxStats
		w.printf("The %d largest tensors of %d with statistics.\n\n", limit, len(withStats))
	}
	var sr [][]string
	for _, t := range withStats[:limit] {
		st := t.Stats
		std := "—"
		if st.Std != nil {
			std = Sci(*st.Std)
		}
		sr = append(sr, []string{"`" + t.Name + "`", Sci(st.Mean), std, Sci(st.Min), Sci(st.Max), Comma(st.Nonfinite)})
	}
	table(w, []string{"Layer", "Mean", "Std", "Min", "Max", "Non-finite"}, "lrrrrr", sr)
	return w.err
}

func sourceDetail(r store.Run) string {
	var parts []string
	if r.ModelType != "" {
		parts = append(parts, "model_type `"+r.ModelType+"`")
	}
	if r.SourceFile != "" {
		parts = append(parts, "from `"+r.SourceFile+"`")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// WriteRuns renders the run history as a markdown table.
func WriteRuns(out io.Writer, runs []store.Run) error {
	w := &errWriter{w: out}
	if len(runs) == 0 {
		w.printf("No runs yet: `mrep ingest DUMP...` adds some.\n")
		return w.err
	}
	var rows [][]string
	for _, r := range runs {
		step := "—"
		if r.Step != nil {
			step = Comma(*r.Step)
		}
		rows = append(rows, []string{fmt.Sprint(r.ID), r.ModelName, orDash(r.Label), step, Comma(r.TotalParams),
			r.IngestedAt.UTC().Format("2006-01-02 15:04:05"), r.ShortHash()})
	}
	table(w, []string{"ID", "Model", "Label", "Step", "Params", "Ingested (UTC)", "Hash"}, "rllrrll", rows)
	return w.err
}

// WriteCheck renders `mrep check`: SQLite's verdict and each run's.
func WriteCheck(out io.Writer, integrity string, runs []store.CheckResult) error {
	w := &errWriter{w: out}
	w.printf("Database integrity check: %s (SQLite's integrity_check; on PostgreSQL, no rows left without their run)\n\n", integrity)
	var rows [][]string
	for _, r := range runs {
		state := "ok"
		switch {
		case !r.OK:
			state = "CORRUPT: " + r.Problem
		case r.Unverified:
			state = "ok (no checksum: ingested before mrep kept them)"
		}
		rows = append(rows, []string{fmt.Sprint(r.ID), code(r.Model), state})
	}
	if len(rows) > 0 {
		table(w, []string{"Run", "Model", "State"}, "rll", rows)
	}
	return w.err
}

// writeMeasured sets the hook's measured step beside mrep's prediction for the same scenario.
func writeMeasured(w *errWriter, c calib.Comparison) {
	m := c.Measured
	w.printf("\n## Measured vs predicted (training step)\n\n")
	tokens, seq := "—", "—"
	if m.TokensPerStep != nil {
		tokens = Comma(*m.TokensPerStep)
	}
	if m.SeqLen != nil {
		seq = Comma(*m.SeqLen)
	}
	w.printf("Measured by the training hook: median of %s optimizer steps on %d × `%s` in %s, %s tokens per step (sequence %s).\n\n",
		Comma(m.StepsTimed), m.WorldSize, m.Device, m.Precision, tokens, seq)
	rows := [][]string{{"Step time", Ms(m.StepTimeS) + " ms", orDashF(c.Predicted, func(v float64) string { return Ms(v) + " ms" }), orDashF(c.Roofline, func(v float64) string { return Ms(v) + " ms" })}}
	if c.TokensPerGPUs > 0 {
		pred := "—"
		if c.Predicted > 0 {
			pred = fmt.Sprintf("%.4g", c.TokensPerGPUs*m.StepTimeS/c.Predicted)
		}
		rows = append(rows, []string{"Tokens/s per GPU", fmt.Sprintf("%.4g", c.TokensPerGPUs), pred, "—"})
	}
	if c.MFUMeasured > 0 {
		rows = append(rows, []string{"MFU (6·N·tokens, dense peak)", fmt.Sprintf("%.1f%%", 100*c.MFUMeasured), fmt.Sprintf("%.1f%%", 100*c.MFUPredicted), "—"})
	}
	table(w, []string{"", "Measured", "Predicted (achievable)", "Roofline"}, "lrrr", rows)
	if c.Predicted > 0 {
		w.printf("\nPredicted on `%s` (chip from the %s): measured / predicted = %.2f.\n", c.Chip, c.ChipFrom, m.StepTimeS/c.Predicted)
	}
	if c.Note != "" {
		w.printf("\n%s\n", c.Note)
	}
}

func orDashF(v float64, f func(float64) string) string {
	if v <= 0 {
		return "—"
	}
	return f(v)
}
