package main

import (
	"fmt"

	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/store"
	"github.com/urfave/cli/v2"
)

func copyCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:      "copy",
		Usage:     "copy runs between histories (a laptop's SQLite file into the team's PostgreSQL, or back), checksums verified on both sides; runs already there are skipped",
		ArgsUsage: "[RUN...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "the history to copy from: a SQLite `FILE` or a postgres:// URL (default: --db)"},
			&cli.StringFlag{Name: "to", Usage: "the history to copy into, created if it is new: a SQLite `FILE` or a postgres:// URL (default: --db)"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output: each run's id in both histories"},
		},
		Action: func(c *cli.Context) error {
			from, to := c.String("from"), c.String("to")
			if from == "" {
				from = c.String("db")
			}
			if to == "" {
				to = c.String("db")
			}
			if from == to {
				return cli.Exit(fmt.Sprintf("copy: --from and --to are both %s; give the other history", render.Visible(store.Redact(from))), exitUsage)
			}
			if err := refuseReadOnly(c); err != nil {
				return err
			}
			src, err := store.Open(c.Context, from, store.Options{Now: env.Now, Existing: true, ReadOnly: true})
			if err != nil {
				return cli.Exit("copy: "+render.Visible(err.Error()), exitFailure)
			}
			defer src.Close()
			var ids []int64
			seen := map[int64]bool{}
			for _, sel := range c.Args().Slice() {
				id, err := resolve(c.Context, src, sel)
				if err != nil {
					return err
				}
				if !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
			dst, err := store.Open(c.Context, to, store.Options{Now: env.Now, Who: env.who()})
			if err != nil {
				return cli.Exit("copy: "+render.Visible(err.Error()), exitFailure)
			}
			defer dst.Close()
			fromName, toName := render.Visible(src.Path()), render.Visible(dst.Path())
			done, err := store.Copy(c.Context, src, dst, ids, func(r store.Copied) {
				if c.Bool("json") {
					return
				}
				if r.Created {
					fmt.Fprintf(c.App.Writer, "copied run %d (%s) as run %d\n", r.From, render.Visible(r.Model), r.To)
				} else {
					fmt.Fprintf(c.App.Writer, "run %d (%s) is in %s already, as run %d\n", r.From, render.Visible(r.Model), toName, r.To)
				}
			})
			if err != nil {
				return cli.Exit(fmt.Sprintf("copy: %s (%d runs done before it; copying again resumes)", render.Visible(err.Error()), len(done)), exitFailure)
			}
			results := 0
			if len(ids) == 0 { // the whole history: what was measured goes with the runs
				if results, err = store.CopyResults(c.Context, src, dst); err != nil {
					return cli.Exit(fmt.Sprintf("copy: measured results: %s (every run was copied)", render.Visible(err.Error())), exitFailure)
				}
			}
			if c.Bool("json") {
				if done == nil {
					done = []store.Copied{}
				}
				return writeJSON(c.App.Writer, done)
			}
			if results > 0 {
				fmt.Fprintf(c.App.Writer, "copied %d measured results\n", results)
			}
			created := 0
			for _, r := range done {
				if r.Created {
					created++
				}
			}
			fmt.Fprintf(c.App.Writer, "%d of %d runs copied from %s to %s (checksums verified on both sides)\n", created, len(done), fromName, toName)
			return nil
		},
	}
}
