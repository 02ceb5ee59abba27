package main

import (
	"context"

	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/calib"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/examples"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/store"
)

// bundledModels resolves calibration rows' models from the dumps built into the binary, then
// from the database's runs of that model name (only if the database already exists).
func bundledModels(ctx context.Context, dbPath string, sets configSets) calib.Models {
	return func(name string) (*model.Dump, error) {
		if b, ok := examples.Resolve(name); ok {
			return examples.Decode(b)
		}
		if _, err := os.Stat(dbPath); err == nil || store.IsPostgres(dbPath) {
			db, err := store.Open(ctx, dbPath, store.Options{Existing: true})
			if err == nil {
				defer db.Close()
				if _, d, err := loadRun(ctx, db, name, sets); err == nil {
					return d, nil
				}
			}
		}
		return nil, fmt.Errorf("unknown model: not a bundled dump (%s) nor a model in %s", strings.Join(examples.Names(), ", "), store.Redact(dbPath))
	}
}

// readRows reads src: a shipped set, or the rows file it names.
func readRows(src calib.RowSource) ([]calib.Row, error) {
	if src.Shipped() || src.Stored != nil {
		return src.Rows(), nil
	}
	f, err := openRegular(src.Path)
	if err != nil {
		return nil, fmt.Errorf("calibration file: %w", err)
	}
	defer f.Close()
	return calib.Parse(src.Path, f)
}

// rowsName is how messages name src: the shipped set, or the file made safe to print.
func rowsName(src calib.RowSource) string {
	return render.Visible(src.String())
}

// preparedRows reads src's rows and counts each row's steps against the chip database and the
// bundled or stored models.
func preparedRows(c *cli.Context, src calib.RowSource) ([]calib.Prepared, error) {
	rows, err := readRows(src)
	if err != nil {
		return nil, cli.Exit(err.Error(), exitFailure)
	}
	if c.IsSet("where") {
		if rows, err = calib.Where(rows, c.StringSlice("where")); err != nil {
			return nil, cli.Exit(err.Error(), exitUsage)
		}
		if len(rows) == 0 {
			return nil, cli.Exit(fmt.Sprintf("no row matches --where %s", strings.Join(c.StringSlice("where"), " --where ")), exitFailure)
		}
	}
	db, err := chipDB(c)
	if err != nil {
		return nil, err
	}
	ps, err := calib.Prepare(rows, db, bundledModels(c.Context, c.String("db"), runSets(c)))
	if err != nil {
		if !src.Shipped() {
			return nil, cli.Exit(fmt.Sprintf("calibration file %s: %v", src.Path, err), exitFailure)
		}
		return nil, cli.Exit(err.Error(), exitFailure)
	}
	return ps, nil
}

func validateCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "predict published measured runs (the calibration set shipped with mrep, or yours) and show the error",
		ArgsUsage: "[ROWS.json|ROWS.csv]",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "extended", Usage: "the out-of-sample serving rows shipped with mrep (other chips, models, MoE and TP sizes; nothing was fitted to them) instead of the calibration set"},
			&cli.BoolFlag{Name: "heldout", Usage: "the held-out training rows shipped with mrep (Megatron-Bridge's tables of other releases, AMD's Primus runs beyond the fitted one; nothing was fitted to them)"},
			&cli.StringFlag{Name: "rows", Usage: "`NAME` of a row set shipped with mrep: calibration (the default), extended, heldout, amd-vllm (AMD's published vLLM runs on MI300X), amd-serving (AMD's own serving benchmarks: the ATOM engine on MI355X and MI300X), bench-serve (vLLM's and SGLang's published serving benchmarks: TTFT, TPOT, throughput under load), finetune (published fine-tune memory peaks), finetune-time (published SFT and LoRA step times)"},
			&cli.BoolFlag{Name: "kernels", Usage: "check mrep's kernel timing against NVIDIA's measured kernels instead (aiconfigurator-core's tables, resampled into calib/kernels.json.gz: GEMMs and attention per chip, engine release and precision)"},
			&cli.BoolFlag{Name: "loo", Usage: "also refit the training lanes without each source and predict its rows (leave one source out: one full lane fit per source, about 10 s each on 2 cores; the time taken is printed on stderr)"},
			&cli.BoolFlag{Name: "no-loo", Hidden: true, Usage: "without --loo, the default: kept so scripts written for earlier releases still run"},
			&cli.StringSliceFlag{Name: "where", Usage: "keep only the rows that match `KEY=V1,V2` (repeatable, all must hold): model, chip, kind, engine, dtype, source (substring), tp, ep, pp, gpus"},
			&cli.BoolFlag{Name: "from-history", Usage: "the results you measured and stored with mrep ingest (benchmark result files, training logs), each figure against its prediction"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("kernels") {
				return validateKernels(c)
			}
			src, err := rowSource(c)
			if err != nil {
				return err
			}
			switch {
			case c.Bool("heldout") && (c.Bool("extended") || !src.Shipped() || src.Set != ""):
				return cli.Exit("validate: give one of a rows file, --extended, --heldout or --rows, not both", exitUsage)
			case c.Bool("heldout"):
				src.Set = "heldout"
			case c.Bool("extended") && (!src.Shipped() || src.Set != ""):
				return cli.Exit("validate: give one of a rows file, --extended or --rows, not both", exitUsage)
			case c.Bool("extended"):
				src.Set = "extended"
			}
			ps, err := preparedRows(c, src)
			if err != nil {
				return err
			}
			rep, err := calib.Validate(ps, nil)
			if err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			if len(rep.Lanes) > 0 {
				if c.Bool("loo") && !c.Bool("no-loo") {
					start := env.Now()
					if rep.LeaveOneSourceOut, err = calib.LeaveOneSourceOut(ps); err != nil {
						return cli.Exit(err.Error(), exitFailure)
					}
					fmt.Fprintf(c.App.ErrWriter, "leave one source out: %d refits in %.1f s\n", len(rep.LeaveOneSourceOut), env.Now().Sub(start).Seconds())
				} else {
					rep.LeaveOneSourceOutPending = calib.TrainingSources(ps)
				}
			}
			if c.Bool("json") {
				err = writeJSON(c.App.Writer, rep)
			} else {
				err = render.WriteValidation(c.App.Writer, rep)
			}
			if err != nil {
				return err
			}
			// The report is printed whole, impossible rows named in it; the exit says the
			// rows file is wrong.
			if err := rep.CheckPossible(); err != nil {
				return cli.Exit(fmt.Sprintf("%s: %v", rowsName(src), err), exitFailure)
			}
			return nil
		},
	}
}

// rowSource is where a validate or calibrate command's rows come from: the file argument, or
// the set --rows names (both at once is a usage error); neither is the shipped calibration set.
func rowSource(c *cli.Context) (calib.RowSource, error) {
	path := c.Args().First()
	set := c.String("rows")
	if c.Bool("from-history") {
		if path != "" || set != "" {
			return calib.RowSource{}, cli.Exit(c.Command.Name+": give --from-history, a rows file or --rows, one of them", exitUsage)
		}
		rows, err := historyRows(c)
		if err != nil {
			return calib.RowSource{}, err
		}
		if len(rows) == 0 {
			return calib.RowSource{}, cli.Exit(fmt.Sprintf("%s --from-history: the history (%s) holds no measured results: store a benchmark's result file or a training log with mrep ingest FILE", c.Command.Name, render.Visible(store.Redact(c.String("db")))), exitFailure)
		}
		return calib.RowSource{Stored: rows}, nil
	}
	if set == "" {
		return calib.RowSource{Path: path}, nil
	}
	src, err := calib.ShippedSet(set)
	if err != nil {
		return src, cli.Exit(fmt.Sprintf("%s --%v", c.Command.Name, err), exitUsage)
	}
	if path != "" {
		return src, cli.Exit(c.Command.Name+": give a rows file or --rows, not both", exitUsage)
	}
	return src, nil
}

// validateKernels is validate --kernels: the shipped measured kernels against the time model.
func validateKernels(c *cli.Context) error {
	ks, db, err := shippedKernels(c, "extended", "heldout", "rows", "where", "loo")
	if err != nil {
		return err
	}
	rep, err := calib.CheckKernels(ks, db)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, rep)
	}
	return render.WriteKernelCheck(c.App.Writer, rep)
}

// shippedKernels is the measured kernel set and the chips --kernels checks or fits it against,
// after refusing the row-set flags (named) and a rows file, which do not apply to it.
func shippedKernels(c *cli.Context, rowFlags ...string) (calib.KernelSet, *chips.DB, error) {
	verb := c.Command.Name + " --kernels"
	for _, f := range rowFlags {
		if c.IsSet(f) {
			return calib.KernelSet{}, nil, cli.Exit(verb+" uses the shipped kernel set: --"+f+" does not apply", exitUsage)
		}
	}
	if c.Args().Present() {
		return calib.KernelSet{}, nil, cli.Exit(verb+" uses the shipped kernel set: no rows file", exitUsage)
	}
	ks, err := calib.Kernels()
	if err != nil {
		return ks, nil, cli.Exit(err.Error(), exitFailure)
	}
	db, err := chipDB(c)
	return ks, db, err
}
