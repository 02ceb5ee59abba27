package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/mrep-dev/mrep/ingest"
)

// Ingest of the DeepSeek-V3 example dump, end to end: gunzip, decode, schema, semantics,
// one transaction into a new database. Goal (issue 3): <= 1 s and <= 300 MiB peak on 2 cores.
func BenchmarkIngestDeepSeekV3(b *testing.B) {
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		db, err := Open(ctx, filepath.Join(b.TempDir(), "b.db"), Options{Now: clock})
		if err != nil {
			b.Fatal(err)
		}
		d, err := ingest.ReadFile("../examples/dumps/DeepSeek-V3.json.gz", ingest.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := db.Ingest(ctx, d, ""); err != nil {
			b.Fatal(err)
		}
		db.Close()
	}
}

// `mrep runs` over 1,000 stored runs. Goal (issue 3): <= 100 ms.
func BenchmarkListRuns1000(b *testing.B) {
	ctx := context.Background()
	db := openTemp(b)
	d := readDump(b, "../examples/dumps/tiny-llama-trace.json.gz")
	for i := 0; i < 1000; i++ {
		if _, _, err := db.Ingest(ctx, withHash(d, fmt.Sprintf("sha256:%064x", i), "bench"), ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runs, err := db.ListRuns(ctx, Filter{})
		if err != nil || len(runs) != 1000 {
			b.Fatal(len(runs), err)
		}
	}
}
