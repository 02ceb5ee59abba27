package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mrep-dev/mrep/model"
)

// Stream is one ingest transaction that stores dumps while they are being decoded, so SQLite
// writes the first modules while the decoder still reads the last (ingest.StreamFile feeds a
// RunStream). Each dump is a savepoint: one that turns out invalid is rolled back alone; the
// caller decides whether the others commit (Ingest's all-or-nothing, or --keep-going).
type Stream struct {
	ctx context.Context
	tx  sqlTx
	now time.Time
	who string
	n   int // savepoints opened
}

// IngestStream runs fn in one transaction; an error from fn rolls everything back.
func (db *DB) IngestStream(ctx context.Context, fn func(s *Stream) error) error {
	if err := db.writable(); err != nil {
		return err
	}
	return db.tx(ctx, func(tx sqlTx) error {
		return fn(&Stream{ctx: ctx, tx: tx, now: db.now().UTC(), who: db.who})
	})
}

// Run starts one dump read from source.
func (s *Stream) Run(source string) *RunStream {
	s.n++
	return &RunStream{s: s, source: source, sp: fmt.Sprintf("dump_%d", s.n)}
}

// RunStream receives one dump as it is decoded (the ingest.Sink methods: Header, Modules,
// Reset), then Finish stores its runs row, or Abort drops what it received.
type RunStream struct {
	s      *Stream
	source string
	sp     string
	open   bool  // the savepoint is open
	dup    int64 // the claimed content hash is stored already as this run
	w      *runWriter
}

// Header starts the run: a dump whose (claimed) content hash is stored already is not stored
// again; the decoder still checks it to the end.
func (r *RunStream) Header(d *model.Dump, modules int) error {
	ctx, tx := r.s.ctx, r.s.tx
	var id int64
	err := tx.QueryRowContext(ctx, `SELECT id FROM runs WHERE content_hash = ?`, d.Run.ContentHash).Scan(&id)
	switch {
	case err == nil:
		r.dup = id
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT `+r.sp); err != nil {
		return err
	}
	r.open = true
	r.w, err = beginRun(ctx, tx, d, modules)
	if r.w != nil {
		r.w.who = r.s.who
	}
	return err
}

// Modules stores modules first, first+1, … (in order, after Header).
func (r *RunStream) Modules(first int, ms []model.Module) error {
	if r.w == nil {
		return nil
	}
	return r.w.add(first, ms)
}

// Reset drops what was received: the decoder starts over (its fast path gave up).
func (r *RunStream) Reset() error {
	return r.Abort()
}

// Abort rolls the dump back to before its Header.
func (r *RunStream) Abort() error {
	if r.w != nil {
		r.w.stop()
		r.w = nil
	}
	r.dup = 0
	if !r.open {
		return nil
	}
	r.open = false
	ctx, tx := r.s.ctx, r.s.tx
	if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT `+r.sp); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `RELEASE `+r.sp)
	return err
}

// Finish stores what needs the whole, checked dump (the runs row with its totals and
// checksums) and keeps the run.
func (r *RunStream) Finish(d *model.Dump) (Ingested, error) {
	if r.dup != 0 {
		return Ingested{ID: r.dup}, nil
	}
	if r.w == nil {
		return Ingested{}, fmt.Errorf("store %s: finished before its header", r.source)
	}
	defer func() {
		if r.w != nil {
			r.w.stop()
			r.w = nil
		}
	}()
	id, err := r.w.finish(d, r.source, r.s.now)
	if errors.Is(err, errStoredMeanwhile) {
		r.w.stop()
		r.w, r.open = nil, false
		if id, err = storedMeanwhile(r.s.ctx, r.s.tx, r.sp, d.Run.ContentHash); err != nil {
			return Ingested{}, err
		}
		return Ingested{ID: id}, nil
	}
	if err != nil {
		return Ingested{}, fmt.Errorf("store %s (run %s): %w", r.source, d.Model.Name, err)
	}
	r.open = false
	if _, err := r.s.tx.ExecContext(r.s.ctx, `RELEASE `+r.sp); err != nil {
		return Ingested{}, err
	}
	return Ingested{ID: id, Created: true}, nil
}
