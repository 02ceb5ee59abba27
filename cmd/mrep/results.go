package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/calib"
	"github.com/mrep-dev/mrep/load"
	"github.com/mrep-dev/mrep/measure"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/store"
)

// resultContext is ingest's flags as the context of result files (what the files do not say).
func resultContext(c *cli.Context) measure.Context {
	return measure.Context{Model: c.String("model"), Chip: c.String("chip"), GPUs: c.Int64("gpus"), TP: c.Int64("tp"), EP: c.Int64("ep"), PP: c.Int64("pp"),
		DType: strings.ToLower(c.String("dtype")), WeightDType: strings.ToLower(c.String("weight-dtype")), KVDType: strings.ToLower(c.String("kv-dtype")),
		Engine: strings.ToLower(c.String("engine")), EngineVersion: c.String("engine-version"), Seq: c.Int64("seq"), MBS: c.Int64("mbs"), GBS: c.Int64("gbs"),
		Framework: strings.ToLower(c.String("framework")), Replicas: c.Int64("replicas")}
}

// ingestResults stores what result files measured: each run's rows are built and checked
// against the chips and models (as validate would predict them) before anything is stored, in
// one transaction.
func ingestResults(c *cli.Context, env Env, files []load.ResultFile) error {
	results, rows, err := load.ResultRows(files, resultContext(c))
	if err != nil {
		return cli.Exit(render.Visible(fmt.Sprintf("ingest: %v; nothing was stored", err)), exitFailure)
	}
	cdb, err := chipDB(c)
	if err != nil {
		return err
	}
	if _, err := calib.Prepare(rows, cdb, bundledModels(c.Context, c.String("db"), runSets(c))); err != nil {
		return cli.Exit(render.Visible(fmt.Sprintf("ingest: %v; nothing was stored", err)), exitFailure)
	}
	db, err := store.Open(c.Context, c.String("db"), store.Options{Now: env.Now, Who: env.who(), IntegrityCheck: c.Bool("integrity-check")})
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	defer db.Close()
	added, err := db.AddResults(c.Context, results)
	if err != nil {
		return cli.Exit(render.Visible(fmt.Sprintf("ingest: %v; nothing was stored", err)), exitFailure)
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, struct {
			Added   int            `json:"added"`
			Results []store.Result `json:"results"`
		}{added, results})
	}
	for _, f := range files {
		for _, r := range f.Runs {
			what := fmt.Sprintf("%d figures", len(r.Figures))
			load := ""
			switch {
			case r.Users >= 1:
				load = fmt.Sprintf(", %g users", r.Users)
			case r.Rate > 0:
				load = fmt.Sprintf(", %g requests/s", r.Rate)
			case r.Requests > 0 && r.Figures[0].Metric != "step_time" && r.Figures[0].Metric != "tokens_per_gpu":
				load = fmt.Sprintf(", all %d requests at once", r.Requests)
			}
			fmt.Fprintf(c.App.Writer, "%s record %d: %s, %s%s\n", render.Visible(f.Path), r.Record, r.Tool, what, load)
		}
	}
	fmt.Fprintf(c.App.Writer, "stored %d new of %d results (%d measured rows); compare them with mrep validate --from-history, fit to them with mrep calibrate --from-history\n",
		added, len(results), len(rows))
	return nil
}

// measuredRef is a stored result as validate --from-history's row ids name it: the result
// file's SHA-256 prefix and the record, DIGEST#RECORD.
var measuredRef = regexp.MustCompile(`^[0-9a-f]{12}#[0-9]+$`)

// measuredDiff compares two stored measured runs: each figure measured and predicted, and the
// part of the engine's step that moved.
func measuredDiff(c *cli.Context, a, b string) error {
	rows, err := historyRows(c)
	if err != nil {
		return err
	}
	pick := func(ref string) ([]calib.Row, error) {
		var out []calib.Row
		for _, r := range runRows(rows, ref) {
			if r.Kind == calib.KindBenchServe {
				out = append(out, r)
			}
		}
		if len(out) == 0 {
			return nil, cli.Exit(fmt.Sprintf("diff: no measured serving run %s in the history (mrep validate --from-history lists them as DIGEST#RECORD-figure)", ref), exitFailure)
		}
		return out, nil
	}
	ra, err := pick(a)
	if err != nil {
		return err
	}
	rb, err := pick(b)
	if err != nil {
		return err
	}
	cdb, err := chipDB(c)
	if err != nil {
		return err
	}
	models := bundledModels(c.Context, c.String("db"), runSets(c))
	pa, err := calib.Prepare(ra, cdb, models)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	pb, err := calib.Prepare(rb, cdb, models)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	d, err := calib.DiffRuns(pa, pb)
	if err != nil {
		return cli.Exit("diff: "+err.Error(), exitFailure)
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, d)
	}
	return render.WriteRunDiff(c.App.Writer, d)
}

// showMeasured is one stored measured run (DIGEST#RECORD): each of its figures beside mrep's
// prediction, as validate --from-history prints them.
func showMeasured(c *cli.Context, ref string) error {
	rows, err := historyRows(c)
	if err != nil {
		return err
	}
	mine := runRows(rows, ref)
	if len(mine) == 0 {
		return cli.Exit(fmt.Sprintf("show: no measured run %s in the history (mrep validate --from-history lists them as DIGEST#RECORD-figure)", ref), exitFailure)
	}
	ps, err := preparedRows(c, calib.RowSource{Stored: mine})
	if err != nil {
		return err
	}
	rep, err := calib.Validate(ps, nil)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, rep)
	}
	fmt.Fprintf(c.App.Writer, "Measured run %s: %s\n\n", ref, render.Visible(mine[0].Note))
	return render.WriteValidation(c.App.Writer, rep)
}

// historyRows are the calibration rows of every measured result the history holds.
func historyRows(c *cli.Context) ([]calib.Row, error) {
	db, err := openDBRead(c, Env{})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := load.StoredRows(c.Context, db)
	if err != nil {
		return nil, cli.Exit(err.Error(), exitFailure)
	}
	return rows, nil
}

// runRows are the rows of one measured run, DIGEST#RECORD (its figures' ids extend it).
func runRows(rows []calib.Row, ref string) []calib.Row {
	var out []calib.Row
	for _, r := range rows {
		if strings.HasPrefix(r.ID, ref+"-") {
			out = append(out, r)
		}
	}
	return out
}
