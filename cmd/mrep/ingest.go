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

// expandPaths turns arguments into dump files, and names the JSON files skipped, each with why:
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
		var found, unread []string
		err = filepath.WalkDir(a, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !(strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".json.gz")) {
				return nil
			}
			typ := d.Type()
			if typ&os.ModeSymlink != 0 {
				// a link is followed to a file, never walked into; a loop or a dangling link is
				// named with its reason, not dropped (it may be the dump the user meant)
				fi, err := os.Stat(p)
				if err != nil {
					unread = append(unread, fmt.Sprintf("%s (%v)", p, unwrapPath(err)))
					return nil
				}
				typ = fi.Mode().Type()
			}
			switch {
			case !typ.IsRegular():
				// a FIFO, socket or device met while walking is never opened (it would block)
				skipped = append(skipped, p+" (not a regular file)")
			case ingest.LooksLikeDump(p):
				found = append(found, p)
			default:
				// a training output directory holds JSON that is not a dump (HF's config.json,
				// trainer_state.json): skipped when walking, rejected when named
				skipped = append(skipped, p+" (no schema_version: not a dump)")
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("walk %s: %w", a, err)
		}
		skipped = append(skipped, unread...)
		if len(found) == 0 {
			if len(unread) > 0 {
				return nil, nil, fmt.Errorf("%s: no .json or .json.gz dumps could be read in this directory: %s", a, strings.Join(unread, ", "))
			}
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
		Usage:     "validate dumps and store them as runs (files, directories, globs; .json or .json.gz); store what your benchmarks and training logs measured (vLLM/SGLang benchmark results, genai-perf, trtllm-bench, Megatron-LM and torchtitan logs, trainer_state.json), named as files",
		ArgsUsage: "PATH...",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "keep-going", Usage: "store the valid dumps even when others are rejected (still exits non-zero)"},
			&cli.StringFlag{Name: "model", Usage: "result files: the `MODEL` that ran, as mrep names it (a zoo name or a stored run), where the file does not say (an emitted plan's results do)"},
			&cli.StringFlag{Name: "chip", Usage: "result files: the `CHIP` it ran on, as `mrep chips` lists it"},
			&cli.Int64Flag{Name: "gpus", Usage: "result files: GPUs of one replica (default TP x EP x PP) or of the training job"},
			&cli.Int64Flag{Name: "replicas", Usage: "result files: replicas the benchmark's load was spread over (behind a load balancer); the rows are one replica's share"},
			&cli.Int64Flag{Name: "tp", Usage: "result files: tensor parallel size"},
			&cli.Int64Flag{Name: "ep", Usage: "result files: expert parallel size"},
			&cli.Int64Flag{Name: "pp", Usage: "result files: pipeline stages"},
			&cli.StringFlag{Name: "dtype", Usage: "result files: the precision the run used (default bf16)"},
			&cli.StringFlag{Name: "weight-dtype", Usage: "result files: weight precision (default: --dtype)"},
			&cli.StringFlag{Name: "kv-dtype", Usage: "result files: KV-cache precision (default: --dtype)"},
			&cli.StringFlag{Name: "engine", Usage: "result files: the serving engine (vllm, sglang, trtllm, atom), where the file does not say"},
			&cli.StringFlag{Name: "engine-version", Usage: "result files: the engine's `RELEASE`, where the file does not say"},
			&cli.Int64Flag{Name: "seq", Aliases: []string{"s"}, Usage: "training logs: S, tokens per sequence"},
			&cli.Int64Flag{Name: "mbs", Usage: "training logs: micro-batch, sequences"},
			&cli.Int64Flag{Name: "gbs", Usage: "training logs: global batch, sequences (Megatron's log states it)"},
			&cli.StringFlag{Name: "framework", Usage: "training logs: megatron, fsdp or deepspeed (default: the log's tool's)"},
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
				fmt.Fprintf(c.App.ErrWriter, "note: skipped %d JSON file(s): %s\n", len(skipped), strings.Join(names, ", "))
			}
			maxBytes := c.Int64("max-bytes")
			if maxBytes <= 0 {
				return cli.Exit(fmt.Sprintf("--max-bytes %d: want a positive number of bytes", maxBytes), exitFailure)
			}
			results, dumps, err := load.Classify(paths)
			if err != nil {
				return cli.Exit(render.Visible(fmt.Sprintf("ingest: %v; nothing was stored", err)), exitFailure)
			}
			if len(results) > 0 {
				if len(dumps) > 0 {
					return cli.Exit(fmt.Sprintf("ingest: give result files and dumps in separate commands (%d results, %d dumps); nothing was stored", len(results), len(dumps)), exitUsage)
				}
				return ingestResults(c, env, results)
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

// unwrapPath is a *PathError's reason without its path (the caller names the path once).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
