package render

import (
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/calib"
)

// calibrate --lanes lists each jointly fitted MoE figure once, with its value and fit set, below
// the chips' own fits; a fit set's text is escaped like every other name in the table.
func TestLaneFitsListPooledFiguresOnce(t *testing.T) {
	src := "fitted jointly to the 14 megatron MoE training rows on Blackwell chips (B200, GB200|x)"
	fits := []calib.LaneFit{
		{Lane: calib.LaneKey{Framework: "megatron", Chip: "B200"}, Rows: 4, Params: map[string]float64{"gemm_frac.fp8": 0.44, "grouped_gemm_frac": 0.4884},
			Pooled: map[string]string{"grouped_gemm_frac": src}},
		{Lane: calib.LaneKey{Framework: "megatron", Chip: "GB200"}, Rows: 4, Params: map[string]float64{"gemm_frac.fp8": 0.46, "grouped_gemm_frac": 0.4884},
			Pooled: map[string]string{"grouped_gemm_frac": src}},
		{Lane: calib.LaneKey{Framework: "fsdp", Chip: "A100-SXM"}, Rows: 7, Params: map[string]float64{"gemm_frac.bf16": 0.7}},
	}
	var b strings.Builder
	if err := WriteLaneFits(&b, fits, nil); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if n := strings.Count(out, "| `grouped_gemm_frac` | 0.4884 |"); n != 1 {
		t.Errorf("the pooled figure is listed %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, `GB200\|x`) {
		t.Errorf("the fit set's pipe is not escaped:\n%s", out)
	}
	if !strings.Contains(out, "Fitted jointly over the chips that share them") {
		t.Errorf("no pooled section:\n%s", out)
	}
	var none strings.Builder
	if err := WriteLaneFits(&none, fits[2:], nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(none.String(), "jointly") {
		t.Errorf("a pooled section without pooled figures:\n%s", none.String())
	}
}
