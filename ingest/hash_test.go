package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func rawDoc(t *testing.T, path string) (any, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc, doc.(map[string]any)["run"].(map[string]any)["content_hash"].(string)
}

// The exporter's hashes (Python's canonical JSON) are reproduced exactly for every dump it
// wrote: fixtures, example dumps, traced dumps, checkpoints with statistics.
func TestContentHashMatchesTheExporter(t *testing.T) {
	var files []string
	for _, g := range []string{"../schemas/testdata/valid/*.json", "../examples/dumps/*.json.gz", "../examples/dumps/checkpoints/*.json*"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	if len(files) < 15 {
		t.Fatalf("only %d dumps found", len(files))
	}
	for _, f := range files {
		doc, want := rawDoc(t, f)
		got, err := ContentHash(doc)
		if err != nil || got != want {
			t.Errorf("%s: hash %s (%v), the exporter wrote %s", f, got, err, want)
		}
	}
}

func TestPythonStringEscapes(t *testing.T) {
	var b bytes.Buffer
	pyString(&b, "a\"b\\c\n\t\x01\x7f é 😀 </script>")
	if got, want := b.String(), `"a\"b\\c\n\t\u0001`+"\x7f é 😀 </script>\""; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
