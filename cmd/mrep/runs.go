package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/store"
)

func describe(r store.Run) string {
	s := r.ModelName
	if r.Label != nil {
		s += "@" + *r.Label
	}
	if r.Step != nil {
		s += fmt.Sprintf(", step %d", *r.Step)
	}
	return render.Visible(s) + ", " + render.Comma(r.TotalParams) + " params"
}

func runsCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "list the history of ingested runs",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "only runs of this model name"},
			&cli.StringFlag{Name: "label", Usage: "only runs with this label"},
			&cli.IntFlag{Name: "limit", Usage: "only the newest N runs"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
		},
		Action: func(c *cli.Context) error {
			db, err := openDBRead(c, env)
			if err != nil {
				return err
			}
			defer db.Close()
			runs, err := db.ListRuns(c.Context, store.Filter{Model: c.String("model"), Label: c.String("label"), Limit: c.Int("limit")})
			if err != nil {
				return err
			}
			if c.Bool("json") {
				if runs == nil {
					runs = []store.Run{}
				}
				return writeJSON(c.App.Writer, runs)
			}
			return render.WriteRuns(c.App.Writer, runs)
		},
	}
}
