// Package examples ships the bundled model dumps inside the binary, so that `mrep validate`
// and `mrep calibrate` resolve the calibration set's models from any directory.
package examples

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/model"
)

//go:embed dumps/*.json.gz
var dumps embed.FS

// Dump opens the bundled dump of a model by name (the file name without .json.gz).
func Dump(name string) (fs.File, error) {
	if strings.ContainsAny(name, "/\\") || name == "" || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("bundled model %q: not a model name", name)
	}
	return dumps.Open("dumps/" + name + ".json.gz")
}

// Decode reads and checks a bundled dump by name, as `mrep ingest` would.
func Decode(name string) (*model.Dump, error) {
	f, err := Dump(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ingest.Decode(name+".json.gz", f, ingest.Options{})
}

// Resolve finds a bundled model for a name as rows write it: the exact name, a path to the
// dump ("examples/dumps/Llama-2-7b.json.gz"), or a case-insensitive name, else the one
// bundled model whose name starts with it ("Llama-3.1-70B" for Llama-3.1-70B-Instruct).
func Resolve(name string) (string, bool) {
	n := name
	if i := strings.LastIndexAny(n, "/\\"); i >= 0 {
		n = n[i+1:]
	}
	n = strings.TrimSuffix(strings.TrimSuffix(n, ".gz"), ".json")
	names := Names()
	for _, b := range names {
		if b == n {
			return b, true
		}
	}
	for _, b := range names {
		if strings.EqualFold(b, n) {
			return b, true
		}
	}
	var hit []string
	for _, b := range names {
		if len(n) > 0 && strings.HasPrefix(strings.ToLower(b), strings.ToLower(n)) {
			hit = append(hit, b)
		}
	}
	if len(hit) == 1 {
		return hit[0], true
	}
	return "", false
}

// Names lists the bundled models.
func Names() []string {
	ents, _ := dumps.ReadDir("dumps")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".json.gz"); ok {
			out = append(out, n)
		}
	}
	return out
}
