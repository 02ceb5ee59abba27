package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/calib"
	"github.com/mrep-dev/mrep/compare"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/store"
)

// scenarioKey is the cache key of an analysis: the scenario, and the --set overrides, which
// change what the analyzer reads.
func scenarioKey(ctx context.Context, o scenarioOptions) string {
	key := compare.ScenarioKey(o.scenario, o.targets, o.profiles)
	if s := setsFrom(ctx).String(); s != "" {
		key += " set " + s
	}
	return key
}

// metricsFor returns a run's analysis metrics for the scenario, from the cache when an entry
// for (run, scenario, analyzer version) exists, else computed and cached.
func metricsFor(ctx context.Context, db *store.DB, id int64, o scenarioOptions, d *model.Dump) (compare.RunMetrics, error) {
	key := scenarioKey(ctx, o)
	if b, ok, err := db.CachedResult(ctx, id, key, analyzer.Version); err != nil {
		return compare.RunMetrics{}, err
	} else if ok {
		var m compare.RunMetrics
		// entries cached before the phases carried their terms are recomputed (diff's "why")
		if err := json.Unmarshal(b, &m); err == nil && (len(m.Phases) == 0 || m.Phases[0].Terms != nil) {
			return m, nil
		}
		// an unreadable entry is recomputed and replaced below
	}
	if d == nil {
		var err error
		if d, err = db.LoadDump(ctx, id); err != nil {
			return compare.RunMetrics{}, err
		}
		setsFrom(ctx).apply(d)
	}
	a, err := analyzer.Run(analyzer.NewModel(d), o.scenario, o.targets, o.profiles, analyzer.Phases)
	if err != nil {
		return compare.RunMetrics{}, err
	}
	m := compare.Metrics(a)
	b, err := json.Marshal(m)
	if err != nil {
		return m, err
	}
	if err := db.PutResult(ctx, id, key, analyzer.Version, b); err != nil && !errors.Is(err, store.ErrReadOnly) {
		return m, err
	}
	return m, nil
}

func runInfo(r store.Run) analyzer.RunInfo {
	info := analyzer.RunInfo{ID: r.ID, Name: r.ModelName, Step: r.Step, Hash: r.ContentHash}
	if r.Label != nil {
		info.Label = *r.Label
	}
	return info
}

func diffCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "compare two runs: config, parameters, the performance model and (checkpoints) weight drift",
		ArgsUsage: "RUN_A RUN_B",
		Flags: append(scenarioFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write diff.md, diff.json and the drift chart to `DIR`"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
			&cli.StringFlag{Name: "scenario-a", Aliases: []string{"sa"}, Usage: "with --scenario-b and one RUN: scenario A as analyze flags, e.g. \"--chip H100 --dtype bf16\""},
			&cli.StringFlag{Name: "scenario-b", Aliases: []string{"sb"}, Usage: "with --scenario-a: scenario B, e.g. \"--chip H200 --dtype fp8\""},
		),
		Action: func(c *cli.Context) error {
			if c.IsSet("scenario-a") || c.IsSet("scenario-b") {
				return scenarioDiff(c, env)
			}
			if c.NArg() != 2 {
				return cli.Exit("diff: give two runs (RUN_A RUN_B), or one run with --scenario-a and --scenario-b", exitFailure)
			}
			o, err := readScenario(c)
			if err != nil {
				return err
			}
			db, err := openDBRead(c, env)
			if err != nil {
				return err
			}
			defer db.Close()
			var runs [2]store.Run
			var dumps [2]*model.Dump
			var metrics [2]compare.RunMetrics
			for i, sel := range c.Args().Slice() {
				if runs[i], dumps[i], err = loadRun(c.Context, db, sel); err != nil {
					return err
				}
				if metrics[i], err = metricsFor(c.Context, db, runs[i].ID, o, dumps[i]); err != nil {
					return err
				}
			}
			ma, mb := analyzer.NewModel(dumps[0]), analyzer.NewModel(dumps[1])
			cats, pats := compare.ParamDeltas(dumps[0], dumps[1], ma, mb)
			d := render.DiffData{RunA: runInfo(runs[0]), RunB: runInfo(runs[1]),
				Config: compare.ConfigDiff(dumps[0].Config, dumps[1].Config), Categories: cats, Patterns: pats,
				MetricsA: metrics[0], MetricsB: metrics[1]}
			switch {
			case !compare.SameArchitecture(dumps[0], dumps[1]):
				d.DriftNote = "Weight drift is compared only between runs of the same architecture (checkpoints); these module trees differ."
			case !runs[0].HasStats || !runs[1].HasStats:
				d.DriftNote = "Weight drift needs real weight statistics in both runs; at least one was dumped without values (meta device)."
			default:
				stats, err := db.TensorStats(c.Context, []int64{runs[0].ID, runs[1].ID})
				if err != nil {
					return err
				}
				d.Drift = compare.WeightDrift(stats[runs[0].ID], stats[runs[1].ID])
			}
			d.Why = render.DiffWhy(d)
			if dir := c.String("output"); dir != "" {
				files := outputFiles{}
				if len(d.Drift) > 0 {
					d.ChartName = "weight_drift.png"
					if err := files.add(d.ChartName, func(w io.Writer) error {
						return render.RenderPNG(render.DriftChart(fmt.Sprintf("Weight drift, run %d -> %d: top movers", runs[0].ID, runs[1].ID), d.Drift, 20), w)
					}); err != nil {
						return cli.Exit("diff chart: "+err.Error(), exitFailure)
					}
				}
				if err := files.add("diff.json", func(w io.Writer) error { return writeJSON(w, d) }); err != nil {
					return err
				}
				if err := files.add("diff.md", func(w io.Writer) error { return render.WriteDiff(w, d) }); err != nil {
					return err
				}
				if err := writeDirAtomic(dir, files); err != nil {
					return cli.Exit("diff: "+err.Error(), exitFailure)
				}
				fmt.Fprintf(c.App.Writer, "wrote %s\n", filepath.Join(dir, "diff.md"))
				return nil
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, d)
			}
			return render.WriteDiff(c.App.Writer, d)
		},
	}
}

func historyCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:      "history",
		Usage:     "one metric across runs, ordered by training step (or ingestion time)",
		ArgsUsage: "[MODEL | MODEL@LABEL]  (default: the latest run's model and label)",
		Flags: append(scenarioFlags(),
			&cli.StringFlag{Name: "metric", Value: "params", Usage: "one of " + compare.MetricNames},
			&cli.StringFlag{Name: "by", Value: "step", Usage: "order by step or time"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write history.md, history.json and a line chart to `DIR`"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
		),
		Action: func(c *cli.Context) error {
			metric := c.String("metric")
			kind, args, err := compare.ParseMetric(metric)
			if err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			by := c.String("by")
			if by != "step" && by != "time" {
				return cli.Exit(fmt.Sprintf("--by %q: want step or time", by), exitFailure)
			}
			o, err := readScenario(c)
			if err != nil {
				return err
			}
			db, err := openDBRead(c, env)
			if err != nil {
				return err
			}
			defer db.Close()
			f, err := historyFilter(c, db)
			if err != nil {
				return err
			}
			runs, err := db.ListRuns(c.Context, f)
			if err != nil {
				return err
			}
			if len(runs) == 0 {
				return cli.Exit(fmt.Sprintf("history: no runs of %s", describeFilter(f)), exitFailure)
			}
			if by == "step" {
				sort.SliceStable(runs, func(i, j int) bool {
					si, sj := runs[i].Step, runs[j].Step
					switch {
					case si == nil && sj == nil:
						return runs[i].ID < runs[j].ID
					case si == nil:
						return false
					case sj == nil:
						return true
					}
					return *si < *sj
				})
			}
			// runs of different labels are different training runs: one series per label (in
			// the order their first run was ingested), each with its own drift baseline
			runs = groupByLabel(runs)
			pts, err := historyPoints(c.Context, db, runs, kind, args, o, by)
			if err != nil {
				return err
			}
			xLabel := "training step"
			if by == "time" || pts[0].Run.Step == nil {
				xLabel = "run order"
			}
			if dir := c.String("output"); dir != "" {
				files := outputFiles{}
				for name, fn := range map[string]func(io.Writer) error{
					"history.png":  func(w io.Writer) error { return render.RenderPNG(render.HistoryChart(metric, xLabel, pts), w) },
					"history.json": func(w io.Writer) error { return writeJSON(w, pts) },
					"history.md":   func(w io.Writer) error { return render.WriteHistory(w, metric, xLabel, pts, "history.png") },
				} {
					if err := files.add(name, fn); err != nil {
						return cli.Exit("history: "+err.Error(), exitFailure)
					}
				}
				if err := writeDirAtomic(dir, files); err != nil {
					return cli.Exit("history: "+err.Error(), exitFailure)
				}
				fmt.Fprintf(c.App.Writer, "wrote %s\n", filepath.Join(dir, "history.md"))
				return nil
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, pts)
			}
			return render.WriteHistory(c.App.Writer, metric, xLabel, pts, "")
		},
	}
}

func historyFilter(c *cli.Context, db *store.DB) (store.Filter, error) {
	sel := c.Args().First()
	if sel == "" {
		id, err := resolve(c.Context, db, "latest")
		if err != nil {
			return store.Filter{}, err
		}
		r, err := db.Run(c.Context, id)
		if err != nil {
			return store.Filter{}, err
		}
		f := store.Filter{Model: r.ModelName}
		if r.Label != nil {
			f.Label = *r.Label
		}
		return f, nil
	}
	name, label, _ := strings.Cut(sel, "@")
	return store.Filter{Model: name, Label: label}, nil
}

func labelOf(r store.Run) string {
	if r.Label == nil {
		return ""
	}
	return *r.Label
}

// groupByLabel orders runs label by label (labels in order of their first run), keeping the
// order within a label.
func groupByLabel(runs []store.Run) []store.Run {
	first := map[string]int{}
	for i, r := range runs {
		if _, ok := first[labelOf(r)]; !ok {
			first[labelOf(r)] = i
		}
	}
	out := append([]store.Run(nil), runs...)
	sort.SliceStable(out, func(i, j int) bool { return first[labelOf(out[i])] < first[labelOf(out[j])] })
	return out
}

func describeFilter(f store.Filter) string {
	if f.Label != "" {
		return f.Model + "@" + f.Label
	}
	return f.Model
}

// historyPoints evaluates the metric for each run: counts from the run rows, performance
// metrics through the analysis cache, weight statistics straight from the tensors table.
func historyPoints(ctx context.Context, db *store.DB, runs []store.Run, kind string, args []string, o scenarioOptions, by string) ([]render.HistoryPoint, error) {
	pts := make([]render.HistoryPoint, len(runs))
	for i, r := range runs {
		pts[i] = render.HistoryPoint{Run: runInfo(r), X: float64(i)}
		if by == "step" && r.Step != nil {
			pts[i].X = float64(*r.Step)
		}
	}
	switch kind {
	case "params":
		for i, r := range runs {
			pts[i].Value = float64(r.TotalParams)
		}
		return pts, nil
	case "trainable_params":
		for i, r := range runs {
			pts[i].Value = float64(r.TrainableParams)
		}
		return pts, nil
	case "step_time", "mfu_measured":
		// the training hook's measurement beside mrep's prediction for the same scenario
		// checkpoints without a measurement (the one at step 0, dumps not from the hook) have
		// no point
		var kept []render.HistoryPoint
		for i, r := range runs {
			d, err := db.LoadDump(ctx, r.ID)
			if err != nil {
				return nil, err
			}
			if d.Measurement == nil {
				continue
			}
			cmp := calib.Compare(fmt.Sprintf("id:%d", r.ID), d, o.chips, o.chip)
			if kind == "step_time" {
				pts[i].Value, pts[i].Predicted = cmp.Measured.StepTimeS*1e3, cmp.Predicted*1e3
			} else {
				pts[i].Value, pts[i].Predicted = 100*cmp.MFUMeasured, 100*cmp.MFUPredicted
			}
			kept = append(kept, pts[i])
		}
		if len(kept) == 0 {
			return nil, cli.Exit("history: none of these runs carries a measurement (checkpoints dumped by the training hook do, after their first step)", exitFailure)
		}
		return kept, nil
	case "drift", "std", "mean":
		ids := make([]int64, len(runs))
		for i, r := range runs {
			ids[i] = r.ID
		}
		stats, err := db.TensorStats(ctx, ids)
		if err != nil {
			return nil, err
		}
		pattern := ""
		if len(args) > 0 {
			pattern = args[0]
		}
		var base []model.TensorStat
		for i, r := range runs {
			if i == 0 || labelOf(r) != labelOf(runs[i-1]) { // each label's first run is its baseline
				base = stats[r.ID]
				if len(base) == 0 && kind == "drift" {
					return nil, cli.Exit(fmt.Sprintf("history: run %d has no weight statistics (dumped on the meta device?)", r.ID), exitFailure)
				}
			}
			switch kind {
			case "drift":
				pts[i].Value, _ = compare.PatternDrift(compare.WeightDrift(base, stats[r.ID]), pattern)
			default:
				pts[i].Value = meanStat(stats[r.ID], pattern, kind)
			}
		}
		return pts, nil
	}
	// performance metrics: cached per (run, scenario, analyzer version)
	ids := make([]int64, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	key := scenarioKey(ctx, o)
	cached, err := db.CachedResults(ctx, ids, key, analyzer.Version)
	if err != nil {
		return nil, err
	}
	profile := o.profiles[len(o.profiles)-1].Name
	if kind != "active_params" && kind != "kv_bytes_per_token" && len(args) > 1 {
		profile = args[1]
	}
	target := o.targets[0].Label()
	for i, r := range runs {
		var m compare.RunMetrics
		b, ok := cached[r.ID]
		if !ok || json.Unmarshal(b, &m) != nil {
			if m, err = metricsFor(ctx, db, r.ID, o, nil); err != nil {
				return nil, err
			}
		}
		switch kind {
		case "active_params":
			pts[i].Value = m.Active
		case "kv_bytes_per_token":
			pts[i].Value = m.KVBytesPerTok
		default:
			v, ok := compare.PhaseValue(m, kind, target, analyzer.Phase(args[0]), profile)
			if !ok {
				return nil, cli.Exit(fmt.Sprintf("history: no %s/%s result for %s (profiles: --exec)", args[0], profile, target), exitFailure)
			}
			pts[i].Value = v
		}
	}
	return pts, nil
}

// meanStat is the numel-weighted mean of a statistic over tensors matching a pattern.
func meanStat(stats []model.TensorStat, pattern, kind string) float64 {
	var sum, n float64
	for _, s := range stats {
		if !compare.MatchPattern(pattern, s.Name) {
			continue
		}
		v := s.Mean
		if kind == "std" {
			v = s.Std
		}
		sum += v * float64(s.Numel)
		n += float64(s.Numel)
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

// scenarioFlagsFrom reads one side of a scenario diff: a string of analyze flags.
func scenarioFlagsFrom(c *cli.Context, side, flags string) (scenarioOptions, error) {
	var o scenarioOptions
	var err error
	app := &cli.App{Name: "--" + side, Flags: append(scenarioFlags(), &cli.StringFlag{Name: "chips-file"}),
		HideHelp: true, Writer: io.Discard, ErrWriter: io.Discard,
		Action: func(sc *cli.Context) error {
			if sc.NArg() > 0 {
				return fmt.Errorf("unexpected %q", sc.Args().Slice())
			}
			o, err = readScenario(sc)
			return err
		}}
	args := append([]string{"--" + side}, strings.Fields(flags)...)
	if cf := c.String("chips-file"); cf != "" {
		args = append(args, "--chips-file", cf)
	}
	if runErr := app.Run(args); runErr != nil {
		return o, cli.Exit(fmt.Sprintf("diff --%s %q: %v", side, flags, runErr), exitUsage)
	}
	return o, nil
}

// scenarioDiff compares one run under two scenarios: which terms move its time.
func scenarioDiff(c *cli.Context, env Env) error {
	if !c.IsSet("scenario-a") || !c.IsSet("scenario-b") || c.NArg() != 1 {
		return cli.Exit("diff: a scenario diff takes one RUN and both --scenario-a and --scenario-b", exitUsage)
	}
	oa, err := scenarioFlagsFrom(c, "scenario-a", c.String("scenario-a"))
	if err != nil {
		return err
	}
	ob, err := scenarioFlagsFrom(c, "scenario-b", c.String("scenario-b"))
	if err != nil {
		return err
	}
	if len(oa.targets) != len(ob.targets) || len(oa.profiles) != len(ob.profiles) {
		return cli.Exit("diff: --scenario-a and --scenario-b must name as many chips and exec profiles (they are compared in order)", exitUsage)
	}
	db, err := openDBRead(c, env)
	if err != nil {
		return err
	}
	defer db.Close()
	run, d, err := loadRun(c.Context, db, c.Args().First())
	if err != nil {
		return err
	}
	ma, err := metricsFor(c.Context, db, run.ID, oa, d)
	if err != nil {
		return err
	}
	mb, err := metricsFor(c.Context, db, run.ID, ob, d)
	if err != nil {
		return err
	}
	dd := render.DiffData{RunA: runInfo(run), RunB: runInfo(run), MetricsA: ma, MetricsB: mb,
		ScenarioA: strings.Join(strings.Fields(c.String("scenario-a")), " "), ScenarioB: strings.Join(strings.Fields(c.String("scenario-b")), " ")}
	dd.Why = render.DiffWhy(dd)
	if c.Bool("json") {
		return writeJSON(c.App.Writer, dd)
	}
	return render.WriteDiff(c.App.Writer, dd)
}
