package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/internal/output"
)

// Golden markdown and golden SVG for every chart of a dense (GQA, tied), an MoE and an MLA
// model. Byte-stable: injected clock, fixed run ids, deterministic charts.
func TestReportGolden(t *testing.T) {
	cases := []struct {
		name, dump string
		args       []string
	}{
		{"dense-llama-3.2-1b", "Llama-3.2-1B-Instruct", []string{"--chip", "H100", "-b", "4", "-s", "1024", "--sensitivity", "small_grid"}},
		{"moe-mixtral-8x7b", "Mixtral-8x7B-v0.1", []string{"--chip", "H200", "--chip", "MI300X", "-b", "8", "-s", "2048", "--ep", "2", "--sensitivity", "small_grid"}},
		{"mla-deepseek-v3", "DeepSeek-V3", []string{"--chip", "H200", "--chip", "B200", "--dtype", "fp8", "-b", "8", "-s", "255"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "r.db")
			mustRun(t, db, "ingest", "../../examples/dumps/"+c.dump+".json.gz")
			out := filepath.Join(dir, "out")
			mustRun(t, db, append([]string{"report", "latest", "-o", out, "--svg"}, c.args...)...)
			entries, err := os.ReadDir(out)
			if err != nil {
				t.Fatal(err)
			}
			var svgs int
			for _, e := range entries {
				name := e.Name()
				if name == output.Manifest {
					continue // the list of what mrep wrote, so a later run replaces only its own output
				}
				if strings.HasPrefix(name, ".") {
					t.Errorf("temp file left behind: %s", name)
				}
				b, err := os.ReadFile(filepath.Join(out, name))
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case name == "report.md" || strings.HasSuffix(name, ".svg"):
					golden(t, filepath.Join("report", c.name, name), string(b))
					if strings.HasSuffix(name, ".svg") {
						svgs++
					}
				case strings.HasSuffix(name, ".png"):
					if !bytes.HasPrefix(b, []byte("\x89PNG")) {
						t.Errorf("%s is not a PNG", name)
					}
				}
			}
			if svgs != 9 {
				t.Errorf("%d SVG charts, want 9", svgs)
			}
			md, _ := os.ReadFile(filepath.Join(out, "report.md"))
			for _, img := range []string{"roofline.png", "decode_batch_roofline.png", "module_pie.png"} {
				if !bytes.Contains(md, []byte("]("+img+")")) {
					t.Errorf("report.md does not link %s", img)
				}
			}
		})
	}
}

func TestReportOfAPlainSequentialAndWeights(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	mustRun(t, db, "ingest", "../../schemas/testdata/valid/mlp_stats.json", "../../examples/dumps/tiny-llama-trace.json.gz")
	out := filepath.Join(dir, "mlp")
	mustRun(t, db, "report", "mlp", "-o", out)
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	// not a transformer: parameters, memory and statistics, and one sentence instead of the
	// time model's phases
	for _, want := range []string{"Total parameters | 58", "weight_distributions.png", "not a transformer", "This run was not traced."} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("plain MLP report lacks %q", want)
		}
	}
	for _, not := range []string{"Sensitivity Analysis", "decode_batch_roofline", "B_crit≈", "Tokens/s"} {
		if bytes.Contains(md, []byte(not)) {
			t.Errorf("plain MLP report has the transformer section %q", not)
		}
	}
	out = filepath.Join(dir, "tiny")
	mustRun(t, db, "report", "tiny-llama@trace", "-o", out, "--sensitivity", "off", "--no-diagrams", "--no-appendix")
	md, _ = os.ReadFile(filepath.Join(out, "report.md"))
	if bytes.Contains(md, []byte("```mermaid")) || bytes.Contains(md, []byte("Appendix A")) {
		t.Error("--no-diagrams / --no-appendix ignored")
	}
	if _, err := os.Stat(filepath.Join(out, "sensitivity.csv")); !os.IsNotExist(err) {
		t.Error("sensitivity off still wrote a CSV")
	}
	if _, _, err := run(t, db, "report", "-o", out, "--sensitivity", "huge"); err == nil || !strings.Contains(err.Error(), "sensitivity profile \"huge\"") {
		t.Errorf("bad sensitivity profile: %v", err)
	}
}
