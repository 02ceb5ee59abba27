package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/mrep-dev/mrep/model"
)

func mustIngest(t *testing.T, db *DB, file, hash string) Run {
	t.Helper()
	d := readDump(t, file)
	if hash != "" {
		d = withHash(d, hash, "x")
	}
	r, _, err := db.Ingest(context.Background(), d, file)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A removed run's id is never handed out again, even the highest.
func TestRunIDsAreNeverReused(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	a := mustIngest(t, db, "../schemas/testdata/valid/traced.json", "sha256:"+strings.Repeat("1", 64))
	b := mustIngest(t, db, "../schemas/testdata/valid/traced.json", "sha256:"+strings.Repeat("2", 64))
	if err := db.DeleteRun(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	c := mustIngest(t, db, "../schemas/testdata/valid/traced.json", "sha256:"+strings.Repeat("3", 64))
	if a.ID != 1 || b.ID != 2 || c.ID != 3 {
		t.Errorf("ids %d %d %d, want 1 2 3", a.ID, b.ID, c.ID)
	}
}

// Every change to a run's stored rows is caught on load and by Check, naming the run.
func TestChangedRowsAreReportedAsCorruption(t *testing.T) {
	edits := []string{
		`UPDATE tensors SET numel = numel + 1 WHERE run_id = 1 AND module_idx = 1 AND pos = 0`,
		`UPDATE tensors SET stat_mean = stat_mean * 1.0000001 WHERE run_id = 1 AND module_idx = 1 AND pos = 0`,
		`UPDATE tensors SET shape = '[9, 4]' WHERE run_id = 1 AND module_idx = 1 AND pos = 0`,
		`UPDATE modules SET name = 'x' WHERE idx = 1`,
		`UPDATE modules SET class = 'Linear2' WHERE idx = 1`,
		`UPDATE runs SET config = '{"a":1}'`,
		`UPDATE trace_modules SET flops = flops + 1 WHERE run_id = 2 AND name = '0'`,
		`UPDATE runs SET total_params = total_params + 1`,
		`UPDATE runs SET model_name = 'other'`,
		`DELETE FROM tensors WHERE run_id = 1 AND module_idx = 3 AND pos = 1`,
	}
	for _, e := range edits {
		t.Run(e[:30], func(t *testing.T) {
			db := openTemp(t)
			ctx := context.Background()
			r := mustIngest(t, db, "../schemas/testdata/valid/mlp_stats.json", "")
			mustIngest(t, db, "../schemas/testdata/valid/traced.json", "")
			if _, err := db.LoadDump(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
			res, err := db.sql.Exec(e)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				t.Fatal("the edit changed no row")
			}
			_, errLoad := db.LoadDump(ctx, r.ID)
			_, errLoad2 := db.LoadDump(ctx, 2)
			_, errRun := db.Run(ctx, r.ID)
			if !errors.Is(errLoad, ErrCorrupt) && !errors.Is(errLoad2, ErrCorrupt) && !errors.Is(errRun, ErrCorrupt) {
				t.Fatalf("the change went unnoticed: load %v / %v, run %v", errLoad, errLoad2, errRun)
			}
			_, runs, err := db.Check(ctx)
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatal(err)
			}
			bad := 0
			for _, c := range runs {
				if !c.OK {
					bad++
					if !strings.Contains(c.Problem, fmt.Sprintf("run %d", c.ID)) {
						t.Errorf("the problem does not name the run: %s", c.Problem)
					}
				}
			}
			if bad == 0 && err == nil {
				t.Error("Check found nothing")
			}
		})
	}
}

// Single-bit flips anywhere past the file header: each load either fails or returns the same
// dump; none is read as different data.
func TestBitFlipsAreNeverReadAsOtherData(t *testing.T) {
	sqliteOnly(t, "flips bits in the database file")
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	db, err := Open(context.Background(), src, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	r := mustIngest(t, db, "../schemas/testdata/valid/mlp_stats.json", "")
	want, _ := Checksum(mustLoad(t, db, r.ID))
	db.Close()
	orig, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	caught, same := 0, 0
	for i := 0; i < 150; i++ {
		b := bytes.Clone(orig)
		off := 100 + rng.Intn(len(b)-100)
		b[off] ^= 1 << rng.Intn(8)
		p := filepath.Join(dir, fmt.Sprintf("f%d.db", i))
		os.WriteFile(p, b, 0o644)
		db, err := Open(context.Background(), p, Options{Now: clock, ReadOnly: true, Existing: true})
		if err != nil {
			caught++
			continue
		}
		d, err := db.LoadDump(context.Background(), r.ID)
		if _, rerr := db.Run(context.Background(), r.ID); err == nil && rerr != nil {
			err = rerr
		}
		db.Close()
		if err != nil {
			caught++
			continue
		}
		if got, _ := Checksum(d); got != want {
			t.Fatalf("flip at byte %d read as different data without an error", off)
		}
		same++
	}
	t.Logf("150 single-bit flips: %d caught, %d harmless (free space, indexes, other tables)", caught, same)
}

func mustLoad(t *testing.T, db *DB, id int64) *model.Dump {
	t.Helper()
	d, err := db.LoadDump(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Many processes (here: connections) opening one new database at once never fail.
func TestParallelFirstOpens(t *testing.T) {
	sqliteOnly(t, "many processes creating one file (TestParallelFirstMigrations is PostgreSQL's)")
	rounds := testutil.Size(10, 200) // MREP_STRESS: the size that once caught a lost migration
	d := readDump(t, "../schemas/testdata/valid/traced.json")
	for round := 0; round < rounds; round++ {
		p := filepath.Join(t.TempDir(), "new.db")
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				db, err := Open(context.Background(), p, Options{Now: clock})
				if err != nil {
					errs <- err
					return
				}
				defer db.Close()
				if _, _, err := db.Ingest(context.Background(), withHash(d, fmt.Sprintf("sha256:%064x", i), "p"), ""); err != nil {
					errs <- err
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		db, _ := Open(context.Background(), p, Options{Now: clock})
		runs, _ := db.ListRuns(context.Background(), Filter{})
		db.Close()
		if len(runs) != 16 {
			t.Fatalf("round %d: %d runs stored, want 16", round, len(runs))
		}
	}
}

// Read-only opens: no migration, no cache writes, and a missing file is an error, not a
// new database. '%' in a path is a character, not an escape.
func TestReadOnlyAndPaths(t *testing.T) {
	sqliteOnly(t, "file paths and permissions")
	dir := t.TempDir()
	ctx := context.Background()
	if _, err := Open(ctx, filepath.Join(dir, "missing.db"), Options{Existing: true}); !errors.Is(err, ErrNoDatabase) {
		t.Fatalf("want ErrNoDatabase, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); err == nil {
		t.Fatal("a read open created the database")
	}
	p := filepath.Join(dir, "a%20b.db")
	db, err := Open(ctx, p, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	r := mustIngest(t, db, "../schemas/testdata/valid/traced.json", "")
	db.Close()
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the file is not at the literal path %s: %v", p, err)
	}
	ro, err := Open(ctx, p, Options{Existing: true, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.ReadOnly() {
		t.Fatal("not read-only")
	}
	if _, err := ro.LoadDump(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := ro.PutResult(ctx, r.ID, "k", "v", []byte("{}")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("cache write on a read-only database: %v", err)
	}
}

// Explicit selectors reach models whose names look like other selectors.
func TestExplicitSelectors(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	for i, name := range []string{"latest", " ", "a@b", "1234"} {
		d := withHash(readDump(t, "../schemas/testdata/valid/traced.json"), fmt.Sprintf("sha256:%064x", i+10), "l")
		d.Model.Name = name
		if _, _, err := db.Ingest(ctx, d, ""); err != nil {
			t.Fatal(err)
		}
	}
	for sel, want := range map[string]int64{"model:latest": 1, "model: ": 2, "model:a@b": 3, "model:1234": 4, "id:2": 2} {
		got, err := db.Resolve(ctx, sel)
		if err != nil || got != want {
			t.Errorf("%q resolves to %d (%v), want %d", sel, got, err, want)
		}
	}
	// Plain forms: a name holding '@' or '#' that no model, label and step match is the name;
	// "latest" while a model is called that and is not the newest run is ambiguous, and says
	// how to choose.
	for sel, want := range map[string]int64{"a@b": 3, "1234": 4} {
		if got, err := db.Resolve(ctx, sel); err != nil || got != want {
			t.Errorf("%q resolves to %d (%v), want %d", sel, got, err, want)
		}
	}
	_, err := db.Resolve(ctx, "latest")
	if !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), "say id:4 or model:latest") {
		t.Errorf("latest with a model of that name: %v", err)
	}
	d := withHash(readDump(t, "../schemas/testdata/valid/traced.json"), fmt.Sprintf("sha256:%064x", 99), "l")
	d.Model.Name = "tiny#5"
	if _, _, err := db.Ingest(ctx, d, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Resolve(ctx, "tiny#5"); err != nil || got != 5 {
		t.Errorf("tiny#5 resolves to %d (%v), want 5", got, err)
	}
	d = withHash(readDump(t, "../schemas/testdata/valid/traced.json"), fmt.Sprintf("sha256:%064x", 100), "l")
	d.Model.Name = "latest"
	if _, _, err := db.Ingest(ctx, d, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Resolve(ctx, "latest"); err != nil || got != 6 {
		t.Errorf("latest, the newest run being model latest: %d (%v), want 6", got, err)
	}
}

// A checksum written before floats were hashed canonically is rewritten by migration 6 where
// the old encoding of the rows reproduces it: a -0.0 statistic (SQLite gives its zero back
// without the sign) and a -0.0 kept whole in a histogram bound. A run whose rows were really
// changed keeps its checksum and still reads as corrupt.
func TestMigrationRechecksumsLegacyZeros(t *testing.T) {
	sqliteOnly(t, "only SQLite histories were written before canonical checksums")
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := Open(ctx, path, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	negZero := math.Copysign(0, -1)
	legacy := func(d *model.Dump) string {
		s, err := checksumWith(d, &hasher{h: sha256.New(), legacy: true, negReal: func(int) bool { return true }})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var sums []string
	for i, edit := range []func(s *model.Stats){
		func(s *model.Stats) { s.Mean = negZero },                     // a REAL column: sign lost
		func(s *model.Stats) { s.Hist.Lo = negZero },                  // JSON: sign kept
		func(s *model.Stats) { s.Mean, s.Hist.Hi = negZero, negZero }, // both
		func(s *model.Stats) { s.Min = negZero },                      // changed below
	} {
		d := withHash(readDump(t, "../schemas/testdata/valid/mlp_stats.json"), fmt.Sprintf("sha256:%064d", i+1), "z")
		edit(firstStats(t, d))
		if _, _, err := db.Ingest(ctx, d, "z.json"); err != nil {
			t.Fatal(err)
		}
		sums = append(sums, legacy(d))
	}
	for i, s := range sums { // as an mrep before canonical floats wrote them
		if _, err := db.sql.ExecContext(ctx, `UPDATE runs SET checksum = ? WHERE id = ?`, s, i+1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.sql.ExecContext(ctx, `UPDATE tensors SET stat_max = stat_max + 1 WHERE run_id = 4`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.sql.ExecContext(ctx, `DELETE FROM schema_migrations WHERE version = 6`); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 3; id++ {
		if _, err := db.LoadDump(ctx, id); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("run %d before the migration: %v, want it read as corrupt", id, err)
		}
	}
	db.Close()
	if db, err = Open(ctx, path, Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for id := int64(1); id <= 3; id++ {
		if _, err := db.LoadDump(ctx, id); err != nil {
			t.Errorf("run %d after the migration: %v", id, err)
		}
	}
	if _, err := db.LoadDump(ctx, 4); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a changed run after the migration: %v, want corrupt", err)
	}
}

func firstStats(t *testing.T, d *model.Dump) *model.Stats {
	for i := range d.Modules {
		for j := range d.Modules[i].Params {
			if s := d.Modules[i].Params[j].Stats; s != nil {
				return s
			}
		}
	}
	t.Fatal("no statistics in the dump")
	return nil
}

// Many processes (here: connections) opening one new PostgreSQL history at once: each
// migration is applied once, and every open succeeds (SQLite's is TestParallelFirstOpens).
func TestParallelFirstMigrations(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL only (MREP_TEST_BACKEND=postgres)")
	}
	for round := 0; round < 5; round++ {
		p := newDBPath(t)
		for _, err := range concurrently(16, func() error {
			db, err := Open(context.Background(), p, Options{Now: clock})
			if err == nil {
				db.Close()
			}
			return err
		}) {
			t.Fatalf("round %d: %v", round, err)
		}
		db := openPath(t, p)
		got, err := db.AppliedMigrations(context.Background())
		ms, _ := migrations()
		if err != nil || len(got) != len(ms) {
			t.Fatalf("round %d: applied %v (%v), want %d", round, got, err, len(ms))
		}
	}
}

// Writers racing on one content hash store it once; each is told which run holds it.
func TestRacingWritersStoreOnce(t *testing.T) {
	p := newDBPath(t)
	openPath(t, p) // the schema first: this test is about the runs, not the migrations
	d := readDump(t, "../schemas/testdata/valid/traced.json")
	ids := make(chan int64, 8)
	for _, err := range concurrently(8, func() error {
		db, err := Open(context.Background(), p, Options{Now: clock})
		if err != nil {
			return err
		}
		defer db.Close()
		r, _, err := db.Ingest(context.Background(), d, "x.json")
		if err == nil {
			ids <- r.ID
		}
		return err
	}) {
		t.Fatal(err)
	}
	close(ids)
	first := int64(-1)
	for id := range ids {
		if first >= 0 && id != first {
			t.Errorf("writers were told of runs %d and %d", first, id)
		}
		first = id
	}
	runs, err := openPath(t, p).ListRuns(context.Background(), Filter{})
	if err != nil || len(runs) != 1 {
		t.Errorf("%d runs (%v), want 1", len(runs), err)
	}
}

// A reader holding a snapshot (a long report, a history) never blocks an ingest, and does not
// see it until it reads again.
func TestReadersNeverBlockIngest(t *testing.T) {
	p := newDBPath(t)
	reader := openPath(t, p)
	writer := openPath(t, p)
	ctx := context.Background()
	mustIngest(t, writer, "../schemas/testdata/valid/traced.json", "")
	inside, release := make(chan struct{}), make(chan struct{})
	var seen int
	done := make(chan error, 1)
	go func() {
		done <- reader.read(ctx, func(q queryer) error {
			if err := q.QueryRowContext(ctx, `SELECT count(*) FROM runs`).Scan(&seen); err != nil {
				return err
			}
			close(inside)
			<-release
			return q.QueryRowContext(ctx, `SELECT count(*) FROM runs`).Scan(&seen)
		})
	}()
	<-inside
	stored := make(chan error, 1)
	go func() {
		_, _, err := writer.Ingest(ctx, withHash(readDump(t, "../schemas/testdata/valid/traced.json"), "sha256:"+strings.Repeat("7", 64), "x"), "")
		stored <- err
	}()
	select {
	case err := <-stored:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("an ingest waited on a reader's snapshot")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if seen != 1 {
		t.Errorf("the reader's snapshot saw %d runs, want the 1 it started with", seen)
	}
	if runs, _ := reader.ListRuns(ctx, Filter{}); len(runs) != 2 {
		t.Errorf("a new read sees %d runs, want 2", len(runs))
	}
}

// concurrently runs fn n times at once and returns the errors.
func concurrently(n int, fn func() error) []error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}
