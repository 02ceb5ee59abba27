package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/calib"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/internal/output"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/store"
)

func calibrateCommand() *cli.Command {
	return &cli.Command{
		Name:      "calibrate",
		Usage:     "fit a chip's efficiency parameters to your measured runs and write a chips file for --chips-file",
		ArgsUsage: "ROWS.json|ROWS.csv  (or --from MODEL@LABEL)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "chips `FILE` to write (JSON, for --chips-file)"},
			&cli.StringSliceFlag{Name: "from", Usage: "use the training steps measured by the exporter's hook in these runs (MODEL, MODEL@LABEL; repeatable) as the measured rows"},
			&cli.StringFlag{Name: "chip", Usage: "with --from: the chip the runs ran on (default: the one each run's device names)"},
			&cli.StringSliceFlag{Name: "fit", Value: cli.NewStringSlice(calib.DefaultFit...), Usage: "parameters to fit: gemm_frac[.DTYPE], grouped_gemm_frac, hbm_frac, moe_hbm_frac, attn_frac, kernel_latency_us, host_launch_us, step_overhead_us, pp_step_us, scale_up_frac, scale_up_latency_us, seq_overhead_us, request_overhead_us"},
			&cli.BoolFlag{Name: "abs-loss", Usage: "fit the mean absolute log error (the bulk of the rows) rather than the mean squared (the worst rows)"},
			&cli.BoolFlag{Name: "lanes", Usage: "fit the training lanes (each framework's figures per chip: GEMM fraction per precision, grouped GEMM, MoE host pace; attention and eager elementwise for fsdp) to the training rows, the shipped calibration set unless a rows file is given"},
			&cli.BoolFlag{Name: "kernels", Usage: "fit each chip's serving-engine lanes to the engine's measured kernels shipped with mrep (validate --kernels): GEMM fraction per precision, prefill attention, decode attention's KV bandwidth; a figure is taken only where it predicts the held-out shapes better"},
			&cli.StringFlag{Name: "rows", Usage: "fit to the row set `NAME` shipped with mrep instead of a file: calibration, extended, heldout, amd-vllm, amd-serving, bench-serve, finetune, finetune-time"},
			&cli.StringSliceFlag{Name: "where", Usage: "keep only the rows that match `KEY=V1,V2` (repeatable, all must hold): model, chip, kind, engine, dtype, source (substring), tp, ep, pp, gpus"},
			&cli.BoolFlag{Name: "from-history", Usage: "fit to the results you measured and stored with mrep ingest (your own cluster's benchmark results and training logs)"},
			&cli.StringFlag{Name: "lane", Usage: "fit on top of each chip's `LANE` figures (a serving engine's, e.g. those calibrate --kernels wrote) and write the fitted figures into that lane, leaving the chip's own and its other lanes as they are"},
			&cli.StringFlag{Name: "leave-out", Value: "row", Usage: "the check's held-out group: row (one at a time), run (a benchmark run's figures together; the default with --from-history), model, source (one published table) or chip; each refitted without it and then predicted"},
			&cli.BoolFlag{Name: "json", Usage: "machine-readable output"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("kernels") {
				return calibrateKernels(c)
			}
			var ps []calib.Prepared
			src, err := rowSource(c)
			if err != nil {
				return err
			}
			leaveOut := c.String("leave-out")
			if c.Bool("from-history") && !c.IsSet("leave-out") {
				leaveOut = "run"
			}
			group, err := calib.GroupBy(leaveOut)
			if err != nil {
				return cli.Exit("calibrate --"+err.Error(), exitUsage)
			}
			if c.Bool("lanes") {
				if c.IsSet("lane") {
					return cli.Exit("calibrate --lanes fits the training lanes themselves: --lane does not apply", exitUsage)
				}
				return calibrateLanes(c, src)
			}
			given := !src.Shipped() || src.Set != "" // a rows file, --rows or --from-history
			what := rowsName(src)
			switch {
			case len(c.StringSlice("from")) > 0 && given:
				return cli.Exit("calibrate: give a rows file or --from runs, not both", exitUsage)
			case len(c.StringSlice("from")) > 0:
				if ps, err = measuredRunRows(c); err != nil {
					return err
				}
				what = "runs " + strings.Join(c.StringSlice("from"), ", ")
			case !given:
				return cli.Exit("calibrate: give a file of measured rows (JSON or CSV, the shape of `mrep validate --json`'s input; see README), or --from MODEL@LABEL", exitFailure)
			default:
				if ps, err = preparedRows(c, src); err != nil {
					return err
				}
			}
			if w := c.StringSlice("where"); len(w) > 0 {
				what += " where " + strings.Join(w, " and ")
			}
			if c.Bool("from-history") {
				// a run's figures are one measurement: fewer runs than parameters fit nothing
				runs := map[string]bool{}
				for _, p := range ps {
					runs[calib.RunOf(p.Row)] = true
				}
				if n := len(c.StringSlice("fit")); len(runs) < n {
					return cli.Exit(fmt.Sprintf("calibrate --from-history: %d measured runs for %d parameters (%s): store more runs (other loads, lengths or layouts) or fit fewer parameters (--fit)",
						len(runs), n, strings.Join(c.StringSlice("fit"), ", ")), exitFailure)
				}
			}
			if err := fitBounds(ps); err != nil {
				return err
			}
			fits, err := calib.CalibrateWith(ps, c.StringSlice("fit"), what, calib.CalibrateOptions{
				AbsLoss: c.Bool("abs-loss"), LeaveOut: group, LeaveOutName: leaveOut, Lane: strings.ToLower(c.String("lane"))})
			if err != nil {
				return cli.Exit(fmt.Sprintf("calibrate %s: %v", render.Visible(what), err), exitFailure)
			}
			if out := c.String("output"); out != "" {
				db, err := chipDB(c)
				if err != nil {
					return err
				}
				var list []chips.Chip
				for _, f := range fits {
					chip, err := db.Lookup(f.Chip)
					if err != nil {
						return err
					}
					if f.LaneFigures != nil {
						chip.Efficiency = chip.Efficiency.WithLane(f.Lane, *f.LaneFigures)
					} else {
						chip.Efficiency = f.Efficiency
					}
					list = append(list, chip)
				}
				if err := output.WriteFile(out, func(w io.Writer) error { return chips.Write(w, list) }); err != nil {
					return cli.Exit(err.Error(), exitFailure)
				}
				fmt.Fprintf(c.App.ErrWriter, "wrote %s: use it with --chips-file %s\n", out, out)
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, fits)
			}
			return render.WriteCalibration(c.App.Writer, fits)
		},
	}
}

// measuredRunRows turns the runs --from selects into calibration rows: one training step per
// checkpoint that carries the hook's measurement (tokens and sequence length included).
func measuredRunRows(c *cli.Context) ([]calib.Prepared, error) {
	cdb, err := chipDB(c)
	if err != nil {
		return nil, err
	}
	db, err := openDBRead(c, Env{})
	if err != nil {
		return nil, err
	}
	var rows []calib.Row
	var skipped []string
	for _, sel := range c.StringSlice("from") {
		name, label, _ := strings.Cut(sel, "@")
		runs, err := db.ListRuns(c.Context, store.Filter{Model: name, Label: label})
		if err != nil {
			db.Close()
			return nil, err
		}
		if len(runs) == 0 {
			db.Close()
			return nil, cli.Exit(fmt.Sprintf("calibrate --from %s: no such runs (see `mrep runs`)", sel), exitFailure)
		}
		for _, r := range runs {
			d, err := db.LoadDump(c.Context, r.ID)
			if err != nil {
				db.Close()
				return nil, err
			}
			chip := c.String("chip")
			if chip == "" && d.Measurement != nil {
				if ch, ok := cdb.ForDevice(d.Measurement.Device); ok {
					chip = ch.Name
				}
			}
			sel := fmt.Sprintf("id:%d", r.ID)
			if chip == "" && d.Measurement != nil {
				skipped = append(skipped, fmt.Sprintf("run %d (device %q names no chip: give --chip)", r.ID, d.Measurement.Device))
				continue
			}
			row, err := calib.FromMeasurement(sel, d, chip)
			if err != nil {
				skipped = append(skipped, err.Error())
				continue
			}
			rows = append(rows, row)
		}
	}
	db.Close()
	for _, s := range skipped {
		fmt.Fprintf(c.App.ErrWriter, "note: skipped %s\n", render.Visible(s))
	}
	if len(rows) == 0 {
		return nil, cli.Exit("calibrate --from: none of these runs carries a usable measurement", exitFailure)
	}
	ps, err := calib.Prepare(rows, cdb, bundledModels(c.Context, c.String("db"), runSets(c)))
	if err != nil {
		return nil, cli.Exit(err.Error(), exitFailure)
	}
	return ps, nil
}

// calibrateLanes fits the training lanes and prints them, with each source held out in turn.
func calibrateLanes(c *cli.Context, src calib.RowSource) error {
	ps, err := preparedRows(c, src)
	if err != nil {
		return err
	}
	fits, err := calib.FitLanes(ps)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	if len(fits) == 0 {
		// --lanes fits training frameworks' figures: serving rows have none to give it
		return cli.Exit("calibrate --lanes: no training rows (train_step or train_throughput) in the rows given to fit a lane to; serving lanes are fitted with --lane ENGINE --fit …", exitUsage)
	}
	loo, err := calib.LeaveOneSourceOut(ps)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	if c.Bool("json") {
		db, err := chipDB(c)
		if err != nil {
			return err
		}
		base := map[string]chips.Efficiency{}
		for _, ch := range db.All() {
			e := ch.Efficiency
			e.Lanes = nil
			base[ch.Name] = e
		}
		lanes := map[string]map[string]chips.Efficiency{}
		for name, e := range calib.WithLanes(base, fits) {
			if len(e.Lanes) > 0 {
				lanes[name] = e.Lanes
			}
		}
		return writeJSON(c.App.Writer, struct {
			Lanes             []calib.LaneFit                        `json:"lanes"`
			Chips             map[string]map[string]chips.Efficiency `json:"chips"`
			LeaveOneSourceOut []calib.SourceError                    `json:"leave_one_source_out"`
		}{fits, lanes, loo})
	}
	return render.WriteLaneFits(c.App.Writer, fits, loo)
}

// calibrateKernels is calibrate --kernels: the serving lanes fitted to the measured kernels,
// printed, and with -o written as a chips file of every chip it changed.
func calibrateKernels(c *cli.Context) error {
	ks, db, err := shippedKernels(c, "from", "lanes", "lane", "rows", "where", "fit", "abs-loss", "leave-out", "chip")
	if err != nil {
		return err
	}
	fits, err := calib.FitKernelLanes(ks, db)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	if out := c.String("output"); out != "" {
		byChip := map[string]chips.Chip{}
		var order []string
		for _, f := range fits {
			if len(f.Lane.Sources) == 0 {
				continue // nothing adopted
			}
			ch, ok := byChip[f.Chip]
			if !ok {
				if ch, err = db.Lookup(f.Chip); err != nil {
					return cli.Exit(err.Error(), exitFailure)
				}
				order = append(order, f.Chip)
			}
			ch.Efficiency = ch.Efficiency.WithLane(f.Engine, f.Lane)
			byChip[f.Chip] = ch
		}
		var list []chips.Chip
		for _, n := range order {
			list = append(list, byChip[n])
		}
		if err := output.WriteFile(out, func(w io.Writer) error { return chips.Write(w, list) }); err != nil {
			return cli.Exit(err.Error(), exitFailure)
		}
		fmt.Fprintf(c.App.ErrWriter, "wrote %s: use it with --chips-file %s\n", render.Visible(out), render.Visible(out))
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, fits)
	}
	return render.WriteKernelLaneFits(c.App.Writer, fits)
}

// MaxFitRows and MaxFitSimulated bound what one calibrate fits: each evaluation predicts every
// row (a serving benchmark's row runs the scheduler step by step), a fit takes hundreds of
// evaluations and each held-out group a refit, so beyond these a fit runs for hours. Narrow
// the rows with --where instead.
const (
	MaxFitRows      = 5000
	MaxFitSimulated = 600
)

// fitBounds refuses a fit too large to finish in minutes, saying how to narrow it.
func fitBounds(ps []calib.Prepared) error {
	sim := map[string]bool{}
	for _, p := range ps {
		if p.Row.Kind == calib.KindBenchServe {
			sim[calib.RunOf(p.Row)] = true
		}
	}
	switch {
	case len(ps) > MaxFitRows:
		return cli.Exit(fmt.Sprintf("calibrate: %d rows, more than one fit takes (%d): narrow them with --where (chip=, model=, kind=, engine=...)", len(ps), MaxFitRows), exitUsage)
	case len(sim) > MaxFitSimulated:
		return cli.Exit(fmt.Sprintf("calibrate: %d serving benchmark runs, each simulated step by step at every evaluation: more than one fit takes (%d); narrow them with --where (chip=, engine=, concurrency=...)", len(sim), MaxFitSimulated), exitUsage)
	}
	return nil
}
