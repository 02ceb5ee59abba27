package measure

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mrep-dev/mrep/calib"
)

// Context is what ran where a result file does not say it all: the model as mrep names it, the
// chip, one replica's layout and GPUs, the precision, the engine and its release, and for
// training the sequence length, batches and framework. Resolve fills it from the user's flags
// first, then the mrep_* keys an emitted plan wrote into the run, then the file's own fields.
type Context struct {
	Model, Chip                 string
	GPUs, TP, EP, PP            int64
	DType, WeightDType, KVDType string
	Engine, EngineVersion       string
	Seq, MBS, GBS               int64
	Framework                   string
	Recipe                      string // training: the low-precision recipe (fp8-cs, mxfp8...)
	CP                          int64  // training: context parallel size
	Plan                        string // the emitted plan's id, when the run came from one
	// Replicas the benchmark's load was spread over (behind a load balancer): each replica
	// served 1/Replicas of the users or the rate, and the throughput is the replicas'.
	Replicas int64
}

// Resolve is the context of run r: flags where given, else the run's mrep_* metadata, else what
// the file itself says.
func (r Run) Resolve(flags Context) Context {
	m := r.Meta
	s := func(flag, key, file string) string {
		switch {
		case flag != "":
			return flag
		case m[key] != "":
			return m[key]
		}
		return file
	}
	n := func(flag int64, key string, file int64) int64 {
		if flag > 0 {
			return flag
		}
		if v, err := strconv.ParseInt(m[key], 10, 64); err == nil && v > 0 {
			return v
		}
		return file
	}
	c := Context{
		Model: s(flags.Model, "mrep_model", r.Model), Chip: s(flags.Chip, "mrep_chip", ""),
		TP: n(flags.TP, "mrep_tp", r.TP), EP: n(flags.EP, "mrep_ep", r.EP), PP: n(flags.PP, "mrep_pp", r.PP),
		GPUs:  n(flags.GPUs, "mrep_gpus", 0),
		DType: s(flags.DType, "mrep_dtype", ""), WeightDType: s(flags.WeightDType, "mrep_weight_dtype", ""), KVDType: s(flags.KVDType, "mrep_kv_dtype", ""),
		Engine: s(flags.Engine, "mrep_engine", r.Engine), EngineVersion: s(flags.EngineVersion, "mrep_release", r.EngineVersion),
		Seq: n(flags.Seq, "mrep_seq", 0), MBS: n(flags.MBS, "mrep_mbs", 0), GBS: n(flags.GBS, "mrep_gbs", r.GBS),
		Framework: s(flags.Framework, "mrep_framework", ""), Plan: m["mrep_plan"], Replicas: n(flags.Replicas, "mrep_replicas", 1),
		Recipe: s(flags.Recipe, "mrep_recipe", ""), CP: n(flags.CP, "mrep_cp", 1),
	}
	c.TP, c.EP, c.PP = max(c.TP, 1), max(c.EP, 1), max(c.PP, 1)
	if c.GPUs == 0 {
		c.GPUs = max(c.TP, c.EP) * c.PP
	}
	if c.DType == "" {
		c.DType = "bf16"
	}
	return c
}

// Rows are the run's figures as calibration rows (bench_serve for a serving benchmark; a
// training step or tokens per GPU for a training log), each with an id from id and the source
// text given; an error names what is missing and the flag that gives it.
func (r Run) Rows(c Context, id, source string) ([]calib.Row, error) {
	switch {
	case c.Model == "":
		return nil, fmt.Errorf("record %d: the model is not in the file: give --model (a zoo name or a stored run)", r.Record)
	case c.Chip == "":
		return nil, fmt.Errorf("record %d: the chip is not in the file: give --chip", r.Record)
	}
	base := calib.Row{Source: source, Model: c.Model, Chip: c.Chip, DType: c.DType, WeightDType: c.WeightDType, KVDType: c.KVDType,
		GPUs: c.GPUs, TP: c.TP, EP: c.EP, PP: c.PP, Engine: c.Engine, EngineVersion: c.EngineVersion}
	var rows []calib.Row
	for _, f := range r.Figures {
		row := base
		row.ID = fmt.Sprintf("%s#%d-%s-%s", id, r.Record, f.Metric, f.Stat)
		row.Measured = f.Value
		switch f.Metric {
		case "ttft", "tpot", "e2e", "output_throughput":
			// one replica's share: rows are predicted on one replica
			reps := float64(max(c.Replicas, 1))
			row.Kind, row.Metric, row.Stat = calib.KindBenchServe, f.Metric, f.Stat
			row.ISL, row.OSL, row.Requests = int64(math.Round(r.ISL)), int64(math.Round(r.OSL)), max(1, int64(math.Round(float64(r.Requests)/reps)))
			switch {
			case r.Users >= 1:
				row.Concurrency = max(1, int64(math.Round(r.Users/reps)))
			case r.Rate > 0:
				row.RequestRate = r.Rate / reps
			default: // every request at once: a closed loop as large as the run
				row.Concurrency = row.Requests
			}
			if f.Metric == "output_throughput" {
				row.Measured = f.Value / reps
			}
			row.Note = fmt.Sprintf("%s: %d requests of about %.0f in / %.0f out", r.Tool, r.Requests, r.ISL, r.OSL)
			if reps > 1 {
				row.Note += fmt.Sprintf(", over %.0f replicas (one replica's share)", reps)
			}
		case "step_time", "tokens_per_gpu":
			if c.Seq < 1 || c.GBS < 1 {
				return nil, fmt.Errorf("record %d: a training step needs its sequence length and global batch: give --seq and --gbs", r.Record)
			}
			row.Kind, row.Unit = calib.KindTrainStep, "s"
			if f.Metric == "tokens_per_gpu" {
				row.Kind, row.Unit = calib.KindTrainTokens, "tok/s/gpu"
			}
			row.Seq, row.GBS, row.MBS, row.Framework, row.Recipe, row.CP = c.Seq, c.GBS, max(c.MBS, 1), c.Framework, c.Recipe, max(c.CP, 1)
			if row.Framework == "" {
				row.Framework = map[string]string{"torchtitan": "fsdp", "hf-trainer": "fsdp"}[r.Tool]
			}
			row.Engine, row.EngineVersion = "", ""
			row.Note = fmt.Sprintf("%s: the %s of %d steps", r.Tool, strings.ReplaceAll(f.Metric, "_", " "), r.Steps)
		default:
			return nil, fmt.Errorf("record %d: figure %q is not one mrep predicts", r.Record, f.Metric)
		}
		if err := row.Check(); err != nil {
			return nil, fmt.Errorf("record %d, %s %s: %w", r.Record, f.Stat, f.Metric, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}
