package calib

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/chips"
)

// descendVector finds the minimum of a function whose coordinates trade off (a valley along
// x = y, off the axes), within the golden-section search's tolerance.
func TestDescendVectorFindsAValleysFloor(t *testing.T) {
	loss := func(x []float64) float64 {
		return (x[0]-0.3)*(x[0]-0.3) + 4*(x[0]-x[1])*(x[0]-x[1]) + math.Abs(x[2]-7)
	}
	lo, hi := []float64{0, 0, 0}, []float64{1, 1, 10}
	x, l := descendVector(loss, lo, hi, boxPoints(lo, hi, 0, 0.3, 0.7))
	if l > 1e-5 {
		t.Errorf("loss %g at %v", l, x)
	}
	for i, want := range []float64{0.3, 0.3, 7} {
		if math.Abs(x[i]-want) > 1e-3 {
			t.Errorf("x[%d] = %.5f, want %.3f (x %v)", i, x[i], want, x)
		}
	}
}

// The MoE layer's figures are fitted jointly over the chips that share them: the grouped GEMM's
// fraction by tensor-core generation, the host's pace by host CPU. Fitted on GB200's and B200's
// Megatron-Bridge 25.11 MoE rows, both chips get one grouped-GEMM figure, each its host's pace,
// and each figure's source names its fit set: both chips' rows, or one host's.
func TestMoEFiguresFittedJointlyAcrossChips(t *testing.T) {
	var rows []Row
	for _, r := range Default() {
		if strings.HasPrefix(r.ID, "MB25.11-") && (r.Chip == "GB200" || r.Chip == "B200") && strings.Contains(r.ID, "Qwen3") {
			rows = append(rows, r)
		}
	}
	if len(rows) != 4 {
		t.Fatalf("%d Qwen3 rows on B200 and GB200, want 4", len(rows))
	}
	fits, err := FitLanes(prepared(t, rows))
	if err != nil {
		t.Fatal(err)
	}
	byChip := map[string]LaneFit{}
	for _, f := range fits {
		byChip[f.Lane.Chip] = f
	}
	b, g := byChip["B200"], byChip["GB200"]
	if b.Params == nil || g.Params == nil {
		t.Fatalf("no lane for B200 or GB200: %+v", fits)
	}
	if b.Params["grouped_gemm_frac"] != g.Params["grouped_gemm_frac"] || !(b.Params["grouped_gemm_frac"] > 0.2) {
		t.Errorf("grouped GEMM B200 %g, GB200 %g: one figure for one tensor-core generation", b.Params["grouped_gemm_frac"], g.Params["grouped_gemm_frac"])
	}
	for chip, f := range byChip {
		src := f.Pooled["grouped_gemm_frac"]
		if !strings.Contains(src, "4 megatron MoE training rows on Blackwell chips (B200, GB200") {
			t.Errorf("%s grouped GEMM source %q does not name the joint fit set", chip, src)
		}
		host := map[string]string{"B200": "x86", "GB200": "Grace"}[chip]
		if src := f.Pooled["moe_launch_us"]; !strings.Contains(src, "2 megatron MoE training rows on "+host+" chips ("+chip+":") {
			t.Errorf("%s host pace source %q does not name its host's rows", chip, src)
		}
		if f.Rows != 2 {
			t.Errorf("%s lane counts %d rows, want its 2", chip, f.Rows)
		}
	}
	// the lanes carry to the chips: each chip's efficiency takes its own pooled figures
	db := map[string]chips.Efficiency{}
	for _, name := range []string{"B200", "GB200", "B300"} {
		c, _ := chips.Default().Lookup(name)
		e := c.Efficiency
		e.Lanes = nil
		db[name] = e
	}
	got := WithLanes(db, fits)
	for _, name := range []string{"B200", "GB200", "B300"} {
		if v := got[name].Lane("megatron").GroupedGEMMFrac; v != g.Params["grouped_gemm_frac"] {
			t.Errorf("%s grouped GEMM %g, want the pooled %g", name, v, g.Params["grouped_gemm_frac"])
		}
	}
	if got["B300"].Lane("megatron").MoELaunchUs != b.Params["moe_launch_us"] {
		t.Errorf("B300 (x86 host) takes B200's host pace %g, got %g", b.Params["moe_launch_us"], got["B300"].Lane("megatron").MoELaunchUs)
	}
}

// The shipped lanes hold one grouped-GEMM figure per tensor-core generation and one host pace
// per host CPU, as calibrate --lanes fits them.
func TestShippedMoEFiguresArePooled(t *testing.T) {
	groups := map[string]float64{}
	for _, c := range chips.Default().All() {
		e, ok := c.Efficiency.Lanes["megatron"]
		if !ok || e.GroupedGEMMFrac == 0 {
			continue
		}
		for _, k := range []struct {
			name string
			v    float64
		}{{"grouped " + tensorCores(c.Name), e.GroupedGEMMFrac}, {"host " + hostCPU(c.Name), e.MoELaunchUs}} {
			if v, ok := groups[k.name]; ok && v != k.v {
				t.Errorf("%s: %s %g, another chip of the group has %g", c.Name, k.name, k.v, v)
			}
			groups[k.name] = k.v
		}
		if src := e.Sources["grouped_gemm_frac"]; !strings.Contains(src, "jointly") && !strings.Contains(src, "carried") {
			t.Errorf("%s grouped GEMM source %q", c.Name, src)
		}
	}
	for _, g := range []string{"grouped Blackwell", "grouped Hopper", "host x86", "host Grace"} {
		if _, ok := groups[g]; !ok {
			t.Errorf("no shipped figure for %s: %v", g, groups)
		}
	}
	// a figure too few rows time, or one its own rows left out say predicts them worse than a
	// larger group's, is not fitted on them: it takes the figure of the group it names, and
	// says why
	shared := 0
	for _, c := range chips.Default().All() {
		e, ok := c.Efficiency.Lanes["megatron"]
		if !ok {
			continue
		}
		for _, f := range []struct {
			name, group string
			v           float64
		}{{"grouped_gemm_frac", "grouped ", e.GroupedGEMMFrac}, {"moe_launch_us", "host ", e.MoELaunchUs}} {
			src := e.Sources[f.name]
			g, ok := strings.CutPrefix(src, "shared with ")
			if !ok {
				continue
			}
			shared++
			g, _, _ = strings.Cut(g, " chips")
			if groups[f.group+g] != f.v || !strings.Contains(src, "fewer than two") && !strings.Contains(src, "left out worse") {
				t.Errorf("%s: %s %g shared with %s (%g): %q", c.Name, f.name, f.v, g, groups[f.group+g], src)
			}
		}
	}
	if shared == 0 {
		t.Error("no shipped MoE figure is shared: Hopper's grouped GEMM is, by its rows left out")
	}
}

// AMD's MI355X micro-batch sweep (Primus, DeepSeek-V2-Lite on 8 GPUs) separates the host from
// the GPU: throughput doubles from MBS 1 to 2 (the host issues a micro-batch in the same time
// whatever its size) and stays flat from 8 to 12 (the GPU's time grows with the tokens). The
// Instinct lane must reproduce that shape, not only the mean, and its host figure is a ROCm
// host's own: no CUDA host's figure moves with it.
func TestInstinctLaneSeparatesHostFromGPU(t *testing.T) {
	rep, err := Validate(prepared(t, Default()), nil)
	if err != nil {
		t.Fatal(err)
	}
	pred, meas := map[int]float64{}, map[int]float64{}
	for _, r := range rep.Rows {
		var mbs int
		if _, err := fmt.Sscanf(r.ID, "PRIMUS-DSV2Lite-mi355x-8gpu-mbs%d", &mbs); err == nil {
			pred[mbs], meas[mbs] = r.Predicted, r.Measured
		}
	}
	if len(pred) != 5 {
		t.Fatalf("the sweep's five baseline rows, got %v", pred)
	}
	for _, c := range []struct {
		from, to int
		min, max float64
		what     string
	}{{1, 2, 1.7, 2.05, "host-bound: twice the tokens in the same time"}, {8, 12, 0.95, 1.08, "GPU-bound: flat"}} {
		got, want := pred[c.to]/pred[c.from], meas[c.to]/meas[c.from]
		if got < c.min || got > c.max {
			t.Errorf("MBS %d -> %d: predicted x%.2f (measured x%.2f), want %s", c.from, c.to, got, want, c.what)
		}
	}
	mi, err := chips.Default().Lookup("MI355X")
	if err != nil {
		t.Fatal(err)
	}
	h100, err := chips.Default().Lookup("H100-SXM")
	if err != nil {
		t.Fatal(err)
	}
	amd, nv := mi.Efficiency.Lanes["megatron"], h100.Efficiency.Lanes["megatron"]
	if amd.MoELaunchUs <= MaxMoELaunchUs || amd.MoELaunchUs > MaxROCmMoELaunchUs || amd.MoELaunchUs == nv.MoELaunchUs {
		t.Errorf("MI355X host pace %g us (H100's %g): want its own, past the CUDA bound %d and within %d", amd.MoELaunchUs, nv.MoELaunchUs, MaxMoELaunchUs, MaxROCmMoELaunchUs)
	}
	if src := amd.Sources["moe_launch_us"]; !strings.Contains(src, "Primus") || strings.Contains(src, "shared with") {
		t.Errorf("MI355X host pace source %q: want fitted on AMD's Primus rows", src)
	}
}

// Every field a JSON row has is a CSV column too, read into the same field: a knob added to
// rows (cuda_graph was one) cannot be left out of the CSV reader.
func TestEveryRowFieldIsACSVColumn(t *testing.T) {
	rt := reflect.TypeOf(Row{})
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || name == "id" {
			continue
		}
		v := map[reflect.Kind]string{reflect.Bool: "true", reflect.Int: "3", reflect.Int64: "3", reflect.Float64: "1.5", reflect.String: "x",
			reflect.Slice: "a;b", reflect.Pointer: "true"}[f.Type.Kind()]
		if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
			v = `"{""name"": ""P"", ""source"": ""f @v1"", ""pp"": 4}"` // an object: its JSON, CSV-quoted
		}
		if v == "" {
			t.Errorf("%s: a %s field, which CSV cannot carry", name, f.Type)
			continue
		}
		rows, err := parseCSV([]byte("id," + name + "\nr," + v + "\n"))
		if err != nil {
			t.Errorf("column %s: %v", name, err)
			continue
		}
		if got := reflect.ValueOf(rows[0]).Field(i); got.IsZero() {
			t.Errorf("column %s = %s left the field zero", name, v)
		}
	}
}
