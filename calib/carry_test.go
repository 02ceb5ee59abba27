package calib

import (
	"math"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/chips"
)

// The kernels' chip-to-chip ratio against the lanes' own fits: where two Blackwell chips each
// have a megatron FP8 GEMM fraction fitted on their own runs, carrying one to the other through
// the measured kernels' ratio lands nearer the other's own fit than carrying it unscaled
// (B200 and GB200 within 2%, GB300 from GB200 12% and from B200 14% off its own, where unscaled they are 23% and 21% off: the kernels, timed briefly, see less of GB300's lead than its training runs), and
// the carried B300 figure says where it came from: B200's, the HGX board of its power class
// (SiliconFallback says why).
func TestKernelRatioCarriesTheLaneFit(t *testing.T) {
	db := chips.Default()
	own := map[string]float64{}
	for _, name := range []string{"B200", "GB200", "GB300"} {
		c, err := db.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := c.Efficiency.Lanes["megatron"].GEMMFrac["fp8"]
		if !ok || !strings.HasPrefix(c.Efficiency.Lanes["megatron"].Sources["gemm_frac"], "fitted") {
			t.Fatalf("%s: no megatron FP8 fraction fitted on its own rows", name)
		}
		own[name] = v
	}
	for to, want := range own {
		for from, v := range own {
			if to == from {
				continue
			}
			carried, why := carriedGEMMFrac(to, from, "fp8", v)
			if why == "" {
				t.Fatalf("%s from %s: no kernel ratio", to, from)
			}
			scaled, unscaled := math.Abs(math.Log(carried/want)), math.Abs(math.Log(v/want))
			if !(scaled < unscaled) {
				t.Errorf("%s from %s: carried %.4f (%.1f%% off its own %.4f), unscaled %.4f (%.1f%% off)", to, from, carried, 100*scaled, want, v, 100*unscaled)
			}
			bound := 0.15
			if to != "GB300" && from != "GB300" {
				bound = 0.02
			}
			if scaled > bound {
				t.Errorf("%s from %s: carried %.4f is %.1f%% off its own %.4f, over %.0f%%", to, from, carried, 100*scaled, want, 100*bound)
			}
		}
	}
	b300, err := db.Lookup("B300")
	if err != nil {
		t.Fatal(err)
	}
	lane := b300.Efficiency.Lanes["megatron"]
	r, ok := shippedFracRatio("B300", "B200", "fp8")
	if !ok || math.Abs(lane.GEMMFrac["fp8"]-own["B200"]*r.ratio) > 1e-4 ||
		!strings.Contains(lane.Sources["gemm_frac"], "B300's measured fp8 GEMM fraction over B200's") {
		t.Errorf("B300's megatron FP8 fraction %.4f (B200's %.4f x %.3f), source %q", lane.GEMMFrac["fp8"], own["B200"], r.ratio, lane.Sources["gemm_frac"])
	}
	// no measured kernels for one side: carried as fitted
	if v, why := carriedGEMMFrac("H100-96GB", "H100-SXM", "fp8", 0.5); v != 0.5 || why != "" {
		t.Errorf("H100-96GB has no kernel tables, yet the carry scaled %g (%q)", v, why)
	}
}
