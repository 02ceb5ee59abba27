package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mrep-dev/mrep/model"
)

// CachedResult returns the cached analysis JSON for (run, scenario key, analyzer version).
func (db *DB) CachedResult(ctx context.Context, runID int64, key, version string) ([]byte, bool, error) {
	var s string
	err := db.sql.QueryRowContext(ctx, `SELECT result FROM analysis_cache WHERE run_id = ? AND scenario_key = ? AND analyzer_version = ?`,
		runID, key, version).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read cache for run %d: %w", runID, err)
	}
	return []byte(s), true, nil
}

// CachedResults returns cached results for many runs at once (one query, for history).
func (db *DB) CachedResults(ctx context.Context, runIDs []int64, key, version string) (map[int64][]byte, error) {
	out := map[int64][]byte{}
	rows, err := db.sql.QueryContext(ctx, `SELECT run_id, result FROM analysis_cache WHERE scenario_key = ? AND analyzer_version = ?`, key, version)
	if err != nil {
		return nil, fmt.Errorf("read cache: %w", err)
	}
	defer rows.Close()
	want := make(map[int64]bool, len(runIDs))
	for _, id := range runIDs {
		want[id] = true
	}
	for rows.Next() {
		var id int64
		var s string
		if err := rows.Scan(&id, &s); err != nil {
			return nil, err
		}
		if want[id] {
			out[id] = []byte(s)
		}
	}
	return out, rows.Err()
}

// PutResult stores an analysis result (replacing one with the same key).
func (db *DB) PutResult(ctx context.Context, runID int64, key, version string, result []byte) error {
	if db.readOnly {
		return ErrReadOnly
	}
	return db.tx(ctx, func(tx sqlTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO analysis_cache (run_id, scenario_key, analyzer_version, result, created_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, scenario_key, analyzer_version)
			DO UPDATE SET result = excluded.result, created_at = excluded.created_at`,
			runID, key, version, string(result), db.now().UTC().Format(time.RFC3339Nano))
		if err != nil {
			return fmt.Errorf("cache result for run %d: %w", runID, err)
		}
		return nil
	})
}

// TensorStats returns the parameter statistics of runs (only tensors that have them).
func (db *DB) TensorStats(ctx context.Context, runIDs []int64) (map[int64][]model.TensorStat, error) {
	out := map[int64][]model.TensorStat{}
	stmt, err := db.sql.PrepareContext(ctx, `SELECT m.name, m.class, t.name, t.numel, t.stat_mean, coalesce(t.stat_std, 0), t.stat_min, t.stat_max, t.stat_norm, t.sketch
		FROM tensors t JOIN modules m ON m.run_id = t.run_id AND m.idx = t.module_idx
		WHERE t.run_id = ? AND t.kind = 'param' AND t.stat_mean IS NOT NULL ORDER BY t.module_idx, t.pos`)
	if err != nil {
		return nil, err
	}
	defer stmt.Close()
	for _, id := range runIDs {
		rows, err := stmt.QueryContext(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("stats of run %d: %w", id, err)
		}
		for rows.Next() {
			var mod, name string
			s := model.TensorStat{}
			var norm sql.NullFloat64
			var sketch []byte
			if err := rows.Scan(&mod, &s.Class, &name, &s.Numel, &s.Mean, &s.Std, &s.Min, &s.Max, &norm, &sketch); err != nil {
				rows.Close()
				return nil, err
			}
			if norm.Valid {
				v := norm.Float64
				s.Norm = &v
			}
			if sketch != nil {
				if s.Sketch, err = DecodeSketch(sketch); err != nil {
					rows.Close()
					return nil, fmt.Errorf("stats of run %d: %w", id, err)
				}
			}
			s.Name = name
			if mod != "" {
				s.Name = mod + "." + name
			}
			out[id] = append(out[id], s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
