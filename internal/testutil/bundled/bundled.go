// Package bundled loads the example models built into the binary for tests: one loader where
// serve, layout, calib and report tests each had their own.
package bundled

import (
	"testing"

	"github.com/mrep-dev/mrep/examples"
	"github.com/mrep-dev/mrep/model"
)

// Dump is a bundled example model's dump (`mrep models` lists the names), or a fatal error.
func Dump(t testing.TB, name string) *model.Dump {
	t.Helper()
	d, err := examples.Decode(name)
	if err != nil {
		t.Fatalf("bundled model %s: %v", name, err)
	}
	return d
}
