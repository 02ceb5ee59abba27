package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/calib"
	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/load"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/store"
)

// Env is what the commands take from the outside world, injected so tests are byte-stable.
type Env struct {
	Now func() time.Time
}

// Exit codes.
const (
	exitFailure = 1 // bad input, unknown run: the user can fix it
	exitUsage   = 2 // unknown command, flag or argument: the usage is printed
)

// NewApp builds the mrep command line. Actions write to c.App.Writer and c.App.ErrWriter.
func NewApp(env Env) *cli.App {
	if env.Now == nil {
		env.Now = time.Now
	}
	app := &cli.App{
		Name:  "mrep",
		Usage: "what limits a transformer on a chip in training, prefill and decode, and which knob moves it",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "db", Value: store.DefaultPath, EnvVars: []string{"MREP_DB"}, Usage: "SQLite database `FILE`"},
			&cli.StringFlag{Name: "chips-file", EnvVars: []string{"MREP_CHIPS"}, Usage: "JSON `FILE` of extra chips (same shape as chips/chips.json)"},
			&cli.BoolFlag{Name: "read-only", Usage: "open the database read-only (read commands; analysis results are then not cached)"},
			&cli.BoolFlag{Name: "integrity-check", Usage: "run SQLite's integrity check when opening the database"},
			&cli.StringSliceFlag{Name: "set", Usage: "override a config value of the analysed runs for this command, `KEY=VALUE` (e.g. num_attention_heads=12 for a model dumped without its config); repeatable"},
		},
		Before: withSets,
		Commands: []*cli.Command{
			ingestCommand(env),
			runsCommand(env),
			showCommand(env),
			rmCommand(env),
			analyzeCommand(env),
			reportCommand(env),
			diffCommand(env),
			historyCommand(env),
			chipsCommand(),
			checkCommand(env),
			planCommand(env),
			validateCommand(),
			calibrateCommand(),
		},
		HideHelpCommand: true,
	}
	conventions(app)
	return app
}

// openDB opens the database for a command that writes (ingest, rm), creating it if needed.
func openDB(c *cli.Context, env Env) (*store.DB, error) {
	db, err := store.Open(c.Context, c.String("db"), store.Options{Now: env.Now, IntegrityCheck: c.Bool("integrity-check")})
	if err != nil {
		return nil, cli.Exit(err.Error(), exitFailure)
	}
	return db, nil
}

// openDBWrite opens an existing database to change it (rm): it must exist.
func openDBWrite(c *cli.Context, env Env) (*store.DB, error) {
	db, err := store.Open(c.Context, c.String("db"), store.Options{Now: env.Now, Existing: true, IntegrityCheck: c.Bool("integrity-check")})
	if err != nil {
		return nil, cli.Exit(err.Error(), exitFailure)
	}
	if db.ReadOnly() {
		db.Close()
		return nil, cli.Exit(fmt.Sprintf("%s is read-only: runs cannot be removed from it", c.String("db")), exitFailure)
	}
	return db, nil
}

// openDBRead opens the database for a command that reads: it must exist (a mistyped --db says
// so instead of creating an empty database) and is opened read-only when its file or
// directory is (--read-only forces it); caching is then skipped.
func openDBRead(c *cli.Context, env Env) (*store.DB, error) {
	db, err := store.Open(c.Context, c.String("db"), store.Options{Now: env.Now, Existing: true,
		ReadOnly: c.Bool("read-only"), IntegrityCheck: c.Bool("integrity-check")})
	if err != nil {
		return nil, cli.Exit(err.Error(), exitFailure)
	}
	if db.ReadOnly() {
		fmt.Fprintf(c.App.ErrWriter, "note: %s is opened read-only; analysis results are not cached\n", render.Visible(c.String("db")))
	}
	return db, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// expandPaths turns arguments into dump files, and names the JSON files skipped as not dumps:
// files as given, directories walked for
// *.json and *.json.gz, and glob patterns the shell did not expand.
func expandPaths(args []string) ([]string, []string, error) {
	var out, skipped []string
	for _, a := range args {
		if strings.ContainsAny(a, "*?[") {
			if _, err := os.Stat(a); err != nil {
				matches, gerr := filepath.Glob(a)
				if gerr != nil {
					return nil, nil, fmt.Errorf("pattern %s: %w", a, gerr)
				}
				if len(matches) == 0 {
					return nil, nil, fmt.Errorf("%s: no files match", a)
				}
				sort.Strings(matches)
				out = append(out, matches...)
				continue
			}
		}
		fi, err := os.Stat(a)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", a, errors.Unwrap(err))
		}
		if !fi.IsDir() {
			out = append(out, a)
			continue
		}
		var found []string
		err = filepath.WalkDir(a, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".json.gz")) {
				// a training output directory holds JSON that is not a dump (HF's config.json,
				// trainer_state.json): skipped when walking, rejected when named
				if ingest.LooksLikeDump(p) {
					found = append(found, p)
				} else {
					skipped = append(skipped, p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("walk %s: %w", a, err)
		}
		if len(found) == 0 {
			return nil, nil, fmt.Errorf("%s: no .json or .json.gz dumps in this directory", a)
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, skipped, nil
}

func ingestCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:      "ingest",
		Usage:     "validate dumps and store them as runs (files, directories, globs; .json or .json.gz)",
		ArgsUsage: "PATH...",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "keep-going", Usage: "store the valid dumps even when others are rejected (still exits non-zero)"},
			&cli.Int64Flag{Name: "max-bytes", Value: ingest.DefaultMaxBytes, Usage: "refuse a dump larger than this once decompressed"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output: one entry per file (path, run id, created or already there, or the error)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("ingest: give at least one dump file, directory or glob", exitFailure)
			}
			paths, skipped, err := expandPaths(c.Args().Slice())
			if err != nil {
				return cli.Exit("ingest: "+err.Error(), exitFailure)
			}
			if len(skipped) > 0 {
				names := make([]string, len(skipped))
				for i, p := range skipped {
					names[i] = render.Visible(p)
				}
				fmt.Fprintf(c.App.ErrWriter, "note: skipped %d JSON file(s) that are not dumps (no schema_version): %s\n", len(skipped), strings.Join(names, ", "))
			}
			maxBytes := c.Int64("max-bytes")
			if maxBytes <= 0 {
				return cli.Exit(fmt.Sprintf("--max-bytes %d: want a positive number of bytes", maxBytes), exitFailure)
			}
			opt := ingest.Options{MaxBytes: maxBytes}
			// One pass: each dump is stored while it is decoded, in one transaction (a rejected
			// dump stores nothing, or with --keep-going only itself); memory holds one dump.
			done, bads, err := load.Files(c.Context, c.String("db"), paths, load.Options{Ingest: opt, KeepGoing: c.Bool("keep-going"),
				Store: store.Options{Now: env.Now, IntegrityCheck: c.Bool("integrity-check")},
				Rejected: func(_ string, err error) {
					fmt.Fprintf(c.App.ErrWriter, "mrep: %s\n", render.Visible(err.Error()))
				}})
			var oe *load.OpenError
			switch {
			case errors.As(err, &oe):
				return cli.Exit(oe.Error(), exitFailure)
			case errors.Is(err, load.ErrRejected):
				return cli.Exit(fmt.Sprintf("ingest: %d of %d dumps rejected (%s); nothing was stored", len(bads), len(paths), render.Visible(strings.Join(bads, ", "))), exitFailure)
			case err != nil:
				var ec cli.ExitCoder
				if errors.As(err, &ec) {
					return err
				}
				return cli.Exit(render.Visible(fmt.Sprintf("ingest: %v; nothing was stored", err)), exitFailure)
			}
			return reportIngest(c.Context, c, env, done, bads, len(paths))
		},
	}
}

// ingestResult is one file of `mrep ingest --json`.
type ingestResult struct {
	Path    string  `json:"path"`
	ID      int64   `json:"id,omitempty"`
	Created bool    `json:"created"` // false: already ingested (same content hash)
	Model   string  `json:"model,omitempty"`
	Label   *string `json:"label,omitempty"`
	Step    *int64  `json:"step,omitempty"`
	Error   string  `json:"error,omitempty"`
}

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

func resolve(ctx context.Context, db *store.DB, sel string) (int64, error) {
	id, err := db.Resolve(ctx, sel)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrAmbiguous) {
		return 0, cli.Exit(err.Error()+" (see `mrep runs`)", exitFailure)
	}
	return id, err
}

// loadRun resolves a selector (default latest) and loads its row and dump.
// loadArgRun opens the database read-only, loads the run the first argument selects and
// closes the database: for commands that only need the dump.
func loadArgRun(c *cli.Context, env Env) (*model.Dump, error) {
	db, err := openDBRead(c, env)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	_, d, err := loadRun(c.Context, db, c.Args().First())
	return d, err
}

func loadRun(ctx context.Context, db *store.DB, sel string) (store.Run, *model.Dump, error) {
	if sel == "" {
		sel = "latest"
	}
	id, err := resolve(ctx, db, sel)
	if err != nil {
		return store.Run{}, nil, err
	}
	run, err := db.Run(ctx, id)
	if err != nil {
		return store.Run{}, nil, err
	}
	d, err := db.LoadDump(ctx, id)
	if err != nil {
		return store.Run{}, nil, err
	}
	setsFrom(ctx).apply(d)
	return run, d, nil
}

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
			db, err := openDBRead(c, env)
			if err != nil {
				return err
			}
			defer db.Close()
			run, d, err := loadRun(c.Context, db, c.Args().First())
			if err != nil {
				return err
			}
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
		},
	}
}

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

func checkCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "verify the database: SQLite's integrity check and every run's rows against their checksum",
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
				return cli.Exit(fmt.Sprintf("check: %d of %d runs corrupt; SQLite integrity check: %s", bad, len(runs), render.Visible(integrity)), exitFailure)
			}
			return nil
		},
	}
}
