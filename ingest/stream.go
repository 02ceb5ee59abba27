package ingest

import (
	"errors"

	"github.com/mrep-dev/mrep/model"
)

// Sink receives a dump while it is decoded: the header (everything but the modules, and how
// many modules follow), then the modules in order, in runs. Reset drops everything received:
// the decode starts over. A dump handed to a sink is not checked yet: StreamFile's result says
// whether it is one, and the sink must drop it otherwise.
type Sink interface {
	Header(d *model.Dump, modules int) error
	Modules(first int, ms []model.Module) error
	Reset() error
}

// StreamFile is ReadFile that hands the dump to sink as it is decoded, so a store writes
// while the decoder still reads (a large dump's ingest is then as long as the slower of the
// two, not their sum). On an error, what sink received is not a dump: drop it. Errors from
// sink come back as they are.
// It also says how many bytes the dump has once decompressed.
func StreamFile(path string, opt Options, sink Sink) (*model.Dump, int64, error) {
	data, err := readFile(path, opt)
	if err != nil {
		return nil, 0, err
	}
	n := int64(len(data))
	d, err := fastStream(data, sink)
	var se sinkError
	switch {
	case err == nil:
		return d, n, nil
	case errors.As(err, &se):
		return nil, n, se.err
	}
	// the fast path gave up: the reference path decides, and the sink starts over
	if err := sink.Reset(); err != nil {
		return nil, n, err
	}
	if d, err = referenceDecode(path, data); err != nil {
		return nil, n, err
	}
	if err := sink.Header(d, len(d.Modules)); err != nil {
		return nil, n, err
	}
	if err := sink.Modules(0, d.Modules); err != nil {
		return nil, n, err
	}
	return d, n, nil
}
