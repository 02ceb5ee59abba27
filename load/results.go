package load

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mrep-dev/mrep/calib"
	"github.com/mrep-dev/mrep/ingest"
	"github.com/mrep-dev/mrep/measure"
	"github.com/mrep-dev/mrep/store"
)

// ResultFile is a benchmark result file or training log read by measure, with the context the
// user gave for what the file does not say.
type ResultFile struct {
	Path string
	Data []byte
	Runs []measure.Run
}

// ResultRows are the records of files as they would be stored, each run's calibration rows
// built (an error names the file and what is missing: nothing is stored then).
func ResultRows(files []ResultFile, flags measure.Context) ([]store.Result, []calib.Row, error) {
	var out []store.Result
	var all []calib.Row
	for _, f := range files {
		sum := sha256.Sum256(f.Data)
		digest := hex.EncodeToString(sum[:])
		for _, r := range f.Runs {
			c := r.Resolve(flags)
			source := fmt.Sprintf("%s result %s (sha256 %s)", r.Tool, filepath.Base(f.Path), digest[:12])
			rows, err := r.Rows(c, digest[:12], source)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f.Path, err)
			}
			run, err := json.Marshal(r)
			if err != nil {
				return nil, nil, err
			}
			rs, err := json.Marshal(rows)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, store.Result{Digest: digest, Record: r.Record, Source: f.Path, Tool: r.Tool, Plan: c.Plan, Run: string(run), Rows: string(rs)})
			all = append(all, rows...)
		}
	}
	return out, all, nil
}

// StoredRows are the calibration rows of every stored result, oldest first.
func StoredRows(ctx context.Context, db *store.DB) ([]calib.Row, error) {
	rs, err := db.Results(ctx)
	if err != nil {
		return nil, err
	}
	var out []calib.Row
	for _, r := range rs {
		var rows []calib.Row
		if err := json.Unmarshal([]byte(r.Rows), &rows); err != nil {
			return nil, fmt.Errorf("stored result %s record %d: rows unreadable (%v): %w", r.Digest[:12], r.Record, err, store.ErrCorrupt)
		}
		out = append(out, rows...)
	}
	return out, nil
}

// MaxResultBytes bounds a result file or log read whole (a benchmark's result with every
// request's lengths and latencies, a long training log).
const MaxResultBytes = 256 << 20

// Classify splits paths into the benchmark result files and training logs measure reads (read
// whole, parsed) and the rest, left for the dump ingester. A file that starts as a result but
// is malformed is an error naming it: an ingest stores nothing then.
func Classify(paths []string) ([]ResultFile, []string, error) {
	var results []ResultFile
	var dumps []string
	for _, p := range paths {
		data, isDump, err := sniff(p)
		if err != nil {
			return nil, nil, err
		}
		if isDump {
			dumps = append(dumps, p)
			continue
		}
		runs, err := measure.Parse(p, data)
		switch {
		case errors.Is(err, measure.ErrNotResult):
			dumps = append(dumps, p) // the dump ingester says what it is not
		case err != nil:
			return nil, nil, err
		default:
			results = append(results, ResultFile{Path: p, Data: data, Runs: runs})
		}
	}
	return results, dumps, nil
}

// sniff reads a regular file whole unless it is a dump (gzip, or JSON whose first MiB names
// schema_version: ingest.LooksLikeDump); FIFOs, devices and oversized files are left to the dump
// ingester, which refuses them with its own message.
func sniff(p string) ([]byte, bool, error) {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxResultBytes {
		return nil, true, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, true, nil
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if bytes.HasPrefix(head, []byte{0x1f, 0x8b}) || ingest.LooksLikeDump(p) {
		return nil, true, nil
	}
	rest, err := io.ReadAll(io.LimitReader(f, MaxResultBytes))
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", p, err)
	}
	return append(head, rest...), false, nil
}
