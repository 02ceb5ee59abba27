package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Copied is one run of a copy between stores.
type Copied struct {
	From    int64  `json:"from"`    // the run's id in the source
	To      int64  `json:"to"`      // its id in the destination
	Model   string `json:"model"`   // its model name
	Created bool   `json:"created"` // false: the destination held its content already
}

// Copy copies runs (all of them, in id order, when ids is empty) from src to dst: a laptop's
// SQLite history into a team's PostgreSQL one, or back. Each run is read from src with its
// checksum verified, stored in dst in one transaction keeping its ingestion time and source
// file, and read back from dst with the checksum verified again and compared with the
// source's. A run whose content hash dst holds already is not copied again, so a copy can be
// repeated (or resumed after a failure) safely. progress, when set, hears of each run as it
// is done.
func Copy(ctx context.Context, src, dst *DB, ids []int64, progress func(Copied)) ([]Copied, error) {
	if err := dst.writable(); err != nil {
		return nil, fmt.Errorf("copy into %s: %w", dst.Path(), err)
	}
	if len(ids) == 0 {
		runs, err := src.ListRuns(ctx, Filter{})
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
	}
	var out []Copied
	for _, id := range ids {
		c, err := copyRun(ctx, src, dst, id)
		if err != nil {
			return out, err
		}
		out = append(out, c)
		if progress != nil {
			progress(c)
		}
	}
	return out, nil
}

func copyRun(ctx context.Context, src, dst *DB, id int64) (Copied, error) {
	run, err := src.Run(ctx, id)
	if err != nil {
		return Copied{}, fmt.Errorf("run %d of %s: %w", id, src.Path(), err)
	}
	d, err := src.LoadDump(ctx, id) // verified against its checksum
	if err != nil {
		return Copied{}, fmt.Errorf("run %d of %s: %w", id, src.Path(), err)
	}
	want, err := Checksum(d)
	if err != nil {
		return Copied{}, err
	}
	c := Copied{From: id, Model: run.ModelName}
	err = dst.tx(ctx, func(tx sqlTx) error {
		var have int64
		err := tx.QueryRowContext(ctx, `SELECT id FROM runs WHERE content_hash = ?`, d.Run.ContentHash).Scan(&have)
		switch {
		case err == nil:
			c.To = have
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := tx.ExecContext(ctx, `SAVEPOINT copy_run`); err != nil {
			return err
		}
		w, err := beginRun(ctx, tx, d, len(d.Modules))
		if err != nil {
			return err
		}
		defer w.stop()
		w.copied = &run
		if err := w.add(0, d.Modules); err != nil {
			return err
		}
		c.To, err = w.finish(d, run.SourceFile, run.IngestedAt)
		if errors.Is(err, errStoredMeanwhile) {
			c.To, err = storedMeanwhile(ctx, tx, "copy_run", d.Run.ContentHash)
			return err
		}
		if err != nil {
			return err
		}
		c.Created = true
		_, err = tx.ExecContext(ctx, `RELEASE copy_run`)
		return err
	})
	if err != nil {
		return Copied{}, fmt.Errorf("copy run %d (%s) into %s: %w", id, run.ModelName, dst.Path(), err)
	}
	back, err := dst.LoadDump(ctx, c.To) // verified against the checksum written in dst
	if err != nil {
		return Copied{}, fmt.Errorf("run %d of %s, copied from run %d: %w", c.To, dst.Path(), id, err)
	}
	if got, err := Checksum(back); err != nil || got != want {
		return Copied{}, fmt.Errorf("run %d of %s reads back other than run %d of %s (checksum %s, want %s): %w", c.To, dst.Path(), id, src.Path(), got, want, ErrCorrupt)
	}
	return c, nil
}
