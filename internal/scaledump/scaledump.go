// Package scaledump writes a large valid dump for scale benchmarks: a root with `modules`
// children, each a Linear-like module, spread over that many tensors (weights, biases and a
// buffer), with the content hash the exporter would write.
package scaledump

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/mrep-dev/mrep/ingest"
)

// Write writes a dump with modules child modules holding tensors tensors in all.
func Write(path string, modules, tensors int) error {
	f, err := os.CreateTemp("", "scale-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	w := bufio.NewWriterSize(f, 1<<20)
	if err := body(w, modules, tensors); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	raw, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return err
	}
	out, err := ingest.Rehash(raw)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

func body(w io.Writer, modules, tensors int) error {
	fmt.Fprint(w, `{"schema_version":1,"model":{"name":"scale","root_class":"torch.nn.Module","source":{"kind":"module"}},`)
	fmt.Fprint(w, `"config":null,"framework":{"python":"3.11","torch":"2.5","transformers":null,"mrep_export":"0"},`)
	fmt.Fprint(w, `"run":{"label":"scale","step":null,"created_at":"2026-01-01T00:00:00Z","content_hash":"sha256:`+fmt.Sprintf("%064d", 0)+`"},"modules":[`)
	fmt.Fprint(w, `{"name":"","class":"Module","py_module":"torch.nn","parent":null,"params":[],"buffers":[]}`)
	left := tensors
	for i := 0; i < modules; i++ {
		n := left / (modules - i)
		left -= n
		fmt.Fprintf(w, `,{"name":"m%d","class":"Linear","py_module":"torch.nn","parent":"","params":[`, i)
		var bufs []int
		first := true
		for j := 0; j < n; j++ {
			if j == 2 { // every third tensor of a module is a buffer
				bufs = append(bufs, j)
				continue
			}
			if !first {
				fmt.Fprint(w, ",")
			}
			first = false
			fmt.Fprintf(w, `{"name":"w%d","shape":[64,64],"dtype":"bfloat16","numel":4096,"device":"meta","requires_grad":true}`, j)
		}
		fmt.Fprint(w, `],"buffers":[`)
		for k, j := range bufs {
			if k > 0 {
				fmt.Fprint(w, ",")
			}
			fmt.Fprintf(w, `{"name":"b%d","shape":[64],"dtype":"float32","numel":64,"device":"meta","persistent":true}`, j)
		}
		fmt.Fprint(w, `]}`)
	}
	_, err := fmt.Fprint(w, `]}`)
	return err
}
