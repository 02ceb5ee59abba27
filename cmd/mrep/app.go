package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/examples"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/runref"
	"github.com/mrep-dev/mrep/store"
)

// Env is what the commands take from the outside world, injected so tests are byte-stable.
type Env struct {
	Now func() time.Time
	// Who is user@host, recorded with every run this process stores (tests fix it).
	Who func() string
}

// who is the ingester's user@host, "" when unknown.
func (e Env) who() string {
	if e.Who == nil {
		return ""
	}
	return e.Who()
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
			&cli.StringFlag{Name: "db", Value: store.DefaultPath, EnvVars: []string{"MREP_DB"}, Usage: "the history: a SQLite database `FILE`, or a PostgreSQL URL postgres://USER@HOST/DB?sslmode=… shared by a team (password from PGPASSWORD or ~/.pgpass; never printed)"},
			&cli.StringFlag{Name: "chips-file", EnvVars: []string{"MREP_CHIPS"}, Usage: "JSON `FILE` of extra chips (same shape as chips/chips.json)"},
			&cli.BoolFlag{Name: "read-only", Usage: "open the database read-only (read commands; analysis results are then not cached)"},
			&cli.BoolFlag{Name: "integrity-check", Usage: "check the database's structure when opening it (SQLite's integrity check; on PostgreSQL, rows without their run)"},
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
			validateCommand(env),
			calibrateCommand(),
			modelsCommand(),
			copyCommand(env),
		},
		HideHelpCommand: true,
	}
	conventions(app)
	return app
}

// openDB opens the database for a command that writes (ingest, rm), creating it if needed.
func openDB(c *cli.Context, env Env) (*store.DB, error) {
	db, err := store.Open(c.Context, c.String("db"), store.Options{Now: env.Now, Who: env.who(), IntegrityCheck: c.Bool("integrity-check")})
	if err != nil {
		return nil, cli.Exit(err.Error(), exitFailure)
	}
	return db, nil
}

// openDBWrite opens an existing database to change it (rm): it must exist.
func openDBWrite(c *cli.Context, env Env) (*store.DB, error) {
	if err := refuseReadOnly(c); err != nil {
		return nil, err
	}
	db, err := store.Open(c.Context, c.String("db"), store.Options{Now: env.Now, Existing: true, IntegrityCheck: c.Bool("integrity-check")})
	if err != nil {
		return nil, cli.Exit(err.Error(), exitFailure)
	}
	if err := db.Writable(); errors.Is(err, store.ErrNewerSchema) {
		db.Close()
		return nil, cli.Exit(render.Visible(err.Error()), exitFailure)
	} else if err != nil {
		db.Close()
		return nil, cli.Exit(fmt.Sprintf("%s is read-only: runs cannot be removed from it", dbName(c)), exitFailure)
	}
	return db, nil
}

// openDBRead opens the database for a command that reads: it must exist (a mistyped --db says
// so instead of creating an empty database) and is opened read-only when its file or
// directory is (--read-only forces it); caching is then skipped.
func openDBRead(c *cli.Context, env Env) (*store.DB, error) { return openRead(c, env, false) }

// openRead opens the database for reading; missingOK: a history that is not there (on
// PostgreSQL, a database without mrep's schema) is nil, not an error.
func openRead(c *cli.Context, env Env, missingOK bool) (*store.DB, error) {
	db, err := store.Open(c.Context, c.String("db"), store.Options{Now: env.Now, Existing: true,
		ReadOnly: c.Bool("read-only"), IntegrityCheck: c.Bool("integrity-check")})
	if missingOK && errors.Is(err, store.ErrNoDatabase) {
		return nil, nil
	}
	if err != nil {
		return nil, cli.Exit(err.Error(), exitFailure)
	}
	if err := db.Writable(); errors.Is(err, store.ErrNewerSchema) {
		fmt.Fprintf(c.App.ErrWriter, "note: %s was written by a newer mrep: it is read as far as this one knows it, and not written (analysis results are not cached)\n", dbName(c))
	} else if db.ReadOnly() {
		fmt.Fprintf(c.App.ErrWriter, "note: %s is opened read-only; analysis results are not cached\n", dbName(c))
	}
	return db, nil
}

// dbName is --db as messages print it: a PostgreSQL URL without its password, and nothing a
// terminal would act on.
func dbName(c *cli.Context) string { return render.Visible(store.Redact(c.String("db"))) }

// openDBIfAny opens the database for a command that can work without one (a zoo model or a
// file named): nil, and no error, when there is no database (no file; on PostgreSQL, no mrep
// history in it yet).
func openDBIfAny(c *cli.Context, env Env) (*store.DB, error) {
	if p := c.String("db"); !store.IsPostgres(p) {
		if _, err := os.Stat(p); err != nil {
			return nil, nil // no file; a path that exists but is no database is still an error
		}
		return openDBRead(c, env)
	}
	return openRead(c, env, true)
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
	if err := sets.apply(d); err != nil {
		return store.Run{}, nil, err
	}
	return run, d, nil
}

// loadArg resolves the command's RUN for commands that need the dump but not the database: a
// dump file or a Hugging Face config.json on disk, a run in the database (when there is one),
// or a zoo model by name. Without a RUN it takes the latest run, or, where a command must be
// told what to plan (requireRun), lists what there is.
func loadArg(c *cli.Context, env Env) (store.Run, *model.Dump, error) {
	sel := c.Args().First()
	db, err := openDBIfAny(c, env)
	if err != nil {
		return store.Run{}, nil, err
	}
	if db != nil {
		defer db.Close()
	}
	if sel == "" {
		if db == nil || requireRun(c) {
			return store.Run{}, nil, cli.Exit(visibleLines(noRunMessage(c, db)), exitUsage)
		}
		run, d, err := loadRun(c.Context, db, "", runSets(c))
		return run, d, err
	}
	ref, err := runref.Resolve(c.Context, db, sel)
	switch {
	case errors.Is(err, runref.ErrNoSuch):
		return store.Run{}, nil, cli.Exit(render.Visible(err.Error())+" (see `mrep runs` and `mrep models`)", exitFailure)
	case errors.Is(err, runref.ErrHFConfig):
		return store.Run{}, nil, cli.Exit(visibleLines(err.Error()), exitFailure)
	case errors.Is(err, store.ErrAmbiguous):
		return store.Run{}, nil, cli.Exit(err.Error()+" (see `mrep runs`)", exitFailure)
	case err != nil:
		return store.Run{}, nil, cli.Exit(render.Visible(err.Error()), exitFailure)
	}
	if ref.Note != "" {
		fmt.Fprintf(c.App.ErrWriter, "note: %s\n", render.Visible(ref.Note))
	}
	if err := runSets(c).apply(ref.Dump); err != nil {
		return store.Run{}, nil, err
	}
	if requireRun(c) && !hasParams(ref.Dump) {
		// a plan would search no layout and blame --gpus; the model is what is missing
		name := sel
		if ref.Run.ModelName != "" && ref.Run.ModelName != sel {
			name = fmt.Sprintf("%s (%s)", sel, ref.Run.ModelName)
		}
		return store.Run{}, nil, cli.Exit(fmt.Sprintf("%s has no parameters (a module tree without weights): there is nothing to place on GPUs", render.Visible(name)), exitFailure)
	}
	return ref.Run, ref.Dump, nil
}

// hasParams: some module of d holds a parameter with elements.
func hasParams(d *model.Dump) bool {
	for _, m := range d.Modules {
		for _, p := range m.Params {
			if p.Numel > 0 || p.Lazy {
				return true
			}
		}
	}
	return false
}

// requireRun: planning commands answer for a model named on purpose, never the latest run.
func requireRun(c *cli.Context) bool {
	for _, n := range c.Lineage() {
		if n.Command != nil && n.Command.Name == "plan" {
			return true
		}
	}
	return false
}

// noRunMessage is the usage error for a command given no RUN: what it takes, and what there is.
func noRunMessage(c *cli.Context, db *store.DB) string {
	var b strings.Builder
	name := strings.TrimPrefix(c.Command.HelpName, c.App.Name+" ")
	fmt.Fprintf(&b, "%s: give a model: a zoo model by name, a dump file, a config.json or a stored run", name)
	if db == nil {
		fmt.Fprintf(&b, " (no database at %s, so there is no latest run)", dbName(c))
	}
	if db != nil {
		if runs, err := db.ListRuns(c.Context, store.Filter{}); err == nil && len(runs) > 0 {
			var names []string
			for i, r := range runs {
				if i == 10 {
					names = append(names, fmt.Sprintf("… %d more (`mrep runs`)", len(runs)-10))
					break
				}
				names = append(names, fmt.Sprintf("%d %s", r.ID, render.Visible(r.ModelName)))
			}
			fmt.Fprintf(&b, "\nruns in %s: %s", dbName(c), strings.Join(names, ", "))
		}
	}
	fmt.Fprintf(&b, "\nzoo models (`mrep models`): %s", strings.Join(examples.Names(), ", "))
	fmt.Fprintf(&b, "\ne.g. mrep %s Llama-3.1-8B", name)
	return b.String()
}

// visibleLines is render.Visible line by line: a message of several lines keeps its breaks.
func visibleLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = render.Visible(l)
	}
	return strings.Join(lines, "\n")
}

// loadArgRun is loadArg for commands that need only the dump.
func loadArgRun(c *cli.Context, env Env) (*model.Dump, error) {
	_, d, err := loadArg(c, env)
	return d, err
}

// refuseReadOnly: under --read-only nothing writes the database; a command that would is
// refused before it opens it.
func refuseReadOnly(c *cli.Context) error {
	for _, n := range c.Lineage() {
		if n.IsSet("read-only") && n.Bool("read-only") {
			return cli.Exit(fmt.Sprintf("%s writes the database, and --read-only forbids it: nothing was changed", strings.TrimPrefix(c.Command.HelpName, c.App.Name+" ")), exitUsage)
		}
	}
	return nil
}

// MaxInputFile bounds a rows, workload, chips or profile file (a trace of a day's requests fits).
const MaxInputFile = 256 << 20

// openRegular opens a file mrep reads as input: a regular file only (a FIFO or a device would
// block or never end; opened non-blocking so even a race to swap one in cannot hang), no larger
// than MaxInputFile.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		what := "not a regular file"
		switch m := fi.Mode(); {
		case m&os.ModeNamedPipe != 0:
			what = "a FIFO, not a regular file"
		case m&(os.ModeDevice|os.ModeCharDevice) != 0:
			what = "a device, not a regular file"
		case m&os.ModeSocket != 0:
			what = "a socket, not a regular file"
		case m.IsDir():
			what = "a directory, not a file"
		}
		return nil, fmt.Errorf("%s: %s", path, what)
	}
	if fi.Size() > MaxInputFile {
		f.Close()
		return nil, fmt.Errorf("%s: %d bytes, more than the %d an input file may hold", path, fi.Size(), MaxInputFile)
	}
	return f, nil
}
