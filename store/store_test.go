package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/model"
)

var clock = func() time.Time { return time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC) }

func openTemp(t testing.TB) *DB {
	t.Helper()
	return openPath(t, newDBPath(t))
}

func readDump(t testing.TB, path string) *model.Dump {
	t.Helper()
	d, err := ingest.ReadFile(path, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestMigrateTwiceChangesNothing(t *testing.T) {
	ctx := context.Background()
	path := newDBPath(t)
	db, err := Open(ctx, path, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	first, err := db.AppliedMigrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := migrations()
	if len(first) != len(ms) || first[0] != 1 {
		t.Fatalf("applied %v, embedded %d", first, len(ms))
	}
	db.Close()
	db, err = Open(ctx, path, Options{Now: func() time.Time { return clock().Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	again, _ := db.AppliedMigrations(ctx)
	if !reflect.DeepEqual(first, again) {
		t.Fatalf("second open changed migrations: %v -> %v", first, again)
	}
	var applied string
	if err := db.sql.QueryRow(`SELECT applied_at FROM schema_migrations WHERE version = 1`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != "2026-03-04T05:06:07Z" {
		t.Fatalf("migration re-applied at %s", applied)
	}
}

func TestPragmasFromDSN(t *testing.T) {
	sqliteOnly(t, "pragmas")
	db := openTemp(t)
	var mode string
	var fk, timeout int
	if err := db.sql.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := db.sql.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil {
		t.Fatal(err)
	}
	if err := db.sql.QueryRow(`PRAGMA busy_timeout`).Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || fk != 1 || timeout != 30000 {
		t.Fatalf("journal_mode=%s foreign_keys=%d busy_timeout=%d", mode, fk, timeout)
	}
}

// jsonOf normalizes a dump for comparison: what a reader sees, not Go's nil-vs-empty.
func jsonOf(t testing.TB, d *model.Dump) string {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	b, _ = json.MarshalIndent(v, "", " ")
	return string(b)
}

func TestIngestThenLoadGivesTheSameDump(t *testing.T) {
	for _, f := range []string{
		"../schemas/testdata/valid/mlp_stats.json",
		"../schemas/testdata/valid/tied_meta.json",
		"../schemas/testdata/valid/lazy.json",
		"../schemas/testdata/valid/traced.json",
		"../examples/dumps/DeepSeek-V3.json.gz",
		"../examples/dumps/tiny-mixtral-trace.json.gz",
	} {
		t.Run(filepath.Base(f), func(t *testing.T) {
			db := openTemp(t)
			ctx := context.Background()
			in := readDump(t, f)
			run, created, err := db.Ingest(ctx, in, f)
			if err != nil || !created {
				t.Fatalf("created=%v err=%v", created, err)
			}
			out, err := db.LoadDump(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := jsonOf(t, in), jsonOf(t, out); a != b {
				t.Fatalf("round trip differs:\n%s", firstDiff(a, b))
			}
			if p := ingest.Check(out); p != nil {
				t.Fatalf("loaded dump fails checks: %v", p)
			}
			tot := ComputeTotals(in)
			if run.TotalParams != tot.Params || run.TrainableParams != tot.Trainable || run.HasStats != tot.HasStats {
				t.Fatalf("run row %+v, totals %+v", run, tot)
			}
			if !run.IngestedAt.Equal(clock()) || run.SourceFile != f {
				t.Fatalf("ingested_at %v source %q", run.IngestedAt, run.SourceFile)
			}
		})
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range al {
		if i >= len(bl) || al[i] != bl[i] {
			lo := max(0, i-3)
			return "in:  " + strings.Join(al[lo:min(len(al), i+3)], "\n     ") + "\nout: " + strings.Join(bl[lo:min(len(bl), i+3)], "\n     ")
		}
	}
	return "out is longer"
}

func TestSameContentIsTheSameRun(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	d := readDump(t, "../examples/dumps/gpt2.json.gz")
	a, created, err := db.Ingest(ctx, d, "a")
	if err != nil || !created {
		t.Fatal(created, err)
	}
	b, created, err := db.Ingest(ctx, d, "b")
	if err != nil || created || b.ID != a.ID || b.SourceFile != "a" {
		t.Fatalf("second ingest: run %d created=%v source=%q err=%v", b.ID, created, b.SourceFile, err)
	}
	runs, _ := db.ListRuns(ctx, Filter{})
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
}

func withHash(d *model.Dump, hash string, label string) *model.Dump {
	c := *d
	c.Run.ContentHash = hash
	c.Run.Label = &label
	return &c
}

func TestResolveSelectors(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	d := readDump(t, "../schemas/testdata/valid/mlp_stats.json")
	h := func(p string) string { return "sha256:" + p + strings.Repeat("0", 64-len(p)) }
	ids := map[string]int64{}
	for _, x := range []struct{ hash, label string }{{"aaaa1", "base"}, {"aaaa2", "base"}, {"bbbb", "ft"}} {
		r, _, err := db.Ingest(ctx, withHash(d, h(x.hash), x.label), "")
		if err != nil {
			t.Fatal(err)
		}
		ids[x.hash] = r.ID
	}
	cases := []struct {
		sel  string
		want int64
		err  error
	}{
		{"1", ids["aaaa1"], nil},
		{"latest", ids["bbbb"], nil},
		{"aaaa1", ids["aaaa1"], nil},
		{"sha256:aaaa2", ids["aaaa2"], nil},
		{"bbbb", ids["bbbb"], nil},
		{"aaaa", 0, ErrAmbiguous},
		{"mlp@base", ids["aaaa2"], nil},
		{"mlp@ft", ids["bbbb"], nil},
		{"mlp", ids["bbbb"], nil},
		{"mlp@nope", 0, ErrNotFound},
		{"mlp@base#0", ids["aaaa2"], nil}, // a checkpoint by step (all three are step 0)
		{"mlp#0", ids["bbbb"], nil},
		{"mlp@base#5", 0, ErrNotFound},
		{"99", 0, ErrNotFound},
		{"cccc", 0, ErrNotFound},
		{"", 0, ErrNotFound},
	}
	for _, c := range cases {
		got, err := db.Resolve(ctx, c.sel)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Resolve(%q) err = %v, want %v", c.sel, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Resolve(%q) = %d, %v; want %d", c.sel, got, err, c.want)
		}
	}
}

func TestListFilterAndLimit(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	d := readDump(t, "../schemas/testdata/valid/mlp_stats.json")
	for i, label := range []string{"a", "b", "a", "a"} {
		if _, _, err := db.Ingest(ctx, withHash(d, "sha256:"+strings.Repeat(string(rune('0'+i)), 64), label), ""); err != nil {
			t.Fatal(err)
		}
	}
	runs, _ := db.ListRuns(ctx, Filter{Label: "a"})
	if len(runs) != 3 || runs[0].ID != 1 || runs[2].ID != 4 {
		t.Fatalf("label filter: %+v", runs)
	}
	runs, _ = db.ListRuns(ctx, Filter{Limit: 2})
	if len(runs) != 2 || runs[0].ID != 3 || runs[1].ID != 4 {
		t.Fatalf("limit keeps the newest, oldest first: %v %v", runs[0].ID, runs[1].ID)
	}
	runs, _ = db.ListRuns(ctx, Filter{Model: "other"})
	if len(runs) != 0 {
		t.Fatalf("model filter: %d runs", len(runs))
	}
}

func TestDeleteCascades(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	r, _, err := db.Ingest(ctx, readDump(t, "../schemas/testdata/valid/traced.json"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"runs", "modules", "tensors", "traces", "trace_modules"} {
		var n int
		if err := db.sql.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s keeps %d rows after delete", table, n)
		}
	}
	if err := db.DeleteRun(ctx, r.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestFailedIngestLeavesNothing(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	d := readDump(t, "../schemas/testdata/valid/traced.json")
	// A trace module listed twice violates trace_modules' primary key after runs, modules and
	// tensors rows were written: the transaction must take them all back.
	d.Trace.Modules = append(d.Trace.Modules, d.Trace.Modules[0])
	if _, _, err := db.Ingest(ctx, d, ""); err == nil {
		t.Fatal("want a constraint error")
	}
	for _, table := range []string{"runs", "modules", "tensors", "traces", "trace_modules"} {
		var n int
		db.sql.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n)
		if n != 0 {
			t.Errorf("%s has %d rows after a failed ingest", table, n)
		}
	}
}

// A batch is all or nothing: the third dump failing to read takes the first two back.
func TestBatchIsAllOrNothing(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	d := readDump(t, "../schemas/testdata/valid/traced.json")
	_, err := db.IngestBatch(ctx, 3, func(i int) (*model.Dump, string, error) {
		if i == 2 {
			return nil, "", errors.New("third dump unreadable")
		}
		return withHash(d, fmt.Sprintf("sha256:%064x", i), "b"), fmt.Sprint(i), nil
	})
	if err == nil || !strings.Contains(err.Error(), "third dump") {
		t.Fatalf("want the third dump's error, got %v", err)
	}
	for _, table := range []string{"runs", "modules", "tensors", "traces", "trace_modules"} {
		var n int
		db.sql.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n)
		if n != 0 {
			t.Errorf("%s has %d rows after a failed batch", table, n)
		}
	}
	got, err := db.IngestBatch(ctx, 2, func(i int) (*model.Dump, string, error) {
		return withHash(d, "sha256:"+strings.Repeat("a", 64), "b"), "same", nil
	})
	if err != nil || len(got) != 2 || !got[0].Created || got[1].Created || got[0].ID != got[1].ID {
		t.Errorf("a dump twice in one batch is stored once: %+v %v", got, err)
	}
}

// A copy is the same history, not a new ingest: the run keeps who stored it, when, and from
// which file; copying again copies nothing; the checksums hold on both sides.
func TestCopyKeepsProvenance(t *testing.T) {
	ctx := context.Background()
	src, err := Open(ctx, newDBPath(t), Options{Now: clock, Who: "alice@laptop"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	a := mustIngest(t, src, "../schemas/testdata/valid/mlp_stats.json", "")
	dst, err := Open(ctx, filepath.Join(t.TempDir(), "dst.db"), Options{Now: func() time.Time { return clock().Add(time.Hour) }, Who: "bob@server"})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	got, err := Copy(ctx, src, dst, nil, nil)
	if err != nil || len(got) != 1 || !got[0].Created {
		t.Fatalf("copy: %+v, %v", got, err)
	}
	b, err := dst.Run(ctx, got[0].To)
	if err != nil {
		t.Fatal(err)
	}
	if b.IngestedBy != "alice@laptop" || !b.IngestedAt.Equal(a.IngestedAt) || b.SourceFile != a.SourceFile || b.ContentHash != a.ContentHash {
		t.Errorf("copied run %+v\nfrom %+v", b, a)
	}
	if again, err := Copy(ctx, src, dst, nil, nil); err != nil || again[0].Created || again[0].To != got[0].To {
		t.Errorf("a second copy: %+v, %v", again, err)
	}
	if _, err := Copy(ctx, src, dst, []int64{99}, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("copy of a missing run: %v", err)
	}
}
