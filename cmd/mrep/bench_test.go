package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/internal/scaledump"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/report"
	"github.com/mrep-dev/mrep/store"
)

// The full DeepSeek-V3 report: analysis, sweeps, exploration, the 432-point grid, every chart
// as PNG and SVG, CSV, JSON and markdown, written to disk. Goal (issue 5): <= 2 s on 2 cores.
func BenchmarkReportDeepSeekV3(b *testing.B) {
	d, err := ingest.ReadFile("../../examples/dumps/DeepSeek-V3.json.gz", ingest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	s := analyzer.DefaultScenario()
	s.Batch, s.Seq, s.KVLen = 8, 255, 255
	s.WeightBytes, s.ActBytes, s.KVBytes, s.ComputeDType = 1, 1, 1, "fp8"
	var targets []analyzer.Target
	for _, n := range []string{"H200", "B200"} {
		c, _ := chips.Default().Lookup(n)
		t, _ := newTarget(c, "fp8")
		targets = append(targets, t)
	}
	dir := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		data, err := report.Build(d, analyzer.RunInfo{ID: 1, Name: "DeepSeek-V3"}, s, targets,
			[]analyzer.ExecProfile{analyzer.Naive, analyzer.Efficient}, report.DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		if len(data.Sensitivity) != 432 {
			b.Fatal(len(data.Sensitivity))
		}
		if _, err := writeReport(dir, data, reportFiles{chart: render.ChartOptions{LabelMode: "minimal"},
			md: render.ReportOptions{Generated: time.Unix(0, 0), Diagrams: true, Appendix: true}, svg: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// `mrep history --metric T_est:decode` over 1,000 checkpoints of one model with cached results,
// end to end in process (open, list, one cache query, render). Goal (issue 6): <= 200 ms.
func BenchmarkHistory1000Cached(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "h.db")
	ctx := context.Background()
	db, err := store.Open(ctx, path, store.Options{Now: fixedClock})
	if err != nil {
		b.Fatal(err)
	}
	d, err := ingest.ReadFile("../../examples/dumps/checkpoints/adamw-3e-3-step00000000.json.gz", ingest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := int64(0); i < 1000; i++ {
		c := *d
		step := i * 10
		c.Run.Step = &step
		c.Run.ContentHash = fmt.Sprintf("sha256:%064x", i)
		if _, _, err := db.Ingest(ctx, &c, ""); err != nil {
			b.Fatal(err)
		}
	}
	db.Close()
	args := []string{"history", "tiny-llama@adamw-3e-3", "--metric", "T_est:decode", "--chip", "H100", "--json"}
	mustRun(b, path, args...) // fills the cache
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		mustRun(b, path, args...)
	}
}

// The scale goal of issue 10: a valid dump of 200,000 modules and 500,000 tensors (67 MB).
// go test ./cmd/mrep -run '^$' -bench Scale -benchtime 1x
func scaleDump(b *testing.B) string {
	b.Helper()
	p := filepath.Join(b.TempDir(), "scale.json")
	if err := scaledump.Write(p, 200000, 500000); err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkIngestScale(b *testing.B) {
	p := scaleDump(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		db := filepath.Join(b.TempDir(), "s.db")
		mustRun(b, db, "ingest", p)
	}
}

func BenchmarkReportScale(b *testing.B) {
	p := scaleDump(b)
	db := filepath.Join(b.TempDir(), "s.db")
	mustRun(b, db, "ingest", p)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		mustRun(b, db, "report", "1", "-o", filepath.Join(b.TempDir(), "r"))
	}
}

// The same 200,000-module dump into a PostgreSQL history (issue 24), on this machine's own
// server (internal/pgtest; skipped where there is none).
// go test ./cmd/mrep -run '^$' -bench IngestScalePostgres -benchtime 1x
func BenchmarkIngestScalePostgres(b *testing.B) {
	p := scaleDump(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		db := pgDB(b)
		b.StartTimer()
		mustRun(b, db, "ingest", p)
	}
}

// `mrep history` over 10,000 runs (issue 24: <= 1 s on both backends). The runs are
// checkpoints of one tiny model, stored once per backend before the timer starts.
func BenchmarkHistory10k(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			var db string
			if backend == "sqlite" {
				db = filepath.Join(b.TempDir(), "h.db")
			} else {
				db = pgDB(b)
			}
			fillHistory(b, db, 10000)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				out := mustRun(b, db, "history", "tiny-llama@ckpt", "--metric", "params")
				if !strings.Contains(out, "10000 runs") {
					b.Fatalf("history:\n%.500s", out)
				}
			}
		})
	}
}

// fillHistory stores n checkpoints of the tiny-llama dump (steps 1..n), in one transaction.
func fillHistory(b *testing.B, path string, n int) {
	b.Helper()
	ctx := context.Background()
	d, err := ingest.ReadFile("../../examples/dumps/tiny-llama-trace.json.gz", ingest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	db, err := store.Open(ctx, path, store.Options{Now: fixedClock})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	label := "ckpt"
	_, err = db.IngestBatch(ctx, n, func(i int) (*model.Dump, string, error) {
		c := *d
		step := int64(i + 1)
		c.Run.Step, c.Run.Label = &step, &label
		c.Run.ContentHash = fmt.Sprintf("sha256:%064x", i+1)
		return &c, "", nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
