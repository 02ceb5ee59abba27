package render

import (
	"fmt"
	"io"
)

// errWriter keeps the first write error so rendering code reads as plain prose.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err != nil {
		return
	}
	_, e.err = fmt.Fprintf(e.w, format, args...)
}
