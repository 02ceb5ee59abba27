package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

func rmCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:      "rm",
		Usage:     "remove runs",
		ArgsUsage: "RUN...",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "machine-readable output: the runs removed"}},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("rm: name at least one run", exitFailure)
			}
			db, err := openDBWrite(c, env)
			if err != nil {
				return err
			}
			defer db.Close()
			// Resolve every selector first: one that names no run removes nothing, and two
			// selectors of one run ("rm latest latest") remove it once.
			var ids []int64
			seen := map[int64]bool{}
			for _, sel := range c.Args().Slice() {
				id, err := resolve(c.Context, db, sel)
				if err != nil {
					return err
				}
				if !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
			type removed struct {
				ID    int64   `json:"id"`
				Model string  `json:"model"`
				Label *string `json:"label,omitempty"`
				Step  *int64  `json:"step,omitempty"`
			}
			var done []removed
			for _, id := range ids {
				run, err := db.Run(c.Context, id)
				if err != nil {
					return err
				}
				if err := db.DeleteRun(c.Context, id); err != nil {
					return err
				}
				done = append(done, removed{id, run.ModelName, run.Label, run.Step})
				if !c.Bool("json") {
					fmt.Fprintf(c.App.Writer, "removed run %d (%s)\n", id, describe(run))
				}
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, done)
			}
			return nil
		},
	}
}
