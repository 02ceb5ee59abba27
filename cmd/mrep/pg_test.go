package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/internal/pgtest"
	"github.com/mrep-dev/mrep/internal/scaledump"
	"github.com/mrep-dev/mrep/internal/shell"
	"github.com/mrep-dev/mrep/internal/testutil"
	"github.com/mrep-dev/mrep/load"
	"github.com/mrep-dev/mrep/store"
)

// PostgreSQL as the shared history, end to end through the command line. A server is started
// for these tests (internal/pgtest); where none can be had they skip with the reason, except
// in CI, where both backends must be tested.

var (
	pgOnce sync.Once
	pgSrv  *pgtest.Server
	pgErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if pgSrv != nil {
		pgSrv.Stop()
	}
	os.Exit(code)
}

// pgDB is a new, empty PostgreSQL database's URL.
func pgDB(t testing.TB) string {
	t.Helper()
	pgOnce.Do(func() { pgSrv, pgErr = pgtest.Start() })
	if pgErr != nil {
		if pgtest.Required() {
			t.Fatalf("PostgreSQL: %v", pgErr)
		}
		t.Skipf("no PostgreSQL server: %v", pgErr)
	}
	dsn, err := pgSrv.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// Every read command prints the same bytes from a PostgreSQL history as from a SQLite one
// holding the same runs.
func TestPostgresGivesTheSameOutput(t *testing.T) {
	pgURL := pgDB(t)
	lite := filepath.Join(t.TempDir(), "m.db")
	dumps := []string{"../../examples/dumps/gpt2.json.gz", "../../examples/dumps/Llama-3.2-1B-Instruct.json.gz", "../../examples/dumps/Mixtral-8x7B-v0.1.json.gz"}
	for _, db := range []string{lite, pgURL} {
		mustRun(t, db, append([]string{"ingest"}, dumps...)...)
	}
	for _, args := range [][]string{
		{"runs"}, {"runs", "--json"}, {"show", "2", "--json"}, {"show", "Mixtral-8x7B-v0.1"},
		{"analyze", "3", "--chip", "H100", "--json"}, {"diff", "1", "2"}, {"history", "gpt2"}, {"check", "--json"},
		{"plan", "serve", "3", "--chip", "H200"},
	} {
		// a printed reproduce command names its own history (--db), and only that may differ
		a := strings.ReplaceAll(mustRun(t, lite, args...), shell.Quote(lite), "HISTORY")
		b := strings.ReplaceAll(mustRun(t, pgURL, args...), shell.Quote(store.Redact(pgURL)), "HISTORY")
		if a != b {
			t.Errorf("%v differs between SQLite and PostgreSQL:\n--- sqlite\n%.1500s\n--- postgres\n%.1500s", args, a, b)
		}
	}
	// a second ingest of the same dumps stores nothing
	out := mustRun(t, pgURL, append([]string{"ingest"}, dumps...)...)
	if strings.Count(out, "already ingested") != 3 {
		t.Errorf("re-ingest:\n%s", out)
	}
	// rm, then the id is never handed out again
	mustRun(t, pgURL, "rm", "3")
	mustRun(t, pgURL, "ingest", dumps[2])
	var runs []struct{ ID int64 }
	json.Unmarshal([]byte(mustRun(t, pgURL, "runs", "--json")), &runs)
	if len(runs) != 3 || runs[2].ID != 4 {
		t.Errorf("after rm and re-ingest: %+v", runs)
	}
}

// copy SQLite -> PostgreSQL -> SQLite gives byte-identical show --json and report output, and
// copying again copies nothing.
func TestCopyRoundTrip(t *testing.T) {
	pgURL := pgDB(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	mustRun(t, a, "ingest", "../../examples/dumps/gpt2.json.gz", "../../examples/dumps/Llama-3.2-1B-Instruct.json.gz",
		"../../schemas/testdata/valid/mlp_stats.json")
	out := mustRun(t, a, "copy", "--to", pgURL)
	if !strings.Contains(out, "3 of 3 runs copied") || strings.Contains(out, "@/") && !strings.Contains(out, "postgres://") {
		t.Errorf("copy to PostgreSQL:\n%s", out)
	}
	if again := mustRun(t, a, "copy", "--to", pgURL); !strings.Contains(again, "0 of 3 runs copied") {
		t.Errorf("a second copy:\n%s", again)
	}
	mustRun(t, b, "copy", "--from", pgURL)
	for _, args := range [][]string{{"show", "1", "--json"}, {"show", "3", "--json"}, {"runs", "--json"}} {
		if x, y := mustRun(t, a, args...), mustRun(t, b, args...); x != y {
			t.Errorf("%v after the round trip differs:\n%.800s\n---\n%.800s", args, x, y)
		}
	}
	ra, rb := filepath.Join(dir, "ra"), filepath.Join(dir, "rb")
	mustRun(t, a, "report", "2", "--chip", "H100", "-o", ra)
	mustRun(t, b, "report", "2", "--chip", "H100", "-o", rb)
	files, _ := filepath.Glob(filepath.Join(ra, "*"))
	if len(files) < 3 {
		t.Fatalf("report wrote %d files", len(files))
	}
	for _, f := range files {
		x, _ := os.ReadFile(f)
		y, err := os.ReadFile(filepath.Join(rb, filepath.Base(f)))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("report file %s differs after the round trip", filepath.Base(f))
		}
	}
	// selected runs only; a selector that names nothing copies nothing
	c := filepath.Join(dir, "c.db")
	if out := mustRun(t, c, "copy", "--from", a, "gpt2"); !strings.Contains(out, "1 of 1 runs copied") {
		t.Errorf("copy of one run:\n%s", out)
	}
	if _, _, err := run(t, c, "copy", "--from", a, "nosuch"); err == nil || !strings.Contains(err.Error(), "no such run") {
		t.Errorf("copy of a missing run: %v", err)
	}
}

// A password in --db is never printed: not in notes, not in errors, not in copy's output.
func TestPostgresPasswordIsNeverPrinted(t *testing.T) {
	pgURL := pgDB(t)
	// the test server trusts its socket, so a password is accepted and ignored
	withPW := strings.Replace(pgURL, "postgres://mrep@", "postgres://mrep:Sup3rSecret@", 1)
	if withPW == pgURL {
		t.Skip("the server URL has another shape: " + store.Redact(pgURL))
	}
	var all strings.Builder
	for _, args := range [][]string{
		{"runs"}, {"show", "1"}, {"ingest", "../../examples/dumps/gpt2.json.gz"}, {"--read-only", "runs"},
		{"copy", "--to", filepath.Join(t.TempDir(), "x.db")}, {"show", "nosuch"},
	} {
		out, errOut, err := run(t, withPW, args...)
		all.WriteString(out + errOut)
		if err != nil {
			all.WriteString(err.Error())
		}
	}
	bad := strings.Replace(withPW, "/mrep_test", "/no_such_database_x", 1)
	_, errOut, err := run(t, bad, "runs")
	all.WriteString(errOut)
	if err != nil {
		all.WriteString(err.Error())
	}
	if strings.Contains(all.String(), "Sup3rSecret") {
		t.Errorf("the password was printed:\n%s", all.String())
	}
	if !strings.Contains(all.String(), "mrep:xxxxx@") {
		t.Errorf("no redacted URL was printed at all:\n%s", all.String())
	}
}

// A role that may only read serves every read command (results then not cached), and every
// write is refused up front.
func TestPostgresReadOnlyRole(t *testing.T) {
	pgURL := pgDB(t)
	mustRun(t, pgURL, "ingest", "../../examples/dumps/gpt2.json.gz")
	db, err := sql.Open("pgx", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("reader_%d", time.Now().UnixNano())
	for _, q := range []string{`CREATE ROLE ` + role + ` LOGIN PASSWORD 'r3ader'`, `GRANT SELECT ON ALL TABLES IN SCHEMA public TO ` + role} {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	reader := strings.Replace(pgURL, "postgres://mrep@", "postgres://"+role+":r3ader@", 1)
	for _, args := range [][]string{{"runs"}, {"show", "1"}, {"analyze", "1"}, {"check"}, {"history", "gpt2"}} {
		out, errOut, err := run(t, reader, args...)
		if err != nil || out == "" || !strings.Contains(errOut, "opened read-only") {
			t.Errorf("%v as a read-only role: %v\n%s", args, err, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ingest", "../../examples/dumps/Llama-3.2-1B-Instruct.json.gz"}, "this role may not write the mrep history"},
		{[]string{"rm", "1"}, "is read-only: runs cannot be removed"},
	} {
		_, _, err := run(t, reader, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v as a read-only role: %v", c.args, err)
		}
	}
}

// Many writers: 16 processes, each running 50 ingests, into one PostgreSQL history, every dump
// ingested by two of them: no failure, no duplicate, every run readable.
func TestPostgresManyWriters(t *testing.T) {
	pgURL := pgDB(t)
	bin := buildBinary(t)
	// 16 processes x 50 ingests under MREP_STRESS; 8 x 10 by default. Each dump is ingested
	// twice, by different processes.
	procs, each := testutil.Size(8, 16), testutil.Size(10, 50)
	distinct := procs * each / 2
	dir := t.TempDir()
	files := make([]string, distinct)
	base, err := os.ReadFile("../../schemas/testdata/valid/traced.json")
	if err != nil {
		t.Fatal(err)
	}
	for i := range files {
		b := bytes.Replace(base, []byte(`"label": null`), []byte(fmt.Sprintf(`"label": "w%03d"`, i)), 1)
		if bytes.Equal(b, base) {
			t.Fatal("no label in the fixture")
		}
		if b, err = ingest.Rehash(b); err != nil {
			t.Fatal(err)
		}
		files[i] = filepath.Join(dir, fmt.Sprintf("d%03d.json", i))
		os.WriteFile(files[i], b, 0o644)
	}
	// the history is new: the first writers also race to create its schema
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	stored, already := 0, 0
	start := time.Now()
	for p := 0; p < procs; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for k := 0; k < each; k++ {
				f := files[(p*each+k)%distinct] // each dump twice, by different processes
				out, err := exec.Command(bin, "--db", pgURL, "ingest", f).CombinedOutput()
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, fmt.Sprintf("%s: %v: %s", f, err, out))
				case bytes.Contains(out, []byte("already ingested")):
					already++
				default:
					stored++
				}
				mu.Unlock()
			}
		}(p)
	}
	wg.Wait()
	t.Logf("%d ingests by %d processes in %s", procs*each, procs, time.Since(start).Round(time.Millisecond))
	if len(failures) > 0 {
		t.Fatalf("%d failures, the first: %s", len(failures), failures[0])
	}
	if stored != distinct || already != procs*each-distinct {
		t.Errorf("stored %d, already %d; want %d and %d", stored, already, distinct, procs*each-distinct)
	}
	var runs []struct {
		ContentHash string `json:"content_hash"`
	}
	json.Unmarshal([]byte(mustRun(t, pgURL, "runs", "--json")), &runs)
	seen := map[string]bool{}
	for _, r := range runs {
		if seen[r.ContentHash] {
			t.Errorf("duplicate run of %s", r.ContentHash)
		}
		seen[r.ContentHash] = true
	}
	if len(runs) != distinct {
		t.Errorf("%d runs, want %d", len(runs), distinct)
	}
	if out, _, err := run(t, pgURL, "check"); err != nil {
		t.Errorf("check after the writers: %v\n%s", err, out)
	}
}

// kill -9 of an ingesting process leaves nothing half-stored: no run, no rows without their
// run, and the dump ingests afterwards.
func TestPostgresKillDuringIngest(t *testing.T) {
	pgURL := pgDB(t)
	bin := buildBinary(t)
	mustRun(t, pgURL, "ingest", "../../examples/dumps/gpt2.json.gz")
	big := filepath.Join(t.TempDir(), "big.json")
	if err := scaledump.Write(big, 50000, 125000); err != nil { // about a second to store
		t.Fatal(err)
	}
	for _, after := range []time.Duration{150 * time.Millisecond, 400 * time.Millisecond} {
		cmd := exec.Command(bin, "--db", pgURL, "ingest", big)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(after)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		out := mustRun(t, pgURL, "check", "--json")
		var res struct {
			Integrity string `json:"integrity_check"`
			Runs      []struct{ Model string }
		}
		json.Unmarshal([]byte(out), &res)
		if res.Integrity != "ok" || len(res.Runs) == 0 {
			t.Errorf("after kill -9 at %s: %s", after, res.Integrity)
		}
		if len(res.Runs) == 2 {
			t.Logf("the ingest finished within %s; nothing to interrupt", after)
		} else if len(res.Runs) != 1 {
			t.Errorf("after kill -9 at %s: %d runs", after, len(res.Runs))
		}
	}
	mustRun(t, pgURL, "ingest", big)
	if out := mustRun(t, pgURL, "runs"); strings.Count(out, "\n| ") != 2 { // gpt2 and the dump, once
		t.Errorf("the interrupted dump did not ingest afterwards:\n%s", out)
	}
}

// Credentials from a pgpass file (PGPASSFILE) or PGPASSWORD reach the server (a role that
// must give its password), and a wrong one is refused with a message that carries no password.
func TestPostgresCredentials(t *testing.T) {
	pgURL := pgDB(t)
	mustRun(t, pgURL, "ingest", "../../examples/dumps/gpt2.json.gz")
	admin, err := sql.Open("pgx", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("pw_%d", time.Now().UnixNano())
	for _, q := range []string{`CREATE ROLE ` + role + ` LOGIN PASSWORD 'Corr3ct-Horse'`, `GRANT SELECT ON ALL TABLES IN SCHEMA public TO ` + role} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	admin.Close()
	url := strings.Replace(pgURL, "postgres://mrep@", "postgres://"+role+"@", 1)
	if url == pgURL {
		t.Skip("the server URL has another shape: " + store.Redact(pgURL))
	}
	pass := filepath.Join(t.TempDir(), "pgpass")
	os.WriteFile(pass, []byte("*:*:*:"+role+":Corr3ct-Horse\n"), 0o600)
	t.Setenv("PGPASSFILE", pass)
	if out := mustRun(t, url, "runs"); !strings.Contains(out, "gpt2") {
		t.Errorf("with a pgpass file:\n%s", out)
	}
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("PGPASSWORD", "Corr3ct-Horse")
	if out := mustRun(t, url, "runs"); !strings.Contains(out, "gpt2") {
		t.Errorf("with PGPASSWORD:\n%s", out)
	}
	t.Setenv("PGPASSWORD", "")
	wrong := strings.Replace(url, role+"@", role+":Wr0ng-Battery@", 1)
	_, errOut, err := run(t, wrong, "runs")
	msg := errOut
	if err != nil {
		msg += err.Error()
	}
	if err == nil || !strings.Contains(msg, "password authentication failed") || strings.Contains(msg, "Wr0ng-Battery") {
		t.Errorf("a wrong password: %v\n%s", err, msg)
	}
}

// A backend terminated in the middle of an ingest (pg_terminate_backend, a server restart)
// reads as what it is, with the rollback said, not "driver: bad connection"; and nothing of the
// batch is stored (issue 37).
func TestPostgresBackendKilledMidIngest(t *testing.T) {
	dsn := pgDB(t)
	ctx := context.Background()
	mustRun(t, dsn, "ingest", "../../examples/dumps/gpt2.json.gz") // the schema, and one run
	db, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var adminPID int
	if err := admin.QueryRow(`SELECT pg_backend_pid()`).Scan(&adminPID); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"schema_version": 1}`), 0o644)
	paths := []string{bad, "../../examples/dumps/Llama-3.2-1B-Instruct.json.gz"}
	_, _, err = load.Into(ctx, db, paths, load.Options{KeepGoing: true, Rejected: func(string, error) {
		// the first file is rejected mid-transaction: stop the ingest's backend there
		if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> $1`, adminPID); err != nil {
			t.Error(err)
		}
	}})
	if !errors.Is(err, store.ErrConnLost) || !strings.Contains(err.Error(), "nothing of it was stored") {
		t.Fatalf("ingest under a terminated backend: %v", err)
	}
	if out := mustRun(t, dsn, "runs", "--json"); strings.Contains(out, "Llama-3.2-1B") {
		t.Errorf("a run of the killed batch was stored:\n%s", out)
	}
}
