package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/calib"
)

// A row's cited preset and the setting it is predicted under come from a rows file the user
// hands validate: they reach the markdown escaped (no table cell broken by a pipe, no HTML
// rendered), and the table of rows whose preset states another layout lists each such row.
func TestValidationShowsCitedPresetsEscaped(t *testing.T) {
	rep := calib.Report{Rows: []calib.Result{
		{ID: "fits", Phase: "training", Measured: 100, Predicted: 110, Ratio: 1.1, Unit: "tok/s/gpu", Model: "m", Chip: "c", Fits: true,
			UnusedPreset: "P|<script>x</script> (--ep 16; f.py @v1 abc)"},
		{ID: "refit", Phase: "training", Measured: 100, Predicted: 95, Ratio: 0.95, Unit: "tok/s/gpu", Model: "m", Chip: "c", Fits: true,
			AsStated: 70, FitsWith: &calib.Refit{Setting: "its release's preset Q|<b> (--vp 5)", Predicted: 95, Ratio: 0.95}},
	}}
	var b bytes.Buffer
	if err := WriteValidation(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"**Rows whose release preset states another layout** (1)", `P\|&lt;script&gt;x&lt;/script&gt; (--ep 16; f.py @v1 abc)`,
		`its release's preset Q\|&lt;b&gt; (--vp 5)`, "+10.0%"} {
		if !strings.Contains(out, want) {
			t.Errorf("validation output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "<script>") || strings.Contains(out, "<b>") {
		t.Errorf("HTML from a rows file reached the markdown:\n%s", out)
	}
}
