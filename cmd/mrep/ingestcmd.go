package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/load"
	"github.com/mrep-dev/mrep/render"
)

// reportIngest prints what was stored (or writes it as JSON) and the verdict on rejected files.
func reportIngest(ctx context.Context, c *cli.Context, env Env, done []load.Stored, bads []string, total int) error {
	var report []ingestResult
	if len(done) > 0 {
		db, err := openDBRead(c, env)
		if err != nil {
			return err
		}
		defer db.Close()
		for _, s := range done {
			run, err := db.Run(ctx, s.Got.ID)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				report = append(report, ingestResult{Path: s.Path, ID: run.ID, Created: s.Got.Created, Model: run.ModelName, Label: run.Label, Step: run.Step})
				continue
			}
			if s.Got.Created {
				fmt.Fprintf(c.App.Writer, "ingested %s as run %d (%s)\n", render.Visible(s.Path), run.ID, describe(run))
			} else {
				fmt.Fprintf(c.App.Writer, "%s: already ingested as run %d (%s)\n", render.Visible(s.Path), run.ID, describe(run))
			}
		}
	}
	if c.Bool("json") {
		for _, b := range bads {
			report = append(report, ingestResult{Path: b, Error: "rejected (see stderr)"})
		}
		if err := writeJSON(c.App.Writer, report); err != nil {
			return err
		}
	}
	if len(bads) > 0 {
		return cli.Exit(fmt.Sprintf("ingest: %d of %d dumps rejected: %s", len(bads), total, render.Visible(strings.Join(bads, ", "))), exitFailure)
	}
	return nil
}
