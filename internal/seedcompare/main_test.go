package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The comparison reads the seed example's tables (carried in testdata, so nothing outside the
// repository is needed) and mrep's results; it fails loudly if a table is missing.
func TestComparisonAgainstTheSeed(t *testing.T) {
	out := filepath.Join(t.TempDir(), "c.md")
	if err := run("testdata/seed001_tables.md", "../../examples/dumps/DeepSeek-V3.json.gz", out); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	md := string(b)
	for _, want := range []string{"## Regime KPI matrix", "| `decode` | `efficient` | 13.37 TF", "| 128 | 1.439e+01", "## Mode byte decomposition", "⚠ yes"} {
		if !strings.Contains(md, want) {
			t.Errorf("comparison lacks %q", want)
		}
	}
	// decode KV agrees to the byte; prefill weights within 1%
	if !strings.Contains(md, "| `decode` | `naive` | `bytes_kv` | 68.62 MB | 68.62 MiB | +0.0% |") {
		t.Error("decode KV bytes should agree with the seed")
	}
	committed, err := os.ReadFile("../../examples/reports/COMPARISON.md")
	if err != nil || string(committed) != md {
		t.Error("examples/reports/COMPARISON.md is stale: go run ./internal/seedcompare")
	}
}
