// Package load stores dump files in a database, as `mrep ingest` does: every dump is decoded
// and stored as it streams, all in one transaction (a rejected dump stores nothing, or with
// KeepGoing only itself), and a database that does not exist yet is built beside its path and
// linked into place only once something was stored, so a rejected ingest never creates one and
// two processes creating it at once cannot clobber each other.
package load

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/store"
)

// ErrRejected: some dump was rejected and the batch is all-or-nothing; nothing is stored.
var ErrRejected = errors.New("rejected dumps")

// OpenError is a database that could not be opened or created: nothing was attempted. Its
// message is the store's.
type OpenError struct{ Err error }

func (e *OpenError) Error() string { return e.Err.Error() }
func (e *OpenError) Unwrap() error { return e.Err }

// Options say how to decode, store and report.
type Options struct {
	Ingest ingest.Options
	// KeepGoing stores the valid dumps of a batch that has rejected ones.
	KeepGoing bool
	// Store opens the database (its clock, integrity check).
	Store store.Options
	// Rejected hears of each rejected dump as it is found (nil: nobody).
	Rejected func(path string, err error)
}

// Stored is one file stored, or found stored already.
type Stored struct {
	Path string
	Got  store.Ingested
}

// Into ingests paths into db in one transaction, each dump stored while it is decoded. Every
// file is checked (so every bad one is named); without KeepGoing one bad file stores nothing
// (ErrRejected), with it each bad file is rolled back alone.
func Into(ctx context.Context, db *store.DB, paths []string, o Options) ([]Stored, []string, error) {
	var done []Stored
	var bads []string
	err := db.IngestStream(ctx, func(s *store.Stream) error {
		done, bads = nil, nil
		for _, p := range paths {
			r := s.Run(p)
			d, _, err := ingest.StreamFile(p, o.Ingest, r)
			var ie *ingest.Error
			switch {
			case err != nil && errors.As(err, &ie):
				if aerr := r.Abort(); aerr != nil {
					return aerr
				}
				bads = append(bads, p)
				if o.Rejected != nil {
					o.Rejected(p, err)
				}
				continue
			case err != nil: // the store failed, not the dump
				return fmt.Errorf("store %s: %w", p, err)
			}
			g, err := r.Finish(d)
			if err != nil {
				return err
			}
			done = append(done, Stored{p, g})
		}
		if len(bads) > 0 && !o.KeepGoing {
			return ErrRejected
		}
		return nil
	})
	if err != nil {
		return nil, bads, store.ConnLost(err) // the transaction rolled back: nothing is stored
	}
	return done, bads, nil
}

// Files stores paths into the database at dbPath, creating it (atomically, see the package
// comment) when it does not exist.
func Files(ctx context.Context, dbPath string, paths []string, o Options) ([]Stored, []string, error) {
	open := func() (*store.DB, error) {
		db, err := store.Open(ctx, dbPath, o.Store)
		if err != nil {
			return nil, &OpenError{err}
		}
		return db, nil
	}
	if _, err := os.Stat(dbPath); err == nil || store.IsPostgres(dbPath) {
		db, err := open()
		if err != nil {
			return nil, nil, err
		}
		defer db.Close()
		return Into(ctx, db, paths, o)
	}
	var suffix [6]byte
	rand.Read(suffix[:])
	tmp := fmt.Sprintf("%s.new-%d-%s", dbPath, os.Getpid(), hex.EncodeToString(suffix[:]))
	defer func() {
		for _, ext := range []string{"", "-wal", "-shm", "-journal"} {
			os.Remove(tmp + ext)
		}
	}()
	so := o.Store
	so.Existing = false
	db, err := store.Open(ctx, tmp, so)
	if err != nil {
		return nil, nil, &OpenError{err}
	}
	done, bads, err := Into(ctx, db, paths, o)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil || len(done) == 0 {
		return done, bads, err
	}
	if lerr := os.Link(tmp, dbPath); lerr != nil {
		// another process created it meanwhile (or the file system has no hard links): ingest
		// into the database at dbPath itself, as an existing one
		real, err := open()
		if err != nil {
			return nil, nil, err
		}
		defer real.Close()
		return Into(ctx, real, paths, o)
	}
	return done, bads, nil
}
