package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

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
		Before: checkSets,
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

func resolve(ctx context.Context, db *store.DB, sel string) (int64, error) {
	id, err := db.Resolve(ctx, sel)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrAmbiguous) {
		return 0, cli.Exit(err.Error()+" (see `mrep runs`)", exitFailure)
	}
	return id, err
}

// withRun opens the database for reading, loads the run the first argument selects (default
// latest) with the command's --set overrides, and calls fn; the database is closed after.
func withRun(c *cli.Context, env Env, fn func(db *store.DB, run store.Run, d *model.Dump) error) error {
	db, err := openDBRead(c, env)
	if err != nil {
		return err
	}
	defer db.Close()
	run, d, err := loadRun(c.Context, db, c.Args().First(), runSets(c))
	if err != nil {
		return err
	}
	return fn(db, run, d)
}

// loadRun resolves a selector (default latest) and loads its row and dump, with sets applied
// to the dump's config (the stored run is not changed).
func loadRun(ctx context.Context, db *store.DB, sel string, sets configSets) (store.Run, *model.Dump, error) {
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
	sets.apply(d)
	return run, d, nil
}

// loadArg is withRun for commands that need the run and its dump but not the database.
func loadArg(c *cli.Context, env Env) (store.Run, *model.Dump, error) {
	var run store.Run
	var out *model.Dump
	err := withRun(c, env, func(_ *store.DB, r store.Run, d *model.Dump) error {
		run, out = r, d
		return nil
	})
	return run, out, err
}

// loadArgRun is loadArg for commands that need only the dump.
func loadArgRun(c *cli.Context, env Env) (*model.Dump, error) {
	_, d, err := loadArg(c, env)
	return d, err
}
