package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/compare"
	"github.com/mrep-dev/mrep/internal/output"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/store"
)

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
			if _, _, err := compare.ParseMetric(metric); err != nil {
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
			h, err := compare.RunHistory(c.Context, db, compare.HistoryOptions{Filter: f, Metric: metric, By: by,
				Scenario: comparison(c, o), Chips: o.chips, Chip: o.chip})
			if err != nil {
				return noData(err)
			}
			if dir := c.String("output"); dir != "" {
				files := output.Files{}
				for name, fn := range map[string]func(io.Writer) error{
					"history.png":  func(w io.Writer) error { return render.RenderPNG(render.HistoryChart(h), w) },
					"history.json": func(w io.Writer) error { return writeJSON(w, h.Points) },
					"history.md":   func(w io.Writer) error { return render.WriteHistory(w, h, "history.png") },
				} {
					if err := files.Add(name, fn); err != nil {
						return cli.Exit("history: "+err.Error(), exitFailure)
					}
				}
				if err := output.WriteDir(dir, files); err != nil {
					return cli.Exit("history: "+err.Error(), exitFailure)
				}
				fmt.Fprintf(c.App.Writer, "wrote %s\n", filepath.Join(dir, "history.md"))
				return nil
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, h.Points)
			}
			if err := render.WriteHistory(c.App.Writer, h, ""); err != nil {
				return err
			}
			// what was measured with the users' own tools sits beside the runs' history
			if rs, err := db.Results(c.Context); err == nil && len(rs) > 0 {
				fmt.Fprintf(c.App.Writer, "\nThe history also holds %d measured runs (benchmark results, training logs): `mrep validate --from-history` sets each figure beside mrep's prediction, `mrep show DIGEST#RECORD` one run, `mrep diff A B` two.\n", len(rs))
			}
			return nil
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
