package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/analyzer"
	"github.com/mrep-dev/mrep/ingest"
)

func exitCode(err error) int {
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// Usage errors exit 2 with the usage; global flags work after the verb; --version names the
// analyzer and Go; stray arguments are refused, not ignored.
func TestCLIConventions(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	mustRun(t, db, "ingest", "../../examples/dumps/gpt2.json.gz")
	for _, c := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"bogus"}, exitUsage, `unknown command "bogus"`},
		{[]string{"runs", "--bogus"}, exitUsage, "flag provided but not defined"},
		{[]string{"runs", "extra"}, exitUsage, "runs takes at most 0 argument(s)"},
		{[]string{"show", "1", "2"}, exitUsage, "show takes at most 1"},
		{[]string{"plan", "serve", "1", "2", "--chip", "H100"}, exitUsage, "plan serve takes at most 1"},
		{[]string{"diff", "1", "1", "1"}, exitUsage, "diff takes at most 2"},
		{[]string{"--set", "novalue", "runs"}, exitUsage, "want KEY=VALUE"},
		{[]string{"plan", "train", "gpt2", "--chip", "H100", "--gpus", "8", "--gbs", "64", "--try-turbo"}, exitUsage, "Primus-Turbo's MoE path runs on AMD Instinct under ROCm (--chip H100-SXM is NVIDIA's)"},
	} {
		_, errOut, err := run(t, db, c.args...)
		if got := exitCode(err); got != c.code {
			t.Errorf("mrep %v: exit %d, want %d (%v)", c.args, got, c.code, err)
		}
		if err == nil || !strings.Contains(err.Error()+errOut, c.say) {
			t.Errorf("mrep %v: %v %s; want it to say %q", c.args, err, errOut, c.say)
		}
	}
	// --db after the verb is the global flag, not an unknown one
	other := filepath.Join(t.TempDir(), "other.db")
	mustRun(t, other, "ingest", "../../examples/dumps/gpt2.json.gz")
	out, _, err := run(t, db, "runs", "--db", other, "--json")
	if err != nil || !strings.Contains(out, "gpt2") {
		t.Fatalf("runs --db after the verb: %v %s", err, out)
	}
	out = mustRun(t, db, "--version")
	for _, want := range []string{"mrep ", "analyzer " + analyzer.Version, "go1."} {
		if !strings.Contains(out, want) {
			t.Errorf("--version %q lacks %q", out, want)
		}
	}
}

// A dump without the head count: the fingerprint says "unknown" and names the override;
// --set supplies it for one command, without changing the stored run, and enters cache keys.
func TestSetOverridesTheConfig(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	mustRun(t, db, "ingest", writeWithout(t, dir, "n_head"))
	out := mustRun(t, db, "analyze", "latest")
	if !strings.Contains(out, "| Attention | `unknown` |") || !strings.Contains(out, "--set num_attention_heads=N") {
		t.Fatalf("no loud warning for attention without heads:\n%s", out)
	}
	out = mustRun(t, db, "analyze", "latest", "--set", "n_head=12")
	if !strings.Contains(out, "| Attention | `MHA` |") || strings.Contains(out, "num_attention_heads=N") {
		t.Fatalf("--set n_head=12 did not give the heads:\n%s", out)
	}
	// the stored run is unchanged
	if out := mustRun(t, db, "analyze", "latest"); !strings.Contains(out, "`unknown`") {
		t.Error("--set changed the stored run")
	}
	// history caches per scenario: the override is part of the key
	a := mustRun(t, db, "history", "--metric", "T_est:decode", "--json")
	b := mustRun(t, db, "history", "--metric", "T_est:decode", "--json", "--set", "n_head=12")
	if a == b {
		t.Error("history with --set returned the cached result without it")
	}
}

// writeWithout writes the gpt2 example dump with config key removed (rehashed).
func writeWithout(t *testing.T, dir, key string) string {
	t.Helper()
	doc := bundledDoc(t, "gpt2")
	delete(doc["config"].(map[string]any), key)
	return writeDoc(t, dir, "gpt2-without-"+key+".json", doc)
}

// Walking a training output directory skips the JSON that is not a dump, with one note;
// naming such a file still fails.
func TestIngestDirectorySkipsNonDumps(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	writeDoc(t, out, "model.json", bundledDoc(t, "gpt2"))
	for name, body := range map[string]string{"config.json": `{"model_type": "gpt2", "n_head": 12}`, "trainer_state.json": `{"log_history": []}`} {
		if err := os.WriteFile(filepath.Join(out, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "m.db")
	stdout, errOut, err := run(t, db, "ingest", out)
	if err != nil || !strings.Contains(stdout, "ingested") {
		t.Fatalf("ingest of the directory: %v %s", err, errOut)
	}
	if strings.Count(errOut, "note: skipped 2 JSON file(s)") != 1 || strings.Count(errOut, "(no schema_version: not a dump)") != 2 || !strings.Contains(errOut, "config.json") {
		t.Errorf("want one note naming the skipped files, got %q", errOut)
	}
	_, _, err = run(t, filepath.Join(dir, "n.db"), "ingest", filepath.Join(out, "config.json"))
	if exitCode(err) != exitFailure {
		t.Errorf("a named non-dump must fail: %v", err)
	}
}

// writeDoc writes a generic dump document to dir/name with its content hash recomputed.
func writeDoc(t *testing.T, dir, name string, doc map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(doc)
	b, err := ingest.Rehash(b)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ingest, rm and report say what they did as JSON too (ids, paths), for scripts.
func TestJSONOnCommandsThatAct(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	var ing []struct {
		Path    string `json:"path"`
		ID      int64  `json:"id"`
		Created bool   `json:"created"`
		Model   string `json:"model"`
	}
	out := mustRun(t, db, "ingest", "--json", "../../examples/dumps/gpt2.json.gz", "../../schemas/testdata/valid/mlp_stats.json")
	if err := json.Unmarshal([]byte(out), &ing); err != nil || len(ing) != 2 || ing[0].ID != 1 || !ing[0].Created || ing[0].Model != "gpt2" {
		t.Fatalf("ingest --json: %v %s", err, out)
	}
	out = mustRun(t, db, "ingest", "--json", "../../examples/dumps/gpt2.json.gz")
	if err := json.Unmarshal([]byte(out), &ing); err != nil || len(ing) != 1 || ing[0].Created || ing[0].ID != 1 {
		t.Fatalf("ingest --json of a stored dump: %v %s", err, out)
	}
	var rep struct {
		Run    int64    `json:"run"`
		Report string   `json:"report"`
		Files  []string `json:"files"`
	}
	out = mustRun(t, db, "report", "gpt2", "--json", "--sensitivity", "off", "-o", filepath.Join(dir, "r"))
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Run != 1 || len(rep.Files) < 3 {
		t.Fatalf("report --json: %v %s", err, out)
	}
	for _, f := range rep.Files {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	var rm []struct {
		ID int64 `json:"id"`
	}
	out = mustRun(t, db, "rm", "--json", "1", "2")
	if err := json.Unmarshal([]byte(out), &rm); err != nil || len(rm) != 2 || rm[1].ID != 2 {
		t.Fatalf("rm --json: %v %s", err, out)
	}
}
