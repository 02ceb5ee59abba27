package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/compare"
	"github.com/mrep-dev/mrep/store"
)

func TestDiffTwoConfigsOfOneFamily(t *testing.T) {
	db := filepath.Join(t.TempDir(), "d.db")
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.1-8B.json.gz", "../../examples/dumps/Llama-3.1-8B-mha.json.gz",
		"../../examples/dumps/Llama-3.1-70B-Instruct.json.gz")
	var d struct {
		Config     []compare.ConfigChange `json:"config_changes"`
		Categories []compare.CountDelta   `json:"params_by_category"`
		Patterns   []compare.CountDelta   `json:"params_by_pattern"`
		A          compare.RunMetrics     `json:"metrics_a"`
		B          compare.RunMetrics     `json:"metrics_b"`
		Note       string                 `json:"drift_note"`
	}
	out := mustRun(t, db, "diff", "Llama-3.1-8B@base", "Llama-3.1-8B@mha", "--json", "--chip", "H100")
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Config) != 1 || d.Config[0].Key != "num_key_value_heads" || d.Config[0].A != "8" || d.Config[0].B != "32" {
		t.Fatalf("config changes: %+v", d.Config)
	}
	// K and V projections grow 4x: 32 layers x 2 x 4096 x (4096 - 1024)
	if got := d.B.TotalParams - d.A.TotalParams; got != 32*2*4096*(4096-1024) {
		t.Errorf("parameter delta %d", got)
	}
	if d.A.KVBytesPerTok != 131072 || d.B.KVBytesPerTok != 4*131072 {
		t.Errorf("KV bytes per token %g -> %g", d.A.KVBytesPerTok, d.B.KVBytesPerTok)
	}
	dec, _ := d.A.Find("H100-SXM bf16", analyzer.Decode, analyzer.DefaultProfile)
	decB, _ := d.B.Find("H100-SXM bf16", analyzer.Decode, analyzer.DefaultProfile)
	if decB.TEst <= dec.TEst {
		t.Errorf("4x the KV cache must slow decode: %g -> %g", dec.TEst, decB.TEst)
	}
	if !strings.Contains(d.Note, "same architecture") {
		t.Errorf("drift note: %q", d.Note)
	}
	md := mustRun(t, db, "diff", "Llama-3.1-8B@base", "Llama-3.1-70B-Instruct", "--chip", "H100")
	for _, want := range []string{"| `num_hidden_layers` | `32` | `80` |", "| KV bytes per token | 131072 | 327680 | +196608 | +150.0% |", "## Performance model"} {
		if !strings.Contains(md, want) {
			t.Errorf("diff markdown lacks %q", want)
		}
	}
}

func TestHistoryAndDiffOfCheckpoints(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "h.db")
	mustRun(t, db, "ingest", "../../examples/dumps/checkpoints")
	var pts []struct {
		Run   analyzer.RunInfo `json:"run"`
		X     float64          `json:"x"`
		Value float64          `json:"value"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "history", "--metric", "drift", "--json")), &pts); err != nil {
		t.Fatal(err)
	}
	if len(pts) != 4 || pts[0].X != 0 || pts[3].X != 6 {
		t.Fatalf("history points: %+v", pts)
	}
	if pts[0].Value != 0 || !(pts[1].Value > 0 && pts[2].Value > pts[1].Value && pts[3].Value > pts[2].Value) {
		t.Errorf("drift should start at 0 and grow over training: %+v", pts)
	}
	out := mustRun(t, db, "history", "tiny-llama@adamw-3e-3", "--metric", "drift:mlp", "-o", filepath.Join(dir, "hist"))
	if !strings.Contains(out, "history.md") {
		t.Fatal(out)
	}
	for _, f := range []string{"history.md", "history.png", "history.json"} {
		if _, err := os.Stat(filepath.Join(dir, "hist", f)); err != nil {
			t.Error(err)
		}
	}
	md := mustRun(t, db, "diff", "1", "4")
	// the bundled checkpoints carry sketches: ||B - A|| / ||A|| estimated for the matrices, exact
	// for the small norms, which are ranked apart
	if !strings.Contains(md, "16 estimated from the dumps' CountSketches") || !strings.Contains(md, "5 exact") ||
		!strings.Contains(md, "| #1 |") || !strings.Contains(md, "**Norms and biases**, apart") {
		t.Errorf("checkpoint diff lacks drift:\n%s", md)
	}
	mustRun(t, db, "diff", "1", "4", "-o", filepath.Join(dir, "diff"))
	if _, err := os.Stat(filepath.Join(dir, "diff", "weight_drift.png")); err != nil {
		t.Error(err)
	}
	for _, c := range []struct{ args []string }{{[]string{"history", "--metric", "T_est:lunch"}}, {[]string{"history", "--metric", "bogus"}}, {[]string{"diff", "1"}}} {
		if _, _, err := run(t, db, c.args...); err == nil {
			t.Errorf("%v accepted", c.args)
		}
	}
}

// Results are cached per (run, scenario, analyzer version): a second history reads them, a
// new scenario gets new rows, and rows of another analyzer version are never read.
func TestAnalysisCache(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.db")
	mustRun(t, path, "ingest", "../../examples/dumps/checkpoints")
	mustRun(t, path, "history", "--metric", "T_est:decode", "--chip", "H100", "--json")
	ctx := context.Background()
	db, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func() int {
		n := 0
		for id := int64(1); id <= 4; id++ {
			rows, _ := db.CachedResults(ctx, []int64{id}, "", "") // wrong key: nothing
			n += len(rows)
		}
		return n
	}
	if count() != 0 {
		t.Fatal("an empty key matched cache rows")
	}
	o := scenarioForTest(t, "H100")
	key := compare.ScenarioKey(o.scenario, o.targets, o.profiles)
	got, err := db.CachedResults(ctx, []int64{1, 2, 3, 4}, key, analyzer.Version)
	if err != nil || len(got) != 4 {
		t.Fatalf("cached rows for the scenario: %d, %v", len(got), err)
	}
	// Poison the current rows: history must read them (proving it does not recompute)...
	var m compare.RunMetrics
	json.Unmarshal(got[1], &m)
	for i := range m.Phases {
		m.Phases[i].TEst = 42
	}
	b, _ := json.Marshal(m)
	if err := db.PutResult(ctx, 1, key, analyzer.Version, b); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, path, "history", "--metric", "T_est:decode", "--chip", "H100", "--json"); !strings.Contains(out, `"value": 42000`) {
		t.Fatalf("history did not use the cache:\n%s", out)
	}
	// ...while a row under another analyzer version is ignored.
	if err := db.PutResult(ctx, 2, key, "mrep-analyzer/0", b); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, path, "history", "--metric", "T_est:decode", "--chip", "H100", "--json"); strings.Count(out, `"value": 42000`) != 1 {
		t.Fatalf("a stale analyzer version was read:\n%s", out)
	}
	mustRun(t, path, "history", "--metric", "T_est:decode", "--chip", "H200", "--json")
	o2 := scenarioForTest(t, "H200")
	if got, _ := db.CachedResults(ctx, []int64{1, 2, 3, 4}, compare.ScenarioKey(o2.scenario, o2.targets, o2.profiles), analyzer.Version); len(got) != 4 {
		t.Fatalf("a new scenario should be cached under its own key: %d rows", len(got))
	}
}

// scenarioForTest builds the options the commands build from default flags and one chip.
func scenarioForTest(t *testing.T, chip string) scenarioOptions {
	t.Helper()
	app := NewApp(Env{Now: fixedClock, Who: testWho})
	var o scenarioOptions
	cmd := app.Command("analyze")
	action := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		var err error
		o, err = readScenario(c)
		return err
	}
	defer func() { cmd.Action = action }()
	if err := app.Run([]string{"mrep", "--db", filepath.Join(t.TempDir(), "x.db"), "analyze", "--chip", chip}); err != nil {
		t.Fatal(err)
	}
	return o
}

// Two training runs of one model (two labels): history draws one line per label, each with
// its own drift baseline, and a checkpoint is selected by step.
func TestHistoryKeepsLabelsApart(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "h.db")
	mustRun(t, db, "ingest", "../../examples/dumps/checkpoints")
	files, _ := filepath.Glob("../../examples/dumps/checkpoints/*.json.gz")
	for i, f := range files[:2] { // a second run, "lr-b", of two checkpoints
		doc := gzDoc(t, f)
		doc["run"].(map[string]any)["label"] = "lr-b"
		mustRun(t, db, "ingest", writeDoc(t, dir, fmt.Sprintf("b%d.json", i), doc))
	}
	var pts []struct {
		Run struct {
			Label string `json:"label"`
		} `json:"run"`
		Value float64 `json:"value"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "history", "tiny-llama", "--metric", "drift", "--json")), &pts); err != nil {
		t.Fatal(err)
	}
	if len(pts) != 6 || pts[0].Run.Label != "adamw-3e-3" || pts[3].Run.Label != "adamw-3e-3" || pts[4].Run.Label != "lr-b" || pts[5].Run.Label != "lr-b" {
		t.Fatalf("want 4 points of one label then 2 of the other: %+v", pts)
	}
	if pts[0].Value != 0 || pts[4].Value != 0 || pts[5].Value <= 0 {
		t.Errorf("each label's drift starts at 0 at its own first checkpoint: %+v", pts)
	}
	out := filepath.Join(dir, "hist")
	mustRun(t, db, "history", "tiny-llama", "--metric", "drift", "-o", out)
	md, _ := os.ReadFile(filepath.Join(out, "history.md"))
	if !strings.Contains(string(md), "in 2 series (one per label") {
		t.Errorf("history.md does not say it has two series:\n%s", md)
	}
	// MODEL@LABEL#STEP
	show := mustRun(t, db, "show", "tiny-llama@adamw-3e-3#4", "--json")
	if !strings.Contains(show, `"step": 4`) {
		t.Errorf("selector #4 did not pick step 4:\n%.300s", show)
	}
}

// A checkpoint from the training hook carries its measured step: show and history set mrep's
// prediction for the same scenario beside it (chip from the device name), and calibrate
// --from fits a chip to the runs.
func TestMeasuredBesidePredicted(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	files, _ := filepath.Glob("../../examples/dumps/checkpoints/*.json.gz")
	for i, f := range files {
		doc := gzDoc(t, f)
		if i > 0 { // the step-0 checkpoint has nothing timed yet
			doc["measurement"] = map[string]any{"step_time_s": 0.02 + 0.001*float64(i), "steps_timed": 2, "tokens_per_step": 8 * 4096 * 2,
				"seq_len": 4096, "world_size": 2, "device": "NVIDIA H100 80GB HBM3", "precision": "bf16"}
		}
		mustRun(t, db, "ingest", writeDoc(t, dir, fmt.Sprintf("c%d.json", i), doc))
	}
	show := mustRun(t, db, "show", "tiny-llama#6")
	for _, want := range []string{"## Measured vs predicted (training step)", "2 × `NVIDIA H100 80GB HBM3` in bf16", "Predicted on `H100-SXM` (chip from the device name)", "| Step time | 23.000 ms |", "MFU"} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	var view struct {
		Measured struct {
			Predicted float64 `json:"predicted_s"`
			Roofline  float64 `json:"roofline_s"`
		} `json:"measured"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "show", "tiny-llama#6", "--json")), &view); err != nil {
		t.Fatal(err)
	}
	if !(view.Measured.Predicted > 0 && view.Measured.Roofline > 0 && view.Measured.Roofline <= view.Measured.Predicted) {
		t.Errorf("prediction %+v: want 0 < roofline <= predicted", view.Measured)
	}
	hist := mustRun(t, db, "history", "tiny-llama", "--metric", "step_time")
	if !strings.Contains(hist, "3 runs") || !strings.Contains(hist, "measured / predicted") || !strings.Contains(hist, "| NVIDIA H100 80GB HBM3 |") ||
		!strings.Contains(hist, "| H100-SXM |") || strings.Contains(hist, "another device") {
		t.Errorf("history step_time names the device and the chip:\n%s", hist)
	}
	// predicted on another chip than the device: said, and not drawn on the measured line
	mustRun(t, db, "history", "tiny-llama", "--metric", "step_time", "--chip", "B200", "-o", filepath.Join(dir, "h"))
	raw, _ := os.ReadFile(filepath.Join(dir, "h", "history.md"))
	other := string(raw)
	if !strings.Contains(other, "ran on another device than the chip predicted") || !strings.Contains(other, "| B200 |") {
		t.Errorf("history on another chip:\n%s", other)
	}
	out := filepath.Join(dir, "fit.json")
	cal := mustRun(t, db, "calibrate", "--from", "tiny-llama@adamw-3e-3", "-o", out, "--fit", "step_overhead_us")
	if !strings.Contains(cal, "Calibration of H100-SXM (3 rows)") {
		t.Errorf("calibrate --from:\n%s", cal)
	}
	if _, err := os.Stat(out); err != nil {
		t.Error(err)
	}
}

// One run under two scenarios: the diff opens with why the time moved (which terms, and the
// bytes, FLOPs, peak and bandwidth beneath), and a two-run diff opens with it too.
func TestScenarioDiffSaysWhy(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.1-8B.json.gz", "../../examples/dumps/Llama-3.1-8B-mha.json.gz")
	out := mustRun(t, db, "diff", "Llama-3.1-8B", "--scenario-a", "--chip H100 --dtype bf16", "--scenario-b", "--chip H200 --dtype fp8")
	for _, want := range []string{"under two scenarios", "## Why", "- `decode` on H100-SXM bf16 → H200 fp8:", "weights streamed", "(-50%)",
		"HBM bandwidth 3.35 TB/s → 4.80 TB/s (+43%)", "`H100-SXM bf16` → `H200 fp8`"} {
		if !strings.Contains(out, want) {
			t.Errorf("scenario diff lacks %q:\n%s", want, out)
		}
	}
	var d struct {
		Why []string `json:"why"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, db, "diff", "Llama-3.1-8B", "--sa", "--chip H100", "--sb", "--chip H100 -b 8", "--json")), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Why) != 3 || !strings.Contains(d.Why[2], "`decode`") {
		t.Errorf("why per phase: %q", d.Why)
	}
	// two runs: 32 KV heads against 8 → the KV cache read moves decode
	two := mustRun(t, db, "diff", "Llama-3.1-8B@base", "Llama-3.1-8B@mha", "-s", "8192")
	if !strings.Contains(two, "## Why") || !strings.Contains(two, "KV cache read") {
		t.Errorf("two-run diff lacks its why:\n%.2000s", two)
	}
	for _, bad := range [][]string{
		{"diff", "Llama-3.1-8B", "--scenario-a", "--chip H100"},
		{"diff", "Llama-3.1-8B", "--scenario-a", "--chip H100 --bogus", "--scenario-b", "--chip H200"},
		{"diff", "Llama-3.1-8B", "--scenario-a", "--chip H100 --chip H200", "--scenario-b", "--chip H200"},
	} {
		if _, _, err := run(t, db, bad...); exitCode(err) != exitUsage {
			t.Errorf("%v: exit %d (%v), want %d", bad, exitCode(err), err, exitUsage)
		}
	}
}

// H20 is a Hopper with its tensor rate cut to 148 TFLOP/s beside 4 TB/s of HBM: a batch-1
// decode streams the weights, so it runs faster than on H100 by about the bandwidth ratio
// (3.35/4.0; padding one token to a 64-row tile would make it compute-bound at twice H100's
// time), while a prefill is bound by the cut tensor rate.
func TestH20DecodesAtItsBandwidthAndPrefillsAtItsTensorRate(t *testing.T) {
	db := filepath.Join(t.TempDir(), "h20.db")
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.1-8B.json.gz")
	type metrics struct {
		Phases []struct {
			Phase  string  `json:"phase"`
			TEst   float64 `json:"T_est"`
			Regime string  `json:"regime"`
		} `json:"phases"`
	}
	var d struct {
		A metrics `json:"metrics_a"`
		B metrics `json:"metrics_b"`
	}
	raw := mustRun(t, db, "diff", "Llama-3.1-8B", "--scenario-a", "--chip H100", "--scenario-b", "--chip H20", "--json")
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatal(err)
	}
	ratio := map[string]float64{}
	for i, p := range d.B.Phases {
		if i < len(d.A.Phases) && d.A.Phases[i].Phase == p.Phase && d.A.Phases[i].TEst > 0 {
			ratio[p.Phase] = p.TEst / d.A.Phases[i].TEst
		}
		if p.Phase == "decode" && p.Regime != "hbm-bound" {
			t.Errorf("H20 decode is %s, want hbm-bound", p.Regime)
		}
	}
	if r := ratio["decode"]; r < 0.8 || r > 0.95 {
		t.Errorf("H20/H100 decode time %.2f, want about 3.35/4.0 = 0.84", r)
	}
	if r := ratio["prefill"]; r < 4 || r > 6.7 {
		t.Errorf("H20/H100 prefill time %.2f, want between 4 and the peak ratio 989/148 = 6.7", r)
	}
}
