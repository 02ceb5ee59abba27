package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/chips"
	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/model"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/report"
	"github.com/mrep-dev/mrep/store"
)

// FuzzWholePath: whatever ingest accepts is stored, loads back, analyzes and renders to
// markdown and well-formed SVG, without a panic.
//
//	go test ./cmd/mrep -run '^$' -fuzz FuzzWholePath -fuzztime 2m
func FuzzWholePath(f *testing.F) {
	for _, g := range []string{"../../schemas/testdata/valid/*.json", "../../schemas/testdata/invalid/*.json"} {
		files, _ := filepath.Glob(g)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	chip, _ := chips.Default().Lookup("H100")
	target, err := newTarget(chip, "bf16")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// give mutated JSON documents their true content hash, so they reach the store, the
		// analyzer and the renderers instead of stopping at the hash check
		if rb, err := ingest.Rehash(data); err == nil {
			data = rb
		}
		start := time.Now()
		defer func() {
			if el := time.Since(start); el > 20*time.Second {
				t.Errorf("one input took %s", el)
			}
		}()
		d, err := ingest.Decode("fuzz.json", bytes.NewReader(data), ingest.Options{MaxBytes: 1 << 20})
		if err != nil {
			return
		}
		ctx := context.Background()
		db, err := store.Open(ctx, filepath.Join(t.TempDir(), "f.db"), store.Options{Now: fixedClock})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		run, _, err := db.Ingest(ctx, d, "fuzz.json")
		if err != nil {
			t.Fatalf("an accepted dump failed to store: %v", err)
		}
		back, err := db.LoadDump(ctx, run.ID)
		if err != nil {
			t.Fatalf("a stored run failed to load: %v", err)
		}
		o := report.DefaultOptions()
		o.SensitivityProfile = "off"
		o.Batches, o.Seqs, o.SeqsDefault = []int64{1, 8}, []int64{64, 512}, false
		o.ExploreEPs, o.ExploreLens = []int64{1}, []int64{2048}
		s := analyzer.DefaultScenario()
		data2, err := report.Build(back, runInfo(run), s, []analyzer.Target{target}, []analyzer.ExecProfile{analyzer.Naive, analyzer.Achievable}, o)
		if err != nil {
			t.Fatalf("report of a stored run: %v", err)
		}
		if err := render.WriteReport(io.Discard, data2, render.ReportOptions{Generated: fixedClock(), Diagrams: true, Appendix: true, ChartExt: "png"}); err != nil {
			t.Fatal(err)
		}
		for _, nc := range render.ReportCharts(data2, render.ChartOptions{LabelMode: "minimal"}) {
			var svg bytes.Buffer
			if err := render.RenderSVG(nc.Chart, &svg); err != nil {
				continue // a chart with nothing to draw may refuse; it must not panic
			}
			dec := xml.NewDecoder(&svg)
			for {
				_, err := dec.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("chart %s is not well-formed XML: %v", nc.Name, err)
				}
			}
		}
	})
}

// FuzzSets: any --set values parse or are refused; what parses applies to a config or is
// refused as a usage error, never a panic and never a shape outside its range.
func FuzzSets(f *testing.F) {
	f.Add("num_local_experts=4")
	f.Add("num_local_experts=0")
	f.Add("hidden_size=1e300")
	f.Add("rope_scaling={\"type\":\"yarn\"}")
	f.Add("=")
	f.Fuzz(func(t *testing.T, kv string) {
		s, err := parseSets([]string{kv})
		if err != nil {
			return
		}
		d := &model.Dump{Config: map[string]any{"num_local_experts": json.Number("8"), "hidden_size": json.Number("4096"), "rope_scaling": nil}}
		_ = s.apply(d)
	})
}
