package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mrep-dev/mrep/ingest"
)

// hostileName is what a training script can put in a dump: markup, an ampersand, a table pipe,
// backticks, a newline that would start a heading, a terminal escape and a bidi override.
const hostileName = "<script>alert(1)</script> Q&A-7B | `x` \n# Owned \x1b[31mred\x07 \u202eevil"

// bundledDoc is a bundled dump decoded generically (numbers as written).
func bundledDoc(t *testing.T, from string) map[string]any {
	t.Helper()
	return gzDoc(t, "../../examples/dumps/"+from+".json.gz")
}

// gzDoc is a gzipped dump file decoded generically (numbers as written).
func gzDoc(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// editedDump writes a bundled dump with its model name and label replaced (and its content
// hash recomputed, as an exporter would have written it) to dir.
func editedDump(t *testing.T, dir, from, name, label string) string {
	t.Helper()
	doc := bundledDoc(t, from)
	doc["model"].(map[string]any)["name"] = name
	doc["run"].(map[string]any)["label"] = label
	return writeRehashed(t, filepath.Join(dir, "edited.json"), doc)
}

// writeRehashed writes doc as a dump at p, its content hash made to match.
func writeRehashed(t *testing.T, p string, doc map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(doc)
	b, err := ingest.Rehash(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHostileNamesStayInert(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "h.db")
	out := mustRun(t, db, "ingest", editedDump(t, dir, "Llama-3.2-1B-Instruct", hostileName, "l\x1b]0;title\x07"))
	for _, s := range []string{"\x1b", "\x07", "\u202e", "\n# Owned"} {
		if strings.Contains(strings.TrimSuffix(out, "\n"), s) {
			t.Errorf("ingest message carries %q raw: %q", s, out)
		}
	}
	for _, args := range [][]string{{"runs"}, {"show", "1"}} {
		o := mustRun(t, db, args...)
		if strings.ContainsAny(o, "\x1b\x07\u202e") || strings.Contains(o, "\n# Owned") {
			t.Errorf("%s prints control characters or an injected heading raw", args[0])
		}
	}
	// a profile named to climb out of the output directory
	prof := filepath.Join(dir, "p.json")
	os.WriteFile(prof, []byte(`[{"name":"../../x","attention_bytes":"flash","wrf_attn":1,"wrf_dense":1,"wrf_moe":1,"act_fusion":1,"elementwise":1}]`), 0o644)
	rep := filepath.Join(dir, "a", "b", "out")
	mustRun(t, db, "report", "1", "-o", rep, "--svg", "--exec", prof, "--sensitivity", "off", "--chip", "H100")
	if _, err := os.Stat(filepath.Join(dir, "a", "x_mode_category_stacks.png")); err == nil {
		t.Fatal("a profile name wrote outside -o")
	}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && !strings.HasPrefix(p, rep+string(filepath.Separator)) && p != db && !strings.HasPrefix(p, db) && p != prof && !strings.HasSuffix(p, "edited.json") {
			t.Errorf("file outside the report directory: %s", p)
		}
		return nil
	})
	ents, _ := os.ReadDir(rep)
	var svgs int
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(rep, e.Name()))
		switch filepath.Ext(e.Name()) {
		case ".svg":
			svgs++
			if bytes.Contains(b, []byte("922337203685477")) {
				t.Errorf("%s places elements at NaN coordinates (an unused axis drawn)", e.Name())
			}
			d := xml.NewDecoder(bytes.NewReader(b))
			for {
				tok, err := d.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("%s is not well-formed XML: %v", e.Name(), err)
				}
				if se, ok := tok.(xml.StartElement); ok && strings.EqualFold(se.Name.Local, "script") {
					t.Fatalf("%s has a script element", e.Name())
				}
			}
		case ".md":
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "# Owned") || strings.ContainsAny(line, "\x1b\x07\u202e") {
					t.Errorf("%s: the name broke out of its line: %q", e.Name(), line)
				}
				if strings.HasPrefix(line, "|") && strings.Contains(line, "Q&A-7B") && strings.Contains(line, " | `x`") {
					t.Errorf("%s: a '|' in the name splits a table cell: %q", e.Name(), line)
				}
			}
		}
	}
	if svgs < 8 {
		t.Errorf("only %d SVGs written", svgs)
	}
}

// A failed report leaves no output directory; a second report replaces the first whole,
// leaving no file of the first behind; a directory holding someone else's files is refused.
func TestReportDirectoryIsAtomic(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	mustRun(t, db, "ingest", "../../examples/dumps/Llama-3.2-1B-Instruct.json.gz")
	out := filepath.Join(dir, "out")
	if _, _, err := run(t, db, "report", "1", "-o", out, "--chip", "H900"); err == nil {
		t.Fatal("an unknown chip must fail")
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a failed report created its output directory")
	}
	prof := filepath.Join(dir, "p.json")
	os.WriteFile(prof, []byte(`{"name":"extra","attention_bytes":"flash","wrf_attn":1,"wrf_dense":1,"wrf_moe":1,"act_fusion":1,"elementwise":1}`), 0o644)
	mustRun(t, db, "report", "1", "-o", out, "--exec", "naive", "--exec", prof, "--sensitivity", "off")
	if _, err := os.Stat(filepath.Join(out, "extra_mode_category_stacks.png")); err != nil {
		t.Fatal(err)
	}
	mustRun(t, db, "report", "1", "-o", out, "--sensitivity", "off")
	if _, err := os.Stat(filepath.Join(out, "extra_mode_category_stacks.png")); err == nil {
		t.Error("a chart of the first report survived beside the second report")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary directory left behind: %s", e.Name())
		}
	}
	mine := filepath.Join(dir, "mine")
	os.MkdirAll(mine, 0o755)
	os.WriteFile(filepath.Join(mine, "notes.txt"), []byte("keep"), 0o644)
	if _, _, err := run(t, db, "report", "1", "-o", mine, "--sensitivity", "off"); err == nil || !strings.Contains(err.Error(), "notes.txt") {
		t.Errorf("a directory with the user's files must be refused: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(mine, "notes.txt")); string(b) != "keep" {
		t.Error("the user's file was touched")
	}
}

// Config values no model has are ignored with a warning naming the key: no NaN, -Inf or
// negative bytes reach the outputs.
func TestAbsurdConfigValuesAreNamedAndIgnored(t *testing.T) {
	dir := t.TempDir()
	doc := bundledDoc(t, "Llama-3.2-1B-Instruct")
	cfg := doc["config"].(map[string]any)
	cfg["num_attention_heads"] = json.Number("12.5")
	cfg["num_key_value_heads"] = json.Number("-8")
	cfg["vocab_size"] = json.Number("1e15")
	b, _ := json.Marshal(doc)
	b, err := ingest.Rehash(b)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "absurd.json")
	os.WriteFile(p, b, 0o644)
	db := filepath.Join(dir, "a.db")
	mustRun(t, db, "ingest", p)
	out := mustRun(t, db, "analyze", "1")
	for _, want := range []string{"config num_attention_heads = 12.5 is not an integer", "config num_key_value_heads = -8 is negative", "config vocab_size = 1e15 is beyond any real model"} {
		if !strings.Contains(out, want) {
			t.Errorf("analyze does not say %q", want)
		}
	}
	js := mustRun(t, db, "analyze", "1", "--json")
	for _, bad := range []string{"NaN", "Inf", `"bytes_weights": -`, `"T_est": -`} {
		if strings.Contains(js, bad) {
			t.Errorf("analyze --json carries %s", bad)
		}
	}
}

// A module tree without parameters (nn.Sequential(nn.ReLU())) is a valid dump: it is stored,
// shown, analyzed and reported without NaN or an empty figure, and a plan refuses it naming
// what is missing rather than blaming --gpus.
func TestParameterlessTree(t *testing.T) {
	dir := t.TempDir()
	doc := bundledDoc(t, "gpt2")
	doc["model"] = map[string]any{"name": "relu", "root_class": "torch.nn.Sequential", "source": map[string]any{"kind": "module"}, "dtype": "float32"}
	doc["config"] = map[string]any{}
	doc["modules"] = []any{
		map[string]any{"name": "", "class": "Sequential", "py_module": "torch.nn", "parent": nil, "params": []any{}, "buffers": []any{}},
		map[string]any{"name": "0", "class": "ReLU", "py_module": "torch.nn", "parent": "", "params": []any{}, "buffers": []any{}},
	}
	p := writeRehashed(t, filepath.Join(dir, "relu.json"), doc)
	db := filepath.Join(dir, "x.db")
	mustRun(t, db, "ingest", p)
	rep := filepath.Join(dir, "rep")
	for _, args := range [][]string{{"show", "1"}, {"analyze", "1"}, {"report", "1", "-o", rep, "--chip", "H100"}} {
		out := mustRun(t, db, args...)
		if strings.Contains(out, "NaN") || strings.Contains(out, "( GiB") {
			t.Errorf("%v prints NaN or an empty figure:\n%s", args, out)
		}
	}
	md, err := os.ReadFile(filepath.Join(rep, "report.md"))
	if err != nil || strings.Contains(string(md), "NaN") {
		t.Errorf("report.md: %v, NaN: %v", err, strings.Contains(string(md), "NaN"))
	}
	for _, args := range [][]string{{"plan", "serve", "1"}, {"plan", "train", "1", "--gpus", "8", "--gbs", "8"}} {
		_, _, err := run(t, db, args...)
		if err == nil || !strings.Contains(err.Error(), "1 (relu) has no parameters") {
			t.Errorf("%v: %v", args, err)
		}
	}
}
