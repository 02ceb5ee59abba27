package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/render"
	"github.com/mrep-dev/mrep/store"
)

// errRejected: some dump was rejected and the batch is all-or-nothing; nothing is stored.
var errRejected = errors.New("rejected dumps")

// stored is one file an ingest stored, or found stored already.
type stored struct {
	path string
	got  store.Ingested
}

// streamInto ingests paths into db in one transaction, each dump stored while it is decoded.
// Every file is checked (so every bad one is named); without keepGoing one bad file stores
// nothing (errRejected), with it each bad file is rolled back alone.
func streamInto(c *cli.Context, db *store.DB, paths []string, opt ingest.Options, keepGoing bool) ([]stored, []string, error) {
	var done []stored
	var bads []string
	err := db.IngestStream(c.Context, func(s *store.Stream) error {
		done, bads = nil, nil
		for _, p := range paths {
			r := s.Run(p)
			d, _, err := ingest.StreamFile(p, opt, r)
			var ie *ingest.Error
			switch {
			case err != nil && errors.As(err, &ie):
				if aerr := r.Abort(); aerr != nil {
					return aerr
				}
				bads = append(bads, p)
				fmt.Fprintf(c.App.ErrWriter, "mrep: %s\n", render.Visible(err.Error()))
				continue
			case err != nil: // the store failed, not the dump
				return fmt.Errorf("store %s: %w", p, err)
			}
			g, err := r.Finish(d)
			if err != nil {
				return err
			}
			done = append(done, stored{p, g})
		}
		if len(bads) > 0 && !keepGoing {
			return errRejected
		}
		return nil
	})
	return done, bads, err
}

// ingestFiles stores paths into the database at dbPath. A database that does not exist yet is
// built beside it and linked into place only once something was stored, so a rejected ingest
// never creates one, and two processes creating it at once cannot clobber each other (the
// one that links second ingests again into the first one's database).
func ingestFiles(c *cli.Context, env Env, dbPath string, paths []string, opt ingest.Options) ([]stored, []string, error) {
	keepGoing := c.Bool("keep-going")
	if _, err := os.Stat(dbPath); err == nil {
		db, err := openDB(c, env)
		if err != nil {
			return nil, nil, err
		}
		defer db.Close()
		return streamInto(c, db, paths, opt, keepGoing)
	}
	var suffix [6]byte
	rand.Read(suffix[:])
	tmp := fmt.Sprintf("%s.new-%d-%s", dbPath, os.Getpid(), hex.EncodeToString(suffix[:]))
	removeTmp := func() {
		for _, ext := range []string{"", "-wal", "-shm", "-journal"} {
			os.Remove(tmp + ext)
		}
	}
	defer removeTmp()
	db, err := store.Open(c.Context, tmp, store.Options{Now: env.Now})
	if err != nil {
		return nil, nil, cli.Exit(err.Error(), exitFailure)
	}
	done, bads, err := streamInto(c, db, paths, opt, keepGoing)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil || len(done) == 0 {
		return done, bads, err
	}
	if lerr := os.Link(tmp, dbPath); lerr != nil {
		// another process created it meanwhile (or the file system has no hard links):
		// ingest into the database at dbPath itself, as an existing one
		real, err := openDB(c, env)
		if err != nil {
			return nil, nil, err
		}
		defer real.Close()
		return streamInto(c, real, paths, opt, keepGoing)
	}
	return done, bads, nil
}

// reportIngest prints what was stored (or writes it as JSON) and the verdict on rejected files.
func reportIngest(ctx context.Context, c *cli.Context, env Env, done []stored, bads []string, total int) error {
	var report []ingestResult
	if len(done) > 0 {
		db, err := openDBRead(c, env)
		if err != nil {
			return err
		}
		defer db.Close()
		for _, s := range done {
			run, err := db.Run(ctx, s.got.ID)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				report = append(report, ingestResult{Path: s.path, ID: run.ID, Created: s.got.Created, Model: run.ModelName, Label: run.Label, Step: run.Step})
				continue
			}
			if s.got.Created {
				fmt.Fprintf(c.App.Writer, "ingested %s as run %d (%s)\n", render.Visible(s.path), run.ID, describe(run))
			} else {
				fmt.Fprintf(c.App.Writer, "%s: already ingested as run %d (%s)\n", render.Visible(s.path), run.ID, describe(run))
			}
		}
	}
	if c.Bool("json") {
		for _, b := range bads {
			report = append(report, ingestResult{Path: b, Error: "rejected (see stderr)"})
		}
		if err := writeJSON(c.App.Writer, report); err != nil {
			return err
		}
	}
	if len(bads) > 0 {
		return cli.Exit(fmt.Sprintf("ingest: %d of %d dumps rejected: %s", len(bads), total, render.Visible(strings.Join(bads, ", "))), exitFailure)
	}
	return nil
}
