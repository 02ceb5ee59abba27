package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mrep-dev/mrep/ingest"
)

func TestReadCommandsNeverCreateOrWriteTheDatabase(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo.db")
	for _, args := range [][]string{{"runs"}, {"show"}, {"analyze"}, {"report", "-o", filepath.Join(dir, "r")}, {"diff", "1", "2"}, {"history", "x"}, {"check"}, {"rm", "1"}} {
		_, _, err := run(t, missing, args...)
		if err == nil || !strings.Contains(err.Error(), "no database at "+missing) {
			t.Errorf("%s on a missing database: %v", args[0], err)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("a read command created the database")
	}
	db := filepath.Join(dir, "ro.db")
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.2-1B-Instruct.json.gz", "../../examples/dumps/gpt2.json.gz")
	before := snapshot(t, db)
	for _, args := range [][]string{{"runs"}, {"show", "1"}, {"analyze", "1"}, {"report", "1", "-o", filepath.Join(dir, "rep"), "--sensitivity", "off"},
		{"diff", "1", "2"}, {"history", "--metric", "T_est:decode"}, {"check"}} {
		_, stderr, err := run(t, db, append([]string{"--read-only"}, args...)...)
		if err != nil {
			t.Errorf("%s on a read-only database: %v", args[0], err)
		}
		if !strings.Contains(stderr, "read-only") {
			t.Errorf("%s does not say the cache is skipped: %q", args[0], stderr)
		}
	}
	if snapshot(t, db) != before {
		t.Error("a read-only command changed the database")
	}
}

func TestRmLatestLatestRemovesOne(t *testing.T) {
	db := filepath.Join(t.TempDir(), "rm.db")
	mustRun(t, db, "ingest", "../../examples/dumps/gpt2.json.gz", "../../examples/dumps/Llama-3.2-1B-Instruct.json.gz")
	out := mustRun(t, db, "rm", "latest", "latest")
	if strings.Count(out, "removed run") != 1 || !strings.Contains(out, "removed run 2") {
		t.Errorf("rm latest latest: %q", out)
	}
	if _, _, err := run(t, db, "rm", "1", "nosuch"); err == nil {
		t.Fatal("an unknown selector must fail")
	}
	if !strings.Contains(mustRun(t, db, "runs"), "gpt2") {
		t.Error("a failed rm removed a run")
	}
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.2-1B-Instruct.json.gz")
	if !strings.Contains(mustRun(t, db, "show", "id:3"), "Llama-3.2-1B") {
		t.Error("the re-ingested run did not get a fresh id")
	}
}

func TestCheckReportsCorruption(t *testing.T) {
	db := filepath.Join(t.TempDir(), "c.db")
	mustRun(t, db, "ingest", "../../examples/dumps/gpt2.json.gz")
	if out := mustRun(t, db, "check"); !strings.Contains(out, "integrity check: ok") {
		t.Fatalf("check: %s", out)
	}
	s, err := sql.Open("sqlite3", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Exec(`UPDATE tensors SET numel = numel + 1 WHERE run_id = 1 AND kind = 'param' AND pos = 0
		AND module_idx = (SELECT min(module_idx) FROM tensors WHERE run_id = 1 AND kind = 'param')`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("changed %d rows", n)
	}
	s.Close()
	out, _, err := run(t, db, "check")
	if err == nil || !strings.Contains(out, "CORRUPT") || !strings.Contains(err.Error(), "1 of 1 runs corrupt") {
		t.Errorf("check after a change: %v\n%s", err, out)
	}
	if _, _, err := run(t, db, "show", "1"); err == nil || !strings.Contains(err.Error(), "run 1") || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("show of a corrupt run: %v", err)
	}
}

// --read-only forbids every write: rm and ingest are refused (exit 2) and the database is
// byte for byte as it was.
func TestReadOnlyRefusesWrites(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ro.db")
	mustRun(t, db, "ingest", "../../examples/dumps/gpt2.json.gz")
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--read-only", "rm", "1"}, {"--read-only", "ingest", "../../examples/dumps/Llama-3.2-1B-Instruct.json.gz"}} {
		_, _, err := run(t, db, args...)
		if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), "--read-only forbids it") {
			t.Errorf("%v: exit %d, %v", args, code, err)
		}
	}
	after, _ := os.ReadFile(db)
	if string(after) != string(before) {
		t.Error("a refused write changed the database")
	}
}

// Input files are regular files: a FIFO, a device or a directory given as a workload, a rows
// file or a chips file is refused at once (never read, never waited on).
func TestInputFilesMustBeRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	db := filepath.Join(dir, "none.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "serve", "Llama-3.1-8B", "--workload", fifo}, "a FIFO, not a regular file"},
		{[]string{"validate", fifo}, "a FIFO, not a regular file"},
		{[]string{"--chips-file", fifo, "chips"}, "a FIFO, not a regular file"},
		{[]string{"validate", "/dev/null"}, "a device, not a regular file"},
		{[]string{"plan", "serve", "Llama-3.1-8B", "--workload", dir}, "a directory, not a file"},
	} {
		_, _, err := run(t, db, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	// a FIFO met while walking an ingest directory is skipped, never opened
	walk := filepath.Join(dir, "walk")
	os.MkdirAll(walk, 0o755)
	syscall.Mkfifo(filepath.Join(walk, "pipe.json"), 0o644)
	raw, _ := os.ReadFile("../../examples/dumps/gpt2.json.gz")
	os.WriteFile(filepath.Join(walk, "gpt2.json.gz"), raw, 0o644)
	if out := mustRun(t, filepath.Join(dir, "w.db"), "ingest", walk); !strings.Contains(out, "as run 1") {
		t.Errorf("ingest of a directory with a FIFO: %s", out)
	}
}

// Links met while walking an ingest directory are followed to files; a loop or a dangling link
// is named with its reason, never dropped without a word (issue 37: the loop's message was
// lost behind "no dumps in this directory").
func TestIngestWalkNamesUnreadableLinks(t *testing.T) {
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop")
	os.MkdirAll(loop, 0o755)
	os.Symlink("b.json", filepath.Join(loop, "a.json"))
	os.Symlink("a.json", filepath.Join(loop, "b.json"))
	os.Symlink("gone.json", filepath.Join(loop, "dangling.json"))
	_, _, err := run(t, filepath.Join(dir, "l.db"), "ingest", loop)
	if err == nil || !strings.Contains(err.Error(), "a.json (too many levels of symbolic links)") || !strings.Contains(err.Error(), "dangling.json (no such file or directory)") {
		t.Fatalf("a directory of broken links: %v", err)
	}
	// a link to a dump is ingested; the broken ones are noted beside it
	os.Symlink(mustAbs(t, "../../examples/dumps/gpt2.json.gz"), filepath.Join(loop, "gpt2.json.gz"))
	out, stderr, err := run(t, filepath.Join(dir, "l.db"), "ingest", loop)
	if err != nil || !strings.Contains(out, "as run 1") || !strings.Contains(stderr, "a.json (too many levels of symbolic links)") {
		t.Errorf("a linked dump beside broken links: %v\n%s\n%s", err, out, stderr)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// --set refuses what would silently change the model: an expert count of 0 (an MoE turned
// dense), sizes beyond physical range, and a key the config does not have (a typo, with the
// nearest key named); usage errors, exit 2.
func TestSetValuesAreChecked(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	for _, c := range []struct{ set, want string }{
		{"num_local_experts=0", "want at least 1"},
		{"num_local_experts=1e300", "want a whole number from 0 to 10,000,000"},
		{"num_hidden_layers=2.5", "want a whole number"},
		{"num_local_expert=4", "did you mean num_local_experts?"},
	} {
		_, _, err := run(t, db, "analyze", "Mixtral-8x7B", "--set", c.set)
		if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: exit %d, %v", c.set, code, err)
		}
	}
	// a key the module tree embodies is refused where it differs (issue 37: an MoE could turn
	// dense, or count 8 experts' weights under 4 routed); the tree's own value passes
	for _, c := range []struct{ model, set, want string }{
		{"Mixtral-8x7B", "num_local_experts=4", "module tree was built with num_local_experts=8"},
		{"Mixtral-8x7B", "num_local_experts=1", "module tree was built with num_local_experts=8"},
		{"Mixtral-8x7B", "num_experts_per_tok=9", "num_experts_per_tok 9 is more than num_local_experts 8"},
		{"DeepSeek-V3", "first_k_dense_replace=61", "module tree was built with first_k_dense_replace=3"},
		{"DeepSeek-V3", "num_hidden_layers=30", "module tree was built with num_hidden_layers=61"},
		{"Qwen3-30B-A3B", "decoder_sparse_step=100", "module tree was built with decoder_sparse_step=1"},
	} {
		_, _, err := run(t, db, "analyze", c.model, "--set", c.set)
		if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s --set %s: exit %d, %v", c.model, c.set, code, err)
		}
	}
	if out := mustRun(t, db, "analyze", "Mixtral-8x7B", "--set", "num_local_experts=8", "--set", "num_experts_per_tok=1"); !strings.Contains(out, "8 routed experts, top-1") {
		t.Errorf("a valid --set must apply")
	}
}

// Sizes beyond any machine are refused before anything is counted (tp 1e9 used to be timed).
func TestSizesBeyondPhysicalRange(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.db")
	for _, args := range [][]string{
		{"analyze", "Llama-3.1-8B", "--tp", "1000000000"},
		{"plan", "train", "Llama-3.1-8B", "--gpus", "1000000000", "--gbs", "64"},
	} {
		if _, _, err := run(t, db, args...); err == nil || !strings.Contains(err.Error(), "1048576") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// A -0.0 in a tensor statistic ingests and reads back: SQLite hands it back as 0.0, and the
// run's checksum hashes the canonical value (it used to hash the sign bit, and every read then
// called the run corrupt).
func TestNegativeZeroReadsBack(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile("../../schemas/testdata/valid/mlp_stats.json")
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Replace(raw, []byte(`"mean": -0.0243384912610054`), []byte(`"mean": -0.0`), 1)
	if bytes.Equal(b, raw) {
		t.Fatal("fixture changed: no mean to replace")
	}
	if b, err = ingest.Rehash(b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "negzero.json")
	os.WriteFile(p, b, 0o644)
	db := filepath.Join(dir, "z.db")
	mustRun(t, db, "ingest", p)
	mustRun(t, db, "show", "1")
	if out := mustRun(t, db, "check"); strings.Contains(out, "corrupt") {
		t.Errorf("check after a -0.0: %s", out)
	}
}

// A module tree without parameters (a wrapper, a functional model) ingests and reports: no
// parameter pie to draw, nothing to fail on.
func TestReportWithoutParameters(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile("../../schemas/testdata/valid/mlp_stats.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, m := range doc["modules"].([]any) {
		mod := m.(map[string]any)
		mod["params"], mod["buffers"] = []any{}, []any{}
	}
	p := writeDoc(t, dir, "noparams.json", doc)
	db := filepath.Join(dir, "n.db")
	mustRun(t, db, "ingest", p)
	out := filepath.Join(dir, "rep")
	mustRun(t, db, "report", "1", "-o", out, "--sensitivity", "off")
	if _, err := os.Stat(filepath.Join(out, "report.md")); err != nil {
		t.Error(err)
	}
}

// A database in a directory its reader cannot write (a teammate's shared folder, a read-only
// mount) is read by every read command, and a write is refused up front with a message that
// names the permission, the file unchanged. Root can write anywhere, so the commands run as
// the unprivileged user nobody; where this process cannot switch users the test says why.
func TestReadOnlyDirectoryAsUnprivilegedUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop to an unprivileged user (run as root, as CI does)")
	}
	bin := buildBinary(t)
	top, err := os.MkdirTemp("", "mrep-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(top, "d"), 0o755); os.RemoveAll(top) })
	dir := filepath.Join(top, "d")
	mustMkdir(t, dir)
	db := filepath.Join(dir, "team.db")
	mustRun(t, db, "ingest", "../../examples/dumps/gpt2.json.gz")
	mine := filepath.Join(top, "mrep")
	copyFile(t, bin, mine)
	dump, _ := filepath.Abs("../../examples/dumps/Llama-3.2-1B-Instruct.json.gz")
	for _, p := range []string{top, mine} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(db)
	asNobody := func(args ...string) (string, string, int) {
		cmd := exec.Command(mine, append([]string{"--db", db}, args...)...)
		cmd.Dir = top
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Skipf("cannot run as nobody here: %v", err)
		}
		return out.String(), errb.String(), code
	}
	for _, args := range [][]string{{"runs"}, {"show", "1"}, {"--read-only", "runs"}, {"analyze", "1"}, {"history", "gpt2"}, {"check"}} {
		out, stderr, code := asNobody(args...)
		if code != 0 || !strings.Contains(out, "gpt2") && args[0] != "check" {
			t.Errorf("%v as nobody: exit %d\n%s%s", args, code, out, stderr)
		}
		if strings.Contains(stderr, "attempt to write") {
			t.Errorf("%v: %s", args, stderr)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ingest", dump}, "cannot be written by this user"},
		{[]string{"rm", "1"}, "is read-only: runs cannot be removed"},
		{[]string{"--read-only", "rm", "1"}, "--read-only forbids it"},
	} {
		_, stderr, code := asNobody(c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v as nobody: exit %d, %q, want %q", c.args, code, stderr, c.want)
		}
	}
	if after, _ := os.ReadFile(db); !bytes.Equal(after, before) {
		t.Error("the database changed under a reader who cannot write it")
	}
	if m, _ := filepath.Glob(db + "-*"); len(m) > 0 {
		t.Errorf("files appeared beside a read-only database: %v", m)
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// A history a newer mrep wrote (a migration this one does not know) is read but never written:
// ingest, rm, copy into it and storing results are refused naming both schema versions, and
// what it holds stays as it was.
func TestNewerHistoryIsNotWritten(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "newer.db")
	mustRun(t, db, "ingest", "../../examples/dumps/gpt2.json.gz")
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, '0099_future.sql', '2030-01-01T00:00:00Z')`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	for _, args := range [][]string{
		{"ingest", "../../examples/dumps/Llama-3.1-8B.json.gz"},
		{"rm", "1"},
		{"ingest", nerdalert, "--chip", "L40S", "--model", "Llama-3.2-3B-Instruct"},
	} {
		if _, _, err := run(t, db, args...); err == nil || !strings.Contains(err.Error(), "schema version 99, this mrep knows up to") {
			t.Errorf("%v: %v", args, err)
		}
	}
	other := filepath.Join(dir, "other.db")
	mustRun(t, other, "ingest", "../../examples/dumps/Llama-3.1-8B.json.gz")
	if _, _, err := run(t, other, "copy", "--to", db); err == nil || !strings.Contains(err.Error(), "schema version 99") {
		t.Errorf("copy into it: %v", err)
	}
	out := mustRun(t, db, "runs")
	if !strings.Contains(out, "gpt2") || strings.Contains(out, "Llama-3.1-8B") {
		t.Errorf("runs of the newer history:\n%s", out)
	}
}
