package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/store"
)

func checkCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "verify the database: its structure (SQLite's integrity check; on PostgreSQL, rows without their run) and every run's rows against their checksum",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "machine-readable output"}},
		Action: func(c *cli.Context) error {
			db, err := openDBRead(c, env)
			if err != nil {
				return err
			}
			defer db.Close()
			integrity, runs, err := db.Check(c.Context)
			if err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			bad := 0
			for _, r := range runs {
				if !r.OK {
					bad++
				}
			}
			if c.Bool("json") {
				if err := writeJSON(c.App.Writer, struct {
					Integrity string              `json:"integrity_check"`
					Runs      []store.CheckResult `json:"runs"`
				}{integrity, runs}); err != nil {
					return err
				}
			} else if err := render.WriteCheck(c.App.Writer, integrity, runs); err != nil {
				return err
			}
			if integrity != "ok" || bad > 0 {
				return cli.Exit(fmt.Sprintf("check: %d of %d runs corrupt; database integrity check: %s", bad, len(runs), render.Visible(integrity)), exitFailure)
			}
			return nil
		},
	}
}
