// Package bundled loads the example models built into the binary for tests: one loader where
// serve, layout, calib and report tests each had their own. (It is apart from testutil because
// it imports ingest, whose own tests use testutil.)
package bundled

import (
	"testing"

	"github.com/mrep-dev/mrep/examples"
	"github.com/mrep-dev/mrep/model"
)

// Resolve is the bundled dump a name stands for, as calibration rows write names (exact, a
// path to the dump, case-insensitive, or a unique prefix): a calib.Models.
func Resolve(name string) (*model.Dump, error) {
	if b, ok := examples.Resolve(name); ok {
		name = b
	}
	return examples.Decode(name)
}

// Dump is a bundled example model's dump (`mrep models` lists the names), or a fatal error.
func Dump(t testing.TB, name string) *model.Dump {
	t.Helper()
	d, err := Resolve(name)
	if err != nil {
		t.Fatalf("bundled model %s: %v", name, err)
	}
	return d
}
