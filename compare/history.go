package compare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/calib"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/store"
)

// Point is one run's value of a metric.
type Point struct {
	Run   analyzer.RunInfo `json:"run"`
	X     float64          `json:"x"` // step, or run order when steps are missing
	Value float64          `json:"value"`
	// Predicted is mrep's prediction of a measured value (step_time, mfu_measured), 0 if none.
	Predicted float64 `json:"predicted,omitempty"`
	// Device is what the measurement ran on (the hook's device name), Chip the chip the
	// prediction is for and ChipFrom how it was chosen ("device name" when the device names
	// it, "--chip" when the user did): a measurement and a prediction are one comparison only
	// when the device names the chip.
	Device   string `json:"device,omitempty"`
	Chip     string `json:"chip,omitempty"`
	ChipFrom string `json:"chip_from,omitempty"`
}

// SameDevice says whether every point's prediction is for the chip its measurement ran on.
func (h History) SameDevice() bool {
	for _, p := range h.Points {
		if p.Predicted > 0 && p.ChipFrom != "device name" {
			return false
		}
	}
	return true
}

// History is one metric across runs.
type History struct {
	Metric string
	XLabel string // what X is: the training step or the run order
	Points []Point
}

// Series splits the points into runs of one label, in order: different training runs are not
// one line.
func (h History) Series() [][]Point {
	var out [][]Point
	for i, p := range h.Points {
		if i == 0 || h.Points[i-1].Run.Label != p.Run.Label {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], p)
	}
	return out
}

// HistoryOptions say which runs, which metric and how to order them.
type HistoryOptions struct {
	Filter store.Filter // the runs: one model, or one model's label
	Metric string       // one of MetricNames
	By     string       // "step" orders by training step, "time" by ingestion
	Scenario
	// Chips and Chip predict measured metrics (step_time, mfu_measured); Chip "" takes each
	// run's chip from its device name.
	Chips *chips.DB
	Chip  string
}

// ErrNoData: the runs lack what the metric needs (no runs, no measurement, no weight
// statistics, no result for the phase): input the user can change, not a failure.
var ErrNoData = errors.New("no data for the metric")

// noData is an ErrNoData that reads as its message alone.
type noData string

func (e noData) Error() string { return string(e) }
func (e noData) Unwrap() error { return ErrNoData }

// RunHistory evaluates a metric across the runs the filter selects, ordered by step (or
// ingestion) and grouped by label (labels in the order their first run was ingested), each
// label with its own drift baseline.
func RunHistory(ctx context.Context, db *store.DB, o HistoryOptions) (History, error) {
	kind, args, err := ParseMetric(o.Metric)
	if err != nil {
		return History{}, err
	}
	runs, err := db.ListRuns(ctx, o.Filter)
	if err != nil {
		return History{}, err
	}
	if len(runs) == 0 {
		return History{}, noData(fmt.Sprintf("history: no runs of %s", describeFilter(o.Filter)))
	}
	if o.By == "step" {
		sort.SliceStable(runs, func(i, j int) bool {
			si, sj := runs[i].Step, runs[j].Step
			switch {
			case si == nil && sj == nil:
				return runs[i].ID < runs[j].ID
			case si == nil:
				return false
			case sj == nil:
				return true
			}
			return *si < *sj
		})
	}
	runs = groupByLabel(runs)
	pts, err := points(ctx, db, runs, kind, args, o)
	if err != nil {
		return History{}, err
	}
	h := History{Metric: o.Metric, XLabel: "training step", Points: pts}
	if o.By == "time" || pts[0].Run.Step == nil {
		h.XLabel = "run order"
	}
	return h, nil
}

func labelOf(r store.Run) string {
	if r.Label == nil {
		return ""
	}
	return *r.Label
}

// groupByLabel orders runs label by label (labels in order of their first run), keeping the
// order within a label.
func groupByLabel(runs []store.Run) []store.Run {
	first := map[string]int{}
	for i, r := range runs {
		if _, ok := first[labelOf(r)]; !ok {
			first[labelOf(r)] = i
		}
	}
	out := append([]store.Run(nil), runs...)
	sort.SliceStable(out, func(i, j int) bool { return first[labelOf(out[i])] < first[labelOf(out[j])] })
	return out
}

func describeFilter(f store.Filter) string {
	if f.Label != "" {
		return f.Model + "@" + f.Label
	}
	return f.Model
}

// points evaluates the metric for each run: counts from the run rows, performance metrics
// through the analysis cache, weight statistics straight from the tensors table.
func points(ctx context.Context, db *store.DB, runs []store.Run, kind string, args []string, o HistoryOptions) ([]Point, error) {
	pts := make([]Point, len(runs))
	for i, r := range runs {
		pts[i] = Point{Run: RunInfo(r), X: float64(i)}
		if o.By == "step" && r.Step != nil {
			pts[i].X = float64(*r.Step)
		}
	}
	switch kind {
	case "params":
		for i, r := range runs {
			pts[i].Value = float64(r.TotalParams)
		}
		return pts, nil
	case "trainable_params":
		for i, r := range runs {
			pts[i].Value = float64(r.TrainableParams)
		}
		return pts, nil
	case "step_time", "mfu_measured":
		// the training hook's measurement beside mrep's prediction for the same scenario
		// checkpoints without a measurement (the one at step 0, dumps not from the hook) have
		// no point
		var kept []Point
		for i, r := range runs {
			d, err := db.LoadDump(ctx, r.ID)
			if err != nil {
				return nil, err
			}
			if d.Measurement == nil {
				continue
			}
			cmp := calib.Compare(fmt.Sprintf("id:%d", r.ID), d, o.Chips, o.Chip)
			pts[i].Device, pts[i].Chip, pts[i].ChipFrom = d.Measurement.Device, cmp.Chip, cmp.ChipFrom
			if cmp.ChipFrom == "--chip" {
				if ch, ok := o.Chips.ForDevice(d.Measurement.Device); ok && ch.Name == cmp.Chip {
					pts[i].ChipFrom = "device name" // the user named the chip the device is
				}
			}
			if kind == "step_time" {
				pts[i].Value, pts[i].Predicted = cmp.Measured.StepTimeS*1e3, cmp.Predicted*1e3
			} else {
				pts[i].Value, pts[i].Predicted = 100*cmp.MFUMeasured, 100*cmp.MFUPredicted
			}
			kept = append(kept, pts[i])
		}
		if len(kept) == 0 {
			return nil, noData("history: none of these runs carries a measurement (checkpoints dumped by the training hook do, after their first step)")
		}
		return kept, nil
	case "drift", "std", "mean":
		ids := make([]int64, len(runs))
		for i, r := range runs {
			ids[i] = r.ID
		}
		stats, err := db.TensorStats(ctx, ids)
		if err != nil {
			return nil, err
		}
		pattern := ""
		if len(args) > 0 {
			pattern = args[0]
		}
		var base []model.TensorStat
		for i, r := range runs {
			if i == 0 || labelOf(r) != labelOf(runs[i-1]) { // each label's first run is its baseline
				base = stats[r.ID]
				if len(base) == 0 && kind == "drift" {
					return nil, noData(fmt.Sprintf("history: run %d has no weight statistics (dumped on the meta device?)", r.ID))
				}
			}
			switch kind {
			case "drift":
				pts[i].Value, _ = PatternDrift(WeightDrift(base, stats[r.ID]), pattern)
			default:
				pts[i].Value = MeanStat(stats[r.ID], pattern, kind)
			}
		}
		return pts, nil
	}
	// performance metrics: cached per (run, scenario, analyzer version)
	ids := make([]int64, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	cached, err := db.CachedResults(ctx, ids, o.cacheKey(), analyzer.Version)
	if err != nil {
		return nil, err
	}
	profile := o.Profiles[len(o.Profiles)-1].Name
	if kind != "active_params" && kind != "kv_bytes_per_token" && len(args) > 1 {
		profile = args[1]
	}
	target := o.Targets[0].Label()
	for i, r := range runs {
		var m RunMetrics
		b, ok := cached[r.ID]
		if !ok || json.Unmarshal(b, &m) != nil {
			if m, err = MetricsFor(ctx, db, r.ID, o.Scenario, nil); err != nil {
				return nil, err
			}
		}
		switch kind {
		case "active_params":
			pts[i].Value = m.Active
		case "kv_bytes_per_token":
			pts[i].Value = m.KVBytesPerTok
		default:
			v, ok := PhaseValue(m, kind, target, analyzer.Phase(args[0]), profile)
			if !ok {
				return nil, noData(fmt.Sprintf("history: no %s/%s result for %s (profiles: --exec)", args[0], profile, target))
			}
			pts[i].Value = v
		}
	}
	return pts, nil
}

// MeanStat is the numel-weighted mean of a statistic ("mean" or "std") over the tensors
// matching a pattern.
func MeanStat(stats []model.TensorStat, pattern, kind string) float64 {
	var sum, n float64
	for _, s := range stats {
		if !MatchPattern(pattern, s.Name) {
			continue
		}
		v := s.Mean
		if kind == "std" {
			v = s.Std
		}
		sum += v * float64(s.Numel)
		n += float64(s.Numel)
	}
	if n == 0 {
		return 0
	}
	return sum / n
}
