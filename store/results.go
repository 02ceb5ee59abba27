package store

import (
	"context"
	"fmt"
)

// Result is one record of a benchmark result file or training log as stored: the file's
// SHA-256 and the record's place (from 1) identify it; Run and Rows are JSON (a measure.Run and
// its calibration rows), kept as text so the history does not depend on their Go types.
type Result struct {
	Digest     string `json:"digest"`
	Record     int    `json:"record"`
	Source     string `json:"source"`
	Tool       string `json:"tool"`
	Plan       string `json:"plan,omitempty"`
	Run        string `json:"run"`
	Rows       string `json:"rows"`
	IngestedAt string `json:"ingested_at"`
	IngestedBy string `json:"ingested_by,omitempty"`
}

// AddResults stores rs in one transaction, skipping records stored already (same digest and
// place); it returns how many were new. IngestedAt and IngestedBy are the store's clock and
// user.
func (db *DB) AddResults(ctx context.Context, rs []Result) (int, error) {
	return db.addResults(ctx, rs, false)
}

// CopyResults copies every result of src that dst lacks, keeping when and by whom each was
// ingested (a history copied to a team's keeps what was measured, and where).
func CopyResults(ctx context.Context, src, dst *DB) (int, error) {
	rs, err := src.Results(ctx)
	if err != nil {
		return 0, err
	}
	return dst.addResults(ctx, rs, true)
}

func (db *DB) addResults(ctx context.Context, rs []Result, keep bool) (int, error) {
	if err := db.writable(); err != nil {
		return 0, fmt.Errorf("storing results: %w", err)
	}
	added := 0
	err := db.tx(ctx, func(tx sqlTx) error {
		added = 0
		now, who := db.now().UTC().Format("2006-01-02T15:04:05Z"), db.who
		for _, r := range rs {
			at, by := now, who
			if keep {
				at, by = r.IngestedAt, r.IngestedBy
			}
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM results WHERE digest = ? AND record = ?`, r.Digest, r.Record).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			var plan any
			if r.Plan != "" {
				plan = r.Plan
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO results (digest, record, source, tool, plan, run, rows, ingested_at, ingested_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				r.Digest, r.Record, clip(r.Source, 4096), r.Tool, plan, r.Run, r.Rows, at, by); err != nil {
				return fmt.Errorf("storing %s record %d: %w", r.Source, r.Record, err)
			}
			added++
		}
		return nil
	})
	return added, err
}

// Results lists the stored results, oldest first.
func (db *DB) Results(ctx context.Context) ([]Result, error) {
	rows, err := db.sql.QueryContext(ctx, `SELECT digest, record, source, tool, COALESCE(plan, ''), run, rows, ingested_at, COALESCE(ingested_by, '') FROM results ORDER BY ingested_at, digest, record`)
	if err != nil {
		return nil, fmt.Errorf("listing results: %w", err)
	}
	defer rows.Close()
	var out []Result
	for rows.Next() {
		var r Result
		if err := rows.Scan(&r.Digest, &r.Record, &r.Source, &r.Tool, &r.Plan, &r.Run, &r.Rows, &r.IngestedAt, &r.IngestedBy); err != nil {
			return nil, fmt.Errorf("listing results: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
