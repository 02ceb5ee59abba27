package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/layout"
	"github.com/mrep-dev/mrep/render"
)

// layoutResults times the scenario's training layout, if any, on every target.
func layoutResults(m *analyzer.Model, o scenarioOptions) ([]render.LayoutResult, error) {
	if o.layout == nil {
		return nil, nil
	}
	var out []render.LayoutResult
	for _, t := range o.targets {
		tr, err := layout.TrainerFor(m, o.scenario, t)
		if err != nil {
			return nil, cli.Exit(err.Error(), exitFailure)
		}
		st, err := tr.Train(*o.layout)
		if err != nil {
			return nil, cli.Exit("layout: "+err.Error(), exitFailure)
		}
		f := layout.CheckTraining("training", layout.TrainingMemory(m, *o.layout), t.Chip.MemoryBytes())
		r := render.LayoutResult{Target: t.Label(), Step: st, Fit: f, HostRemedy: layout.HostRemedy(t.Chip.Vendor),
			FP8AttentionUnmeasured: o.layout.FP8AttentionUnmeasured(t.Chip.Efficiency.Lane(o.layout.Framework))}
		if o.layout.LegacyExperts16() {
			te := *o.layout
			te.GroupedGEMM = layout.GroupedTE
			if q, err := tr.Train(te); err == nil {
				r.QuantizedExpertsStep = q.StepTime
			}
		}
		if st.HostBound > 0 {
			launch, n := tr.HostPace(*o.layout)
			r.HostPaceUs, r.MoELaunches = launch*1e6, n
		}
		if !f.Fits {
			// a step time under a layout that cannot run is no answer: name what would fit
			sv, alt, ok, err := tr.FastestFitting(*o.layout, t.Chip.MemoryBytes())
			if err != nil {
				return nil, cli.Exit("layout: "+err.Error(), exitFailure)
			}
			if ok {
				r.FitsWith = &render.Alternative{Saver: sv, Step: alt, Fit: layout.CheckTraining("training", layout.TrainingMemory(m, sv.Layout), t.Chip.MemoryBytes())}
			}
		}
		if m.FineTune != nil {
			r.FineTune = m.FineTune.Kind()
		}
		out = append(out, r)
	}
	return out, nil
}

// memoryFits is one memory verdict per target: the training layout's when one is given (its
// line leads the analysis, so nothing here), otherwise the scenario served as analysed (weights,
// the KV cache of B sequences of L tokens, a prefill step's activations).
func memoryFits(m *analyzer.Model, o scenarioOptions) []layout.Fit {
	if o.layout != nil {
		return nil
	}
	s := o.scenario
	what := fmt.Sprintf("inference (B=%d, S=%d, L=%d)", s.Batch, s.Seq, s.KVLen)
	var out []layout.Fit
	for _, t := range o.targets {
		out = append(out, layout.Check(what, layout.InferenceMemory(m, s, 1, 0), t.Chip.MemoryBytes()))
	}
	return out
}

func analyzeCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:      "analyze",
		Usage:     "FLOPs, bytes and time of training, prefill and decode on chip targets",
		ArgsUsage: "[MODEL]  (a zoo name from `mrep models`, a dump or config.json file, or a stored run; default: the latest run)",
		Flags: append(scenarioFlags(),
			&cli.StringSliceFlag{Name: "phase", Value: cli.NewStringSlice("training", "prefill", "decode"), Usage: "phases to analyze"},
			&cli.Int64SliceFlag{Name: "cached-tokens", Usage: "per-query KV-cache lengths for the per-operator table (with --input-tokens)"},
			&cli.Int64SliceFlag{Name: "input-tokens", Usage: "per-query new tokens for the per-operator table"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
		),
		Action: func(c *cli.Context) error {
			o, err := readScenario(c)
			if err != nil {
				return err
			}
			var phases []analyzer.Phase
			for _, p := range c.StringSlice("phase") {
				ph := analyzer.Phase(p)
				if ph != analyzer.Training && ph != analyzer.Prefill && ph != analyzer.Decode {
					return cli.Exit(fmt.Sprintf("--phase %q: want training, prefill or decode", p), exitFailure)
				}
				phases = append(phases, ph)
			}
			cached, input := c.Int64Slice("cached-tokens"), c.Int64Slice("input-tokens")
			if len(cached) != len(input) {
				return cli.Exit(fmt.Sprintf("--cached-tokens has %d values and --input-tokens %d: give one of each per query", len(cached), len(input)), exitFailure)
			}
			// -b B repeats the query pattern B times
			qs, kvLen, err := analyzer.Queries(cached, input, o.scenario.Batch)
			if err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			if len(qs) > 0 {
				o.scenario.Batch, o.scenario.KVLen = int64(len(qs)), kvLen
			}
			d, err := loadArgRun(c, env)
			if err != nil {
				return err
			}
			m, err := trainingModel(c, analyzer.NewModel(d))
			if err != nil {
				return err
			}
			if o.scenario.EP > 1 && m.Fingerprint.MoE == nil && m.Fingerprint.Layers > 0 {
				// an expert-parallel degree on a dense model divides nothing: refused, not printed
				return cli.Exit(fmt.Sprintf("--ep %d: ep %d splits experts, and the model is dense (%s has no routed experts)", o.scenario.EP, o.scenario.EP, render.Visible(d.Model.Name)), exitUsage)
			}
			a, err := analyzer.Run(m, o.scenario, o.targets, o.profiles, phases)
			if err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			var ops *analyzer.OperatorTable
			if len(qs) > 0 {
				t, err := m.Operators(qs, o.scenario.WeightBytes, o.scenario.ActBytes, o.scenario.KVBytes)
				if err != nil {
					return cli.Exit(err.Error(), exitFailure)
				}
				ops = &t
			}
			laid, err := layoutResults(m, o)
			if err != nil {
				return err
			}
			fits := memoryFits(m, o)
			trace, err := analyzer.TraceCheck(d, 3)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, struct {
					Analysis  analyzer.Analysis       `json:"analysis"`
					Layouts   []render.LayoutResult   `json:"training_layout,omitempty"`
					Memory    []layout.Fit            `json:"memory,omitempty"`
					Operators *analyzer.OperatorTable `json:"operators,omitempty"`
					Trace     []analyzer.TraceRow     `json:"trace_check,omitempty"`
				}{a, laid, fits, ops, trace})
			}
			if err := render.WriteAnalysis(c.App.Writer, a, ops, laid, fits); err != nil {
				return err
			}
			if render.NotATransformer(m.Fingerprint) {
				if d.Trace == nil {
					return nil
				}
				return render.WriteTracedFLOPs(c.App.Writer, d.Trace)
			}
			return render.WriteTraceCheck(c.App.Writer, d.Trace, trace)
		},
	}
}
