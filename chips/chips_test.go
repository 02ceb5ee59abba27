package chips

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestEmbeddedCoversTheRequiredChips(t *testing.T) {
	db := Default()
	for _, name := range []string{"H100-SXM", "H100-PCIe", "H200", "H800", "H20", "B200", "GB200", "A100-SXM", "A100-PCIe", "L40S", "L4",
		"A10", "V100", "MI300X", "MI325X", "MI355X", "TPU-v5e", "TPU-v5p", "TPU-v6e", "Gaudi3"} {
		c, err := db.Lookup(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(c.Sources) == 0 || c.HBMGBps <= 0 || c.MemoryGiB <= 0 {
			t.Errorf("%s lacks figures or sources: %+v", name, c)
		}
	}
}

// Dense figures as ../shared/refs/chips.md lists them, and its derived ridge points.
func TestDenseFiguresAndRidges(t *testing.T) {
	db := Default()
	cases := []struct {
		chip, dtype string
		peak, bw    float64
		ridge       float64
	}{
		{"h100", "bf16", 989.4, 3350, 295},
		{"H200", "bf16", 989.4, 4800, 206},
		{"H200", "fp8", 1978.9, 4800, 412.3},
		{"h20", "bf16", 148, 4000, 37}, // a rate-limited Hopper: H100's ridge cut 8x
		{"B200", "bf16", 2250, 7700, 292},
		{"GB200", "bf16", 2500, 8000, 313},
		{"A100", "bf16", 312, 2039, 153},
		{"L40S", "bf16", 362.05, 864, 419},
		{"L4", "bf16", 121, 300, 403},
		{"MI300X", "bf16", 1307.4, 5300, 247},
		{"MI325X", "bf16", 1307.4, 6000, 218},
		{"MI355X", "bf16", 2500, 8000, 313},
		{"v5e", "bf16", 197, 819, 240},
		{"v5p", "bf16", 459, 2765, 166},
		{"v6e", "bf16", 918, 1640, 560},
		{"gaudi3", "bf16", 1835, 3670, 500},
	}
	for _, c := range cases {
		chip, err := db.Lookup(c.chip)
		if err != nil {
			t.Fatal(err)
		}
		p, err := chip.Peak(c.dtype)
		if err != nil {
			t.Fatal(err)
		}
		if p != c.peak*1e12 || chip.HBMGBps != c.bw {
			t.Errorf("%s %s: peak %g bw %g", c.chip, c.dtype, p, chip.HBMGBps)
		}
		if ridge := p / chip.HBMBytesPerSec(); math.Abs(ridge-c.ridge) > 0.6 { // chips.md rounds
			t.Errorf("%s ridge %.1f, chips.md says %.0f", c.chip, ridge, c.ridge)
		}
	}
}

func TestMissingPeakAndUnknownChip(t *testing.T) {
	db := Default()
	a100, _ := db.Lookup("A100-SXM")
	if _, err := a100.Peak("fp8"); !errors.Is(err, ErrNoPeak) || !strings.Contains(err.Error(), "bf16") {
		t.Fatalf("A100 fp8: %v", err)
	}
	if _, err := db.Lookup("H900"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "H200") {
		t.Fatalf("unknown: %v", err)
	}
}

func TestUserFileAddsAndReplaces(t *testing.T) {
	user := `{"chips": [
	 {"name": "MyChip", "vendor": "me", "title": "x", "peak_tflops": {"bf16": 100}, "memory_gib": 10, "hbm_gbps": 1000,
	  "scale_up_gbps": 64, "scale_out_gbps": 0, "tdp_w": 0, "onchip_mib": 0, "sources": ["my lab"]},
	 {"name": "H200", "vendor": "NVIDIA", "title": "derated", "peak_tflops": {"bf16": 800}, "memory_gib": 141, "hbm_gbps": 4000,
	  "scale_up_gbps": 900, "scale_out_gbps": 50, "tdp_w": 700, "onchip_mib": 50, "sources": ["measured"]}]}`
	u, err := Parse("mine.json", strings.NewReader(user))
	if err != nil {
		t.Fatal(err)
	}
	db := Default()
	if err := db.Merge(u); err != nil {
		t.Fatal(err)
	}
	if c, err := db.Lookup("mychip"); err != nil || c.HBMGBps != 1000 {
		t.Fatal(c, err)
	}
	if c, _ := db.Lookup("h200-sxm"); c.Title != "derated" {
		t.Fatalf("alias lookup after replace: %+v", c)
	}
	_, err = Parse("bad.json", strings.NewReader(`{"chips": [{"name": "X", "peak_tflops": {"bf16": 1}, "memory_gib": 1, "hbm_gbps": 1, "scale_up_gbps": 1}]}`))
	if err == nil || !strings.Contains(err.Error(), "bad.json: /chips/0: X: every chip needs sources") {
		t.Fatalf("missing sources: %v", err)
	}
}

func TestSystems(t *testing.T) {
	db := Default()
	for _, c := range []struct {
		name, chip string
		domain     int
		out        float64
	}{{"dgx-h100", "H100-SXM", 8, 50}, {"gb200-nvl72", "GB200", 72, 50}, {"gb300-nvl72", "GB300", 72, 100}, {"dgx-b300", "B300", 8, 100}, {"DGX-A100", "A100-SXM", 8, 25}, {"hgx-h20", "H20", 8, 50}} {
		s, chip, err := db.System(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if chip.Name != c.chip || chip.Efficiency.ScaleUpDomain != c.domain || chip.ScaleOutGBps != c.out || len(s.Sources) == 0 {
			t.Errorf("%s: %s domain %d out %g", c.name, chip.Name, chip.Efficiency.ScaleUpDomain, chip.ScaleOutGBps)
		}
	}
	if _, _, err := db.System("dgx-z9"); !errors.Is(err, ErrUnknownSystem) {
		t.Errorf("unknown system: %v", err)
	}
	if _, err := Parse("s.json", strings.NewReader(`{"chips":[],"systems":[{"name":"x","chip":"H100","gpus_per_node":0,"scale_up_domain":8,"scale_up_gbps":1,"scale_out_gbps":1,"sources":["s"]}]}`)); err == nil || !strings.Contains(err.Error(), "/systems/0") {
		t.Errorf("bad system: %v", err)
	}
}

func TestForDevice(t *testing.T) {
	db := Default()
	for device, want := range map[string]string{
		"NVIDIA H100 80GB HBM3":   "H100-SXM",
		"NVIDIA H100 PCIe":        "H100-PCIe",
		"NVIDIA H100 NVL":         "H100-NVL",
		"NVIDIA A100-SXM4-80GB":   "A100-SXM",
		"NVIDIA H200":             "H200",
		"NVIDIA H20":              "H20", // not H200: whole name parts only
		"AMD Instinct MI300X":     "MI300X",
		"cpu":                     "",
		"NVIDIA GeForce RTX 4090": "",
	} {
		c, ok := db.ForDevice(device)
		if got := map[bool]string{true: c.Name, false: ""}[ok]; got != want {
			t.Errorf("ForDevice(%q) = %q, want %q", device, got, want)
		}
	}
}

// Figures outside physical bounds are refused naming the field and the bound: a negative TDP
// would print negative joules, a 1e300 peak or bandwidth infinite capacity.
func TestPhysicalBounds(t *testing.T) {
	base := `{"chips":[{"name":"X","peak_tflops":{"bf16":%s},"memory_gib":80,"hbm_gbps":%s,"scale_up_gbps":450,"tdp_w":%s,"sources":["s"]}]}`
	for _, c := range []struct{ peak, hbm, tdp, want string }{
		{"1000", "3000", "-700", "tdp_w -700 is outside the physical range"},
		{"1e300", "3000", "700", "peak_tflops.bf16 1e+300 is outside the physical range"},
		{"1000", "1e300", "700", "hbm_gbps 1e+300 is outside the physical range"},
	} {
		_, err := Parse("x.json", strings.NewReader(fmt.Sprintf(base, c.peak, c.hbm, c.tdp)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if _, err := Parse("ok.json", strings.NewReader(fmt.Sprintf(base, "1000", "3000", "700"))); err != nil {
		t.Errorf("a physical chip: %v", err)
	}
}

// The attention figures of sliding windows and sinks are keys and nanoseconds: never negative.
func TestAttentionWindowFiguresAreChecked(t *testing.T) {
	base := `{"chips":[{"name":"X","peak_tflops":{"bf16":1000},"memory_gib":80,"hbm_gbps":3000,"scale_up_gbps":450,"sources":["s"],` +
		`"efficiency":{"%s":%s,"sources":{"%s":"mine"}}}]}`
	for _, field := range []string{"attn_window_k0", "attn_window_k0_bwd", "attn_sink_bwd_ns"} {
		_, err := Parse("x.json", strings.NewReader(fmt.Sprintf(base, field, "-1", field)))
		if err == nil || !strings.Contains(err.Error(), "x.json: /chips/0: X: efficiency."+field+" must be >= 0") {
			t.Errorf("%s = -1: %v", field, err)
		}
		db, err := Parse("x.json", strings.NewReader(fmt.Sprintf(base, field, "300", field)))
		if err != nil {
			t.Fatalf("%s = 300: %v", field, err)
		}
		c, _ := db.Lookup("X")
		if got := map[string]float64{"attn_window_k0": c.Efficiency.AttnWindowK0, "attn_window_k0_bwd": c.Efficiency.AttnWindowK0Bwd,
			"attn_sink_bwd_ns": c.Efficiency.AttnSinkBwdNs}[field]; got != 300 {
			t.Errorf("%s read as %g", field, got)
		}
	}
}

// cuDNN's training attention figures are fractions of a peak, under the six keys timing reads;
// a figure out of (0, 1], an unknown key or a missing source is refused naming the file.
func TestTrainAttentionFiguresAreChecked(t *testing.T) {
	base := `{"chips":[{"name":"X","peak_tflops":{"bf16":1000,"fp8":2000},"memory_gib":80,"hbm_gbps":3000,"scale_up_gbps":450,"sources":["s"],` +
		`"efficiency":{"train_attn_frac":%s,"sources":{%s}}}]}`
	for _, c := range []struct{ figs, srcs, want string }{
		{`{"mxfp8":1.4}`, `"train_attn_frac":"mine"`, "efficiency.train_attn_frac.mxfp8 must be in (0, 1]"},
		{`{"fp4":0.3}`, `"train_attn_frac":"mine"`, "efficiency.train_attn_frac.fp4: want one of bf16"},
		{`{"bf16":0.6}`, `"attn_frac":"x"`, "efficiency.sources.train_attn_frac: every efficiency figure needs a source"},
	} {
		_, err := Parse("x.json", strings.NewReader(fmt.Sprintf(base, c.figs, c.srcs)))
		if err == nil || !strings.Contains(err.Error(), "x.json") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.figs, err, c.want)
		}
	}
	db, err := Parse("x.json", strings.NewReader(fmt.Sprintf(base, `{"bf16":0.6,"mxfp8_bwd":0.3}`, `"train_attn_frac":"mine"`)))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := db.Lookup("X"); c.Efficiency.TrainAttnFrac["mxfp8_bwd"] != 0.3 {
		t.Errorf("train_attn_frac read as %v", c.Efficiency.TrainAttnFrac)
	}
}
