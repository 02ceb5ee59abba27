package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/compare"
	"github.com/mrep-dev/mrep/internal/output"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/store"
)

// runInfo names a stored run; report.go names its run the same way.
var runInfo = compare.RunInfo

// comparison is the scenario flags and the --set overrides as compare's inputs.
func comparison(c *cli.Context, o scenarioOptions) compare.Scenario {
	sets := runSets(c)
	return compare.Scenario{Scenario: o.scenario, Targets: o.targets, Profiles: o.profiles, Sets: sets.String(), Apply: sets.apply}
}

// noData makes a metric the runs cannot give a user's error (exit 1); other errors pass.
func noData(err error) error {
	if errors.Is(err, compare.ErrNoData) {
		return cli.Exit(err.Error(), exitFailure)
	}
	return err
}

func diffCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "compare two runs: config, parameters, the performance model and (checkpoints) weight drift; or two measured results (DIGEST#RECORD, as validate --from-history names them): which part of the step moved",
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
			if measuredRef.MatchString(c.Args().Get(0)) && measuredRef.MatchString(c.Args().Get(1)) {
				return measuredDiff(c, c.Args().Get(0), c.Args().Get(1))
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
			opts := compare.RunsOptions{Scenario: comparison(c, o)}
			for i, sel := range c.Args().Slice() {
				if opts.Runs[i], opts.Dumps[i], err = loadRun(c.Context, db, sel, runSets(c)); err != nil {
					return err
				}
			}
			d, err := compare.Runs(c.Context, db, opts)
			if err != nil {
				return err
			}
			if dir := c.String("output"); dir != "" {
				files := output.Files{}
				chartName := ""
				if len(d.Drift) > 0 {
					chartName = "weight_drift.png"
					if err := files.Add(chartName, func(w io.Writer) error {
						return render.RenderPNG(render.DriftChart(driftTitle(d.RunA, d.RunB), d.Drift, 20), w)
					}); err != nil {
						return cli.Exit("diff chart: "+err.Error(), exitFailure)
					}
				}
				if err := files.Add("diff.json", func(w io.Writer) error { return writeJSON(w, d) }); err != nil {
					return err
				}
				if err := files.Add("diff.md", func(w io.Writer) error { return render.WriteDiff(w, d, chartName) }); err != nil {
					return err
				}
				if err := output.WriteDir(dir, files); err != nil {
					return cli.Exit("diff: "+err.Error(), exitFailure)
				}
				fmt.Fprintf(c.App.Writer, "wrote %s\n", filepath.Join(dir, "diff.md"))
				return nil
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, d)
			}
			return render.WriteDiff(c.App.Writer, d, "")
		},
	}
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
	return withRun(c, env, func(db *store.DB, run store.Run, d *model.Dump) error {
		dd, err := compare.Scenarios(c.Context, db, compare.ScenariosOptions{Run: run, Dump: d, A: comparison(c, oa), B: comparison(c, ob),
			FlagsA: c.String("scenario-a"), FlagsB: c.String("scenario-b")})
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return writeJSON(c.App.Writer, dd)
		}
		return render.WriteDiff(c.App.Writer, dd, "")
	})
}

// driftTitle names the two checkpoints the drift chart compares: run, label and step.
func driftTitle(a, b analyzer.RunInfo) string {
	side := func(r analyzer.RunInfo) string {
		s := fmt.Sprintf("run %d", r.ID)
		if r.Label != "" {
			s += " " + r.Label
		}
		if r.Step != nil {
			s += fmt.Sprintf(" step %d", *r.Step)
		}
		return s
	}
	return render.Visible(fmt.Sprintf("Weight drift of %s, %s -> %s: top movers (numbered as in the table)", a.Name, side(a), side(b)))
}
