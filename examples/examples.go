// Package examples ships the bundled model dumps inside the binary, so that `mrep validate`
// and `mrep calibrate` resolve the calibration set's models from any directory.
package examples

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"
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
