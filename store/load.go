package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mrep-dev/mrep/model"
)

// LoadDump rebuilds the dump of run id from its rows: the same modules, tensors, statistics,
// config and trace that were ingested (equal to the input up to JSON number spelling).
// It reads in one transaction and verifies the rows against the checksum written at ingest.
func (db *DB) LoadDump(ctx context.Context, id int64) (*model.Dump, error) {
	var d *model.Dump
	err := db.read(ctx, func(q queryer) error {
		var err error
		d, err = loadDump(ctx, q, id)
		return err
	})
	return d, err
}

func loadDump(ctx context.Context, q queryer, id int64) (*model.Dump, error) {
	d, sum, err := loadRows(ctx, q, id)
	if err != nil {
		return nil, err
	}
	if sum.Valid {
		got, err := Checksum(d)
		if err != nil {
			return nil, err
		}
		if got != sum.String {
			return nil, fmt.Errorf("run %d (%s): its rows do not match the checksum written at ingest; the database file was changed or damaged (remove the run and ingest its dump again): %w", id, d.Model.Name, ErrCorrupt)
		}
	}
	return d, nil
}

// loadRows reads a run's rows into a dump, with the checksum written at ingest (not compared).
func loadRows(ctx context.Context, q queryer, id int64) (*model.Dump, sql.NullString, error) {
	d := &model.Dump{}
	var sum sql.NullString
	var label, sourcePath, modelType, textKey, dtype sql.NullString
	var step sql.NullInt64
	var tags, framework string
	var cfg, measured sql.NullString
	err := q.QueryRowContext(ctx, `SELECT schema_version, model_name, root_class, source_kind, source_path,
		model_type, text_config_key, dtype, label, step, tags, created_at, content_hash, config, framework, checksum,
		measurement
		FROM runs WHERE id = ?`, id).Scan(&d.SchemaVersion, &d.Model.Name, &d.Model.RootClass, &d.Model.Source.Kind,
		&sourcePath, &modelType, &textKey, &dtype, &label, &step, &tags, &d.Run.CreatedAt, &d.Run.ContentHash, &cfg, &framework, &sum,
		&measured)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sum, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, sum, fmt.Errorf("load run %d: %w", id, err)
	}
	d.Model.Source.Path, d.Model.Source.ModelType = sourcePath.String, modelType.String
	d.Model.TextConfigKey, d.Model.DType = textKey.String, dtype.String
	if label.Valid {
		d.Run.Label = &label.String
	}
	if step.Valid {
		d.Run.Step = &step.Int64
	}
	corrupt := func(what string, err error) error {
		if sum.Valid { // rows that carry a checksum and no longer parse were changed
			return fmt.Errorf("run %d: %s unreadable (%v): %w", id, what, err, ErrCorrupt)
		}
		return fmt.Errorf("load run %d %s: %w", id, what, err)
	}
	if err := json.Unmarshal([]byte(tags), &d.Run.Tags); err != nil {
		return nil, sum, corrupt("tags", err)
	}
	if len(d.Run.Tags) == 0 {
		d.Run.Tags = nil
	}
	if cfg.Valid {
		dec := json.NewDecoder(strings.NewReader(cfg.String))
		dec.UseNumber()
		if err := dec.Decode(&d.Config); err != nil {
			return nil, sum, corrupt("config", err)
		}
	}
	if err := json.Unmarshal([]byte(framework), &d.Framework); err != nil {
		return nil, sum, corrupt("framework", err)
	}
	if measured.Valid {
		if err := json.Unmarshal([]byte(measured.String), &d.Measurement); err != nil {
			return nil, sum, corrupt("measurement", err)
		}
	}
	if err := loadModules(ctx, q, id, d); err != nil {
		return nil, sum, corrupt("modules", err)
	}
	if err := loadTrace(ctx, q, id, d); err != nil {
		return nil, sum, corrupt("trace", err)
	}
	return d, sum, nil
}

func loadModules(ctx context.Context, q queryer, id int64, d *model.Dump) error {
	rows, err := q.QueryContext(ctx, `SELECT idx, name, class, py_module, parent_idx FROM modules WHERE run_id = ? ORDER BY idx`, id)
	if err != nil {
		return err
	}
	for rows.Next() {
		var idx int
		var m model.Module
		var parent sql.NullInt64
		if err := rows.Scan(&idx, &m.Name, &m.Class, &m.PyModule, &parent); err != nil {
			rows.Close()
			return err
		}
		if idx != len(d.Modules) {
			rows.Close()
			return fmt.Errorf("module index %d out of order", idx)
		}
		if parent.Valid {
			if parent.Int64 < 0 || parent.Int64 >= int64(len(d.Modules)) {
				rows.Close()
				return fmt.Errorf("module %d: parent index %d out of range", idx, parent.Int64)
			}
			p := d.Modules[parent.Int64].Name
			m.Parent = &p
		}
		m.Params, m.Buffers = []model.Param{}, []model.Buffer{}
		d.Modules = append(d.Modules, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = q.QueryContext(ctx, `SELECT module_idx, kind, name, shape, dtype, numel, device, tied_to,
		requires_grad, lazy, expert_axis, persistent, stat_mean, stat_std, stat_min, stat_max, stat_nonfinite, hist,
		stat_norm, sketch
		FROM tensors WHERE run_id = ? ORDER BY module_idx, kind DESC, pos`, id)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var mi int
		var kind string
		var t model.Tensor
		var shape, tied, hist sql.NullString
		var reqGrad, lazy, persistent sql.NullBool
		var expertAxis, nonfinite sql.NullInt64
		var mean, std, mn, mx, norm sql.NullFloat64
		var sketch []byte
		if err := rows.Scan(&mi, &kind, &t.Name, &shape, &t.DType, &t.Numel, &t.Device, &tied, &reqGrad, &lazy,
			&expertAxis, &persistent, &mean, &std, &mn, &mx, &nonfinite, &hist, &norm, &sketch); err != nil {
			return err
		}
		if shape.Valid {
			if err := json.Unmarshal([]byte(shape.String), &t.Shape); err != nil {
				return err
			}
		}
		t.TiedTo = tied.String
		if mi < 0 || mi >= len(d.Modules) {
			return fmt.Errorf("tensor %q: module index %d out of range", t.Name, mi)
		}
		m := &d.Modules[mi]
		if kind == "buffer" {
			m.Buffers = append(m.Buffers, model.Buffer{Tensor: t, Persistent: persistent.Bool})
			continue
		}
		p := model.Param{Tensor: t, RequiresGrad: reqGrad.Bool, Lazy: lazy.Bool}
		if expertAxis.Valid {
			ax := int(expertAxis.Int64)
			p.ExpertAxis = &ax
		}
		if hist.Valid {
			s := &model.Stats{Mean: mean.Float64, Min: mn.Float64, Max: mx.Float64, Nonfinite: nonfinite.Int64}
			if std.Valid {
				v := std.Float64
				s.Std = &v
			}
			if err := json.Unmarshal([]byte(hist.String), &s.Hist); err != nil {
				return err
			}
			if norm.Valid {
				v := norm.Float64
				s.Norm = &v
			}
			if sketch != nil {
				if s.Sketch, err = DecodeSketch(sketch); err != nil {
					return err
				}
			}
			p.Stats = s
		}
		m.Params = append(m.Params, p)
	}
	return rows.Err()
}

func loadTrace(ctx context.Context, q queryer, id int64, d *model.Dump) error {
	tr := &model.Trace{}
	var attn, experts sql.NullString
	err := q.QueryRowContext(ctx, `SELECT batch, seq, device, attn_implementation, experts_implementation,
		total_flops FROM traces WHERE run_id = ?`, id).Scan(&tr.Batch, &tr.Seq, &tr.Device, &attn, &experts, &tr.TotalFlops)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if attn.Valid {
		tr.AttnImplementation = &attn.String
	}
	if experts.Valid {
		tr.ExpertsImplementation = &experts.String
	}
	rows, err := q.QueryContext(ctx, `SELECT name, flops, ops FROM trace_modules WHERE run_id = ? ORDER BY name`, id)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var tm model.TraceModule
		var ops string
		if err := rows.Scan(&tm.Name, &tm.Flops, &ops); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(ops), &tm.Ops); err != nil {
			return err
		}
		tr.Modules = append(tr.Modules, tm)
	}
	d.Trace = tr
	return rows.Err()
}

// Measurements returns what the training hook measured for each of runs that have it.
func (db *DB) Measurements(ctx context.Context, ids []int64) (map[int64]*model.Measurement, error) {
	out := map[int64]*model.Measurement{}
	err := db.read(ctx, func(q queryer) error {
		for _, id := range ids {
			var js sql.NullString
			if err := q.QueryRowContext(ctx, `SELECT measurement FROM runs WHERE id = ?`, id).Scan(&js); err != nil {
				return fmt.Errorf("measurement of run %d: %w", id, err)
			}
			if !js.Valid {
				continue
			}
			var m model.Measurement
			if err := json.Unmarshal([]byte(js.String), &m); err != nil {
				return fmt.Errorf("run %d: measurement unreadable (%v): %w", id, err, ErrCorrupt)
			}
			out[id] = &m
		}
		return nil
	})
	return out, err
}
