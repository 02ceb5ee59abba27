package scaledump

import (
	"path/filepath"
	"testing"

	"github.com/mrep-dev/mrep/ingest"
)

func TestWritesAValidDump(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	if err := Write(p, 100, 250); err != nil {
		t.Fatal(err)
	}
	d, err := ingest.ReadFile(p, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range d.Modules {
		n += len(m.Params) + len(m.Buffers)
	}
	if len(d.Modules) != 101 || n != 250 {
		t.Errorf("%d modules, %d tensors", len(d.Modules), n)
	}
}
