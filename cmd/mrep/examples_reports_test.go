package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The committed example reports are make reports' own output: regenerated here from the bundled
// dumps at the Makefile's SOURCE_DATE_EPOCH, their report.md must match the committed one, so a
// change to the time model cannot leave them describing an older mrep (they had: DeepSeek-V3's
// FP8 training on H200 read 1.35 PFLOP realizable where the code gave 2.44).
func TestCommittedExampleReportsAreCurrent(t *testing.T) {
	epoch := time.Unix(1767225600, 0).UTC() // Makefile: reports: export SOURCE_DATE_EPOCH
	dir := t.TempDir()
	db := filepath.Join(dir, "reports.db")
	runAt := func(args ...string) {
		t.Helper()
		if _, errOut, err := runIn(t, Env{Now: func() time.Time { return epoch }, Who: testWho}, db, args...); err != nil {
			t.Fatalf("mrep %v: %v\n%s", args, err, errOut)
		}
	}
	dumps := filepath.Join("..", "..", "examples", "dumps")
	runAt("ingest", filepath.Join(dumps, "DeepSeek-V3.json.gz"), filepath.Join(dumps, "Llama-3.1-8B.json.gz"))
	for _, c := range []struct {
		name string
		args []string
	}{
		{"deepseek-v3-h200-fp8", []string{"report", "DeepSeek-V3", "--chip", "H200", "--chip", "B200", "--dtype", "fp8", "-b", "8", "-s", "255"}},
		{"llama-3.1-8b-h100-bf16", []string{"report", "Llama-3.1-8B", "--chip", "H100", "--chip", "A100", "--chip", "MI300X", "-b", "8", "-s", "2048"}},
	} {
		out := filepath.Join(dir, c.name)
		runAt(append(c.args, "-o", out)...)
		got, err := os.ReadFile(filepath.Join(out, "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "examples", "reports", c.name, "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("examples/reports/%s/report.md is stale: run make reports", c.name)
		}
	}
}
