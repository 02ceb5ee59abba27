package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/calib"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/store"
)

func showCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "parameter summary, memory by dtype, pattern-grouped modules, layer details and weight statistics of a run",
		ArgsUsage: "[RUN]  (id, hash prefix, latest, MODEL@LABEL or MODEL; default latest)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
			&cli.BoolFlag{Name: "all", Usage: "list every pattern and tensor"},
			&cli.IntFlag{Name: "stats", Value: 20, Usage: "weight statistics for the N largest tensors"},
			&cli.StringFlag{Name: "chip", Usage: "chip to predict a measured training step on (default: the one the measured device names)"},
		},
		Action: func(c *cli.Context) error {
			if ref := c.Args().First(); measuredRef.MatchString(ref) {
				return showMeasured(c, ref)
			}
			return withRun(c, env, func(_ *store.DB, run store.Run, d *model.Dump) error {
				view := render.Show{Run: run, Summary: analyzer.Summarize(d), Patterns: analyzer.Breakdown(d), Tensors: analyzer.Tensors(d)}
				if d.Measurement != nil {
					cdb, err := chipDB(c)
					if err != nil {
						return err
					}
					cmp := calib.Compare(fmt.Sprintf("id:%d", run.ID), d, cdb, c.String("chip"))
					view.Measured = &cmp
				}
				if c.Bool("json") {
					return writeJSON(c.App.Writer, view)
				}
				opt := render.ShowOptions{MaxPatterns: 25, MaxLayers: 40, MaxStats: c.Int("stats")}
				if c.Bool("all") {
					opt.MaxPatterns, opt.MaxLayers = 0, 0
				}
				return render.WriteShow(c.App.Writer, view, opt)
			})
		},
	}
}
