package load

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/store"
)

const good = "../examples/dumps/Llama-3.2-1B-Instruct.json.gz"

func opts(t *testing.T) (Options, *[]string) {
	var rejected []string
	return Options{Ingest: ingest.Options{MaxBytes: 1 << 30}, Rejected: func(p string, err error) {
		if err == nil || !strings.Contains(err.Error(), filepath.Base(p)) {
			t.Errorf("rejection of %s does not name it: %v", p, err)
		}
		rejected = append(rejected, p)
	}}, &rejected
}

func badDump(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(p, []byte(`{"schema_version": 1, "model": `), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// leftovers lists what an ingest left in dir besides the files named.
func leftovers(t *testing.T, dir string, keep ...string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		found := false
		for _, k := range keep {
			found = found || e.Name() == k
		}
		if !found {
			out = append(out, e.Name())
		}
	}
	return out
}

// A batch with a bad dump stores nothing and creates no database (nor leaves its temporary
// files); with KeepGoing the good dump is stored and the bad one named; ingesting it again
// finds it stored.
func TestFilesAllOrNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	bad := badDump(t, dir)
	o, rejected := opts(t)
	done, bads, err := Files(ctx, db, []string{good, bad}, o)
	if !errors.Is(err, ErrRejected) || len(done) != 0 || len(bads) != 1 || bads[0] != bad || len(*rejected) != 1 {
		t.Fatalf("bad batch: done %v, bads %v, err %v", done, bads, err)
	}
	if left := leftovers(t, dir, "bad.json"); len(left) != 0 {
		t.Errorf("a rejected ingest left %v", left)
	}
	o.KeepGoing = true
	done, bads, err = Files(ctx, db, []string{good, bad}, o)
	if err != nil || len(done) != 1 || !done[0].Got.Created || len(bads) != 1 {
		t.Fatalf("--keep-going: done %+v, bads %v, err %v", done, bads, err)
	}
	if left := leftovers(t, dir, "bad.json", "m.db"); len(left) != 0 {
		t.Errorf("ingest left %v beside the database", left)
	}
	again, _, err := Files(ctx, db, []string{good}, o)
	if err != nil || len(again) != 1 || again[0].Got.Created || again[0].Got.ID != done[0].Got.ID {
		t.Fatalf("second ingest: %+v, %v", again, err)
	}
	s, err := store.Open(ctx, db, store.Options{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.ListRuns(ctx, store.Filter{})
	if err != nil || len(runs) != 1 {
		t.Errorf("%d runs stored, %v", len(runs), err)
	}
}

// A database that cannot be created is an OpenError with the store's message.
func TestFilesOpenError(t *testing.T) {
	o, _ := opts(t)
	_, _, err := Files(context.Background(), filepath.Join(t.TempDir(), "no", "such", "dir", "m.db"), []string{good}, o)
	var oe *OpenError
	if !errors.As(err, &oe) || oe.Error() == "" {
		t.Fatalf("err %v, want an OpenError", err)
	}
}
