package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/load"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/runref"
	"github.com/mrep-dev/mrep/store"
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
			if !d.IsDir() && !d.Type().IsRegular() {
				// a FIFO, socket or device met while walking is never opened (it would block)
				if strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".json.gz") {
					skipped = append(skipped, p)
				}
				return nil
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
			if err := refuseReadOnly(c); err != nil {
				return err
			}
			if c.NArg() == 0 {
				return cli.Exit("ingest: give at least one dump file, directory or glob", exitFailure)
			}
			if msg := hfConfigArgs(c.Args().Slice()); msg != "" {
				return cli.Exit(visibleLines(msg), exitFailure)
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
				Store: store.Options{Now: env.Now, Who: env.who(), IntegrityCheck: c.Bool("integrity-check")},
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

// hfConfigArgs says, for files given by name that are Hugging Face config.json files rather
// than dumps, what to do instead: the zoo model of the same architecture and sizes (every
// command takes it by name), or the exporter command. "" when there are none.
func hfConfigArgs(args []string) string {
	var msgs []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > runref.MaxFile { // never open a FIFO or device
			continue
		}
		raw, err := os.ReadFile(a)
		if err != nil {
			continue
		}
		cfg, ok := runref.HFConfig(raw)
		if !ok {
			continue
		}
		if z := runref.Match(cfg); z != "" {
			msgs = append(msgs, fmt.Sprintf("%s is a Hugging Face config.json (%s): the zoo model %s has the same architecture and sizes, and every command takes it by name or this file as it is (mrep analyze %s, mrep plan serve %s); nothing to ingest",
				a, runref.Name(cfg), z, z, a))
			continue
		}
		_, err = runref.Resolve(context.Background(), nil, a)
		msgs = append(msgs, err.Error())
	}
	if len(msgs) == 0 {
		return ""
	}
	return "ingest: " + strings.Join(msgs, "\n") + "\nnothing was stored"
}
