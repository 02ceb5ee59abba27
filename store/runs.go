package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mrep-dev/mrep/model"
)

// Run is one stored run as listings show it.
type Run struct {
	ID          int64     `json:"id"`
	ContentHash string    `json:"content_hash"`
	ModelName   string    `json:"model_name"`
	Label       *string   `json:"label"`
	Step        *int64    `json:"step"`
	Tags        []string  `json:"tags"`
	RootClass   string    `json:"root_class"`
	SourceKind  string    `json:"source_kind"`
	ModelType   string    `json:"model_type,omitempty"`
	DType       string    `json:"dtype,omitempty"`
	CreatedAt   string    `json:"created_at"`
	IngestedAt  time.Time `json:"ingested_at"`
	SourceFile  string    `json:"source_file,omitempty"`
	// IngestedBy is user@host of the process that stored the run ("" before mrep recorded it;
	// omitted then, so those runs' row checksums hold).
	IngestedBy      string `json:"ingested_by,omitempty"`
	TotalParams     int64  `json:"total_params"`
	TrainableParams int64  `json:"trainable_params"`
	TotalBytes      int64  `json:"total_bytes"`
	NumModules      int64  `json:"num_modules"`
	HasStats        bool   `json:"has_stats"`
	HasTrace        bool   `json:"has_trace"`
}

// ShortHash is the first 12 hex digits of the content hash.
func (r Run) ShortHash() string {
	h := strings.TrimPrefix(r.ContentHash, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

// Totals are the counts a run row stores, computed once at ingest (tied tensors once).
type Totals struct {
	Params, Trainable, Bytes int64
	HasStats                 bool
}

// ComputeTotals counts a dump's unique parameters and their bytes.
func ComputeTotals(d *model.Dump) Totals {
	var t Totals
	for _, m := range d.Modules {
		for _, p := range m.Params {
			if p.TiedTo != "" {
				continue
			}
			t.Params += p.Numel
			if p.RequiresGrad {
				t.Trainable += p.Numel
			}
			if b, ok := model.DTypeBytes(p.DType); ok {
				t.Bytes += int64(b * float64(p.Numel))
			}
			if p.Stats != nil {
				t.HasStats = true
			}
		}
	}
	return t
}

// Ingest stores d in one transaction. If a run with the same content hash exists, it returns
// that run and created=false, writing nothing.
func (db *DB) Ingest(ctx context.Context, d *model.Dump, sourceFile string) (run Run, created bool, err error) {
	got, err := db.IngestBatch(ctx, 1, func(int) (*model.Dump, string, error) { return d, sourceFile, nil })
	if err != nil {
		return Run{}, false, err
	}
	run, err = db.Run(ctx, got[0].ID)
	return run, got[0].Created, err
}

// Ingested is one dump of a batch: its run and whether the batch created it.
type Ingested struct {
	ID      int64
	Created bool
}

// IngestBatch stores n dumps in one transaction: all of them or none. next(i) reads the i-th
// dump (one at a time, so a batch holds one decoded dump in memory, not n); an error from it or
// from the store rolls everything back and names the dump. A dump whose content hash is
// already stored (or earlier in the batch) is not stored again. It goes through the same
// Stream that `mrep ingest` feeds while it decodes (load.Into), so the store's tests exercise
// the path production runs.
func (db *DB) IngestBatch(ctx context.Context, n int, next func(i int) (*model.Dump, string, error)) ([]Ingested, error) {
	out := make([]Ingested, 0, n)
	err := db.IngestStream(ctx, func(s *Stream) error {
		for i := 0; i < n; i++ {
			d, source, err := next(i)
			if err != nil {
				return err
			}
			r := s.Run(source)
			if err := r.Header(d, len(d.Modules)); err != nil {
				return fmt.Errorf("store %s (run %s): %w", source, d.Model.Name, err)
			}
			if err := r.Modules(0, d.Modules); err != nil {
				return fmt.Errorf("store %s (run %s): %w", source, d.Model.Name, err)
			}
			g, err := r.Finish(d)
			if err != nil {
				return err
			}
			out = append(out, g)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// errStoredMeanwhile: the dump's content hash was committed by another writer while this one
// stored it.
var errStoredMeanwhile = errors.New("stored meanwhile by another writer")

// storedMeanwhile rolls a dump back to its savepoint and returns the run another writer
// stored with the same content hash.
func storedMeanwhile(ctx context.Context, tx sqlTx, sp, hash string) (int64, error) {
	if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT `+sp); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `RELEASE `+sp); err != nil {
		return 0, err
	}
	var id int64
	err := tx.QueryRowContext(ctx, `SELECT id FROM runs WHERE content_hash = ?`, hash).Scan(&id)
	return id, err
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// runWriter stores one run's rows: modules and tensors as they come (a dump may be stored
// while it is still being decoded), then the runs row, whose totals and checksum need all of
// it. The transaction defers foreign-key checks to its commit (the runs row comes last).
type runWriter struct {
	ctx        context.Context
	tx         sqlTx
	id         int64
	mods, tens *inserter
	index      map[string]int
	sum        *checksummer
	hashc      chan []model.Module // modules to the checksum goroutine, in order
	hashDone   chan struct{}
	// copied is the run being copied from another store: its ingestion time, source file and
	// ingester are kept (a copy is the same history, not a new ingest).
	copied *Run
	who    string // user@host of this ingest
}

func (w *runWriter) ingestedBy() string {
	if w.copied != nil {
		return w.copied.IngestedBy
	}
	return w.who
}

func (w *runWriter) ingestedAt(now time.Time) string {
	if w.copied != nil {
		return w.copied.IngestedAt.UTC().Format(time.RFC3339Nano)
	}
	return now.Format(time.RFC3339Nano)
}

func (w *runWriter) sourceFile(s string) string {
	if w.copied != nil {
		return w.copied.SourceFile
	}
	return s
}

// beginRun allocates the run's id (ids only grow: the high-water mark outlives removed runs)
// and starts hashing the header; modules is how many modules the dump has.
func beginRun(ctx context.Context, tx sqlTx, header *model.Dump, modules int) (*runWriter, error) {
	w := &runWriter{ctx: ctx, tx: tx, index: make(map[string]int, modules)}
	if tx.pg {
		// A sequence: never handed out twice, and taken without locking anything, so writers
		// on many hosts do not queue behind one another's transactions (the foreign keys are
		// declared deferred).
		if err := tx.QueryRowContext(ctx, `SELECT nextval('run_ids')`).Scan(&w.id); err != nil {
			return nil, err
		}
	} else {
		if _, err := tx.ExecContext(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
			return nil, err
		}
		if err := tx.QueryRowContext(ctx, `SELECT MAX(last, COALESCE((SELECT MAX(id) FROM runs), 0)) + 1 FROM run_ids`).Scan(&w.id); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE run_ids SET last = ?`, w.id); err != nil {
			return nil, err
		}
	}
	var err error
	if w.sum, err = newChecksummer(header, modules); err != nil {
		return nil, err
	}
	// The checksum walks every value; it runs beside the inserts (it was a tenth of the
	// ingest of 500,000 tensors).
	w.hashc, w.hashDone = make(chan []model.Module, 64), make(chan struct{})
	go func() {
		defer close(w.hashDone)
		for ms := range w.hashc {
			for i := range ms {
				w.sum.module(&ms[i])
			}
		}
	}()
	w.mods = newInserter(ctx, tx, "modules", "run_id", "idx", "name", "class", "py_module", "parent_idx")
	w.tens = newInserter(ctx, tx, "tensors", "run_id", "module_idx", "kind", "pos", "name", "shape", "dtype",
		"numel", "device", "tied_to", "requires_grad", "lazy", "expert_axis", "persistent", "stat_mean", "stat_std",
		"stat_min", "stat_max", "stat_nonfinite", "hist", "stat_norm", "sketch")
	return w, nil
}

// stop ends the inserters and the checksum goroutine; safe to call more than once.
func (w *runWriter) stop() {
	w.mods.stop()
	w.tens.stop()
	if w.hashc != nil {
		close(w.hashc)
		<-w.hashDone
		w.hashc = nil
	}
}

// add stores modules first, first+1, …, in order.
func (w *runWriter) add(first int, ms []model.Module) error {
	w.hashc <- ms
	id, mods, tens, index := w.id, w.mods, w.tens, w.index
	for k, m := range ms {
		i := first + k
		index[m.Name] = i
		var parent any
		if m.Parent != nil {
			parent = index[*m.Parent]
		}
		if err := mods.add(id, i, m.Name, m.Class, m.PyModule, parent); err != nil {
			return err
		}
		for j, p := range m.Params {
			shape, err := shapeJSON(p.Shape)
			if err != nil {
				return err
			}
			var mean, std, mn, mx, nonfinite, hist, norm, sketch any
			if s := p.Stats; s != nil {
				h, err := jsonText(s.Hist)
				if err != nil {
					return err
				}
				mean, mn, mx, nonfinite, hist = s.Mean, s.Min, s.Max, s.Nonfinite, h
				if s.Std != nil {
					std = *s.Std
				}
				if s.Norm != nil {
					norm = *s.Norm
				}
				if len(s.Sketch) > 0 {
					sketch = EncodeSketch(s.Sketch)
				}
			}
			var axis any
			if p.ExpertAxis != nil {
				axis = *p.ExpertAxis
			}
			if err := tens.add(id, i, "param", j, p.Name, shape, p.DType, p.Numel, p.Device,
				nullString(p.TiedTo), flag(p.RequiresGrad), flag(p.Lazy), axis, nil, mean, std, mn, mx, nonfinite, hist, norm, sketch); err != nil {
				return err
			}
		}
		for j, b := range m.Buffers {
			shape, err := shapeJSON(b.Shape)
			if err != nil {
				return err
			}
			if err := tens.add(id, i, "buffer", j, b.Name, shape, b.DType, b.Numel, b.Device,
				nullString(b.TiedTo), nil, nil, nil, flag(b.Persistent), nil, nil, nil, nil, nil, nil, nil, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish writes what needs the whole dump: the rows left in the inserters, the runs row with
// its totals, checksum and row checksum, the measurement and the trace.
func (w *runWriter) finish(d *model.Dump, sourceFile string, now time.Time) (int64, error) {
	ctx, tx, id := w.ctx, w.tx, w.id
	if err := w.mods.flush(); err != nil {
		return 0, err
	}
	if err := w.tens.flush(); err != nil {
		return 0, err
	}
	close(w.hashc)
	<-w.hashDone
	w.hashc = nil
	sum := w.sum.sum(d)
	tot := ComputeTotals(d)
	tags := d.Run.Tags
	if tags == nil {
		tags = []string{}
	}
	tagsJSON, err := jsonText(tags)
	if err != nil {
		return 0, err
	}
	var cfg any
	if d.Config != nil {
		s, err := jsonText(d.Config)
		if err != nil {
			return 0, err
		}
		cfg = s
	}
	fw, err := jsonText(d.Framework)
	if err != nil {
		return 0, err
	}
	var measured any
	if m := d.Measurement; m != nil {
		if measured, err = jsonText(m); err != nil {
			return 0, err
		}
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO runs (id, content_hash, model_name, label, step, tags, root_class,
		source_kind, source_path, model_type, text_config_key, dtype, schema_version, created_at, ingested_at,
		source_file, total_params, trainable_params, total_bytes, num_modules, has_stats, has_trace, config, framework, checksum,
		measurement, ingested_by)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (content_hash) DO NOTHING`,
		id, d.Run.ContentHash, d.Model.Name, d.Run.Label, d.Run.Step, tagsJSON, d.Model.RootClass,
		d.Model.Source.Kind, nullString(d.Model.Source.Path), nullString(d.Model.Source.ModelType),
		nullString(d.Model.TextConfigKey), nullString(d.Model.DType), d.SchemaVersion, d.Run.CreatedAt,
		w.ingestedAt(now), nullString(w.sourceFile(sourceFile)), tot.Params, tot.Trainable, tot.Bytes,
		len(d.Modules), flag(tot.HasStats), flag(d.Trace != nil), cfg, fw, sum, measured, nullString(w.ingestedBy()))
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, err
	} else if n == 0 {
		// Another writer committed this content hash after this one looked (PostgreSQL's
		// writers do not queue as SQLite's do); the caller rolls this dump back.
		return 0, errStoredMeanwhile
	}
	// the row's own checksum, over the row as it reads back
	row, err := scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET row_checksum = ? WHERE id = ?`, rowChecksum(row), id); err != nil {
		return 0, err
	}
	if tr := d.Trace; tr != nil {
		if _, err := tx.ExecContext(ctx, `INSERT INTO traces (run_id, batch, seq, device, attn_implementation,
			experts_implementation, total_flops) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			id, tr.Batch, tr.Seq, tr.Device, tr.AttnImplementation, tr.ExpertsImplementation, tr.TotalFlops); err != nil {
			return 0, err
		}
		for _, tm := range tr.Modules {
			ops, err := jsonText(tm.Ops)
			if err != nil {
				return 0, err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO trace_modules (run_id, name, flops, ops) VALUES (?, ?, ?, ?)`,
				id, tm.Name, tm.Flops, ops); err != nil {
				return 0, err
			}
		}
	}
	return id, nil
}

// EncodeSketch is a sketch as stored: float64 little-endian, exact (a hostile dump's values need
// not be float32 ones, and the run's checksum covers them bit for bit).
func EncodeSketch(sk []float64) []byte {
	b := make([]byte, 8*len(sk))
	for i, v := range sk {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return b
}

// DecodeSketch reads a stored sketch.
func DecodeSketch(b []byte) ([]float64, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("a sketch of %d bytes is not float64 values: %w", len(b), ErrCorrupt)
	}
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out, nil
}

// shapeJSON is json.Marshal of a shape, written directly: it runs once per tensor.
func shapeJSON(shape []int64) (any, error) {
	if shape == nil {
		return nil, nil
	}
	b := make([]byte, 0, 2+8*len(shape))
	b = append(b, '[')
	for i, d := range shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return string(append(b, ']')), nil
}

const runColumns = `id, content_hash, model_name, label, step, tags, root_class, source_kind,
	coalesce(model_type, ''), coalesce(dtype, ''), created_at, ingested_at, coalesce(source_file, ''),
	total_params, trainable_params, total_bytes, num_modules, has_stats, has_trace, row_checksum,
	coalesce(ingested_by, '')`

type scanner interface{ Scan(...any) error }

func scanRun(s scanner) (r Run, err error) {
	var tags, ingested string
	var label, sum sql.NullString
	var step sql.NullInt64
	if err := s.Scan(&r.ID, &r.ContentHash, &r.ModelName, &label, &step, &tags, &r.RootClass, &r.SourceKind,
		&r.ModelType, &r.DType, &r.CreatedAt, &ingested, &r.SourceFile, &r.TotalParams, &r.TrainableParams,
		&r.TotalBytes, &r.NumModules, &r.HasStats, &r.HasTrace, &sum, &r.IngestedBy); err != nil {
		return Run{}, err
	}
	defer func() {
		if err == nil && sum.Valid && rowChecksum(r) != sum.String {
			r, err = Run{}, fmt.Errorf("run %d: its row does not match the checksum written at ingest; the database file was changed or damaged: %w", r.ID, ErrCorrupt)
		}
	}()
	if label.Valid {
		r.Label = &label.String
	}
	if step.Valid {
		r.Step = &step.Int64
	}
	if err := json.Unmarshal([]byte(tags), &r.Tags); err != nil {
		return Run{}, fmt.Errorf("run %d tags: %w", r.ID, corruptIf(sum.Valid, err))
	}
	t, err := time.Parse(time.RFC3339Nano, ingested)
	if err != nil {
		return Run{}, fmt.Errorf("run %d ingested_at: %w", r.ID, corruptIf(sum.Valid, err))
	}
	r.IngestedAt = t
	return r, nil
}

func corruptIf(checked bool, err error) error {
	if checked {
		return fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	return err
}

// rowChecksum is sha256 over a run's row as listings read it.
func rowChecksum(r Run) string {
	b, _ := json.Marshal(r)
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// Run returns the run with id.
func (db *DB) Run(ctx context.Context, id int64) (Run, error) {
	r, err := scanRun(db.sql.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	return r, err
}

// Filter narrows ListRuns.
type Filter struct {
	Model string // exact model name; "" for any
	Label string // exact label; "" for any
	Limit int    // 0 for all
}

// ListRuns lists runs oldest first (by id, the order of ingestion).
func (db *DB) ListRuns(ctx context.Context, f Filter) ([]Run, error) {
	q := `SELECT ` + runColumns + ` FROM runs WHERE 1=1`
	var args []any
	if f.Model != "" {
		q += ` AND model_name = ?`
		args = append(args, f.Model)
	}
	if f.Label != "" {
		q += ` AND label = ?`
		args = append(args, f.Label)
	}
	q += ` ORDER BY id`
	if f.Limit > 0 {
		// the newest Limit runs, still listed oldest first
		q = `SELECT * FROM (` + strings.Replace(q, "ORDER BY id", "ORDER BY id DESC", 1) + ` LIMIT ?) AS newest ORDER BY id`
		args = append(args, f.Limit)
	}
	rows, err := db.sql.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

var hexPrefix = regexp.MustCompile(`^(sha256:)?[0-9a-f]{4,64}$`)

// Resolve turns a selector into a run id. Explicit forms take their argument verbatim:
// `id:N`, `hash:PREFIX`, `model:NAME` (the newest run of exactly that model name, which may be
// "latest", contain '@' or spaces), `label:LABEL` (the newest run with that label). Short
// forms: a numeric id, `latest`, a content-hash prefix (at least 4 hex digits, `sha256:`
// optional), `MODEL@LABEL` (the newest run of that model and label), or a model name alone.
func (db *DB) Resolve(ctx context.Context, sel string) (int64, error) {
	one := func(q string, args ...any) (int64, error) {
		var id int64
		err := db.sql.QueryRowContext(ctx, q, args...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("run %q: %w", sel, ErrNotFound)
		}
		return id, err
	}
	// byName: the newest run of a model named exactly sel, the last reading of every selector.
	byName := func() (int64, error) {
		return one(`SELECT id FROM runs WHERE model_name = ? ORDER BY id DESC LIMIT 1`, sel)
	}
	if kind, arg, ok := strings.Cut(sel, ":"); ok {
		switch kind {
		case "id":
			id, err := strconv.ParseInt(arg, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("run %q: %q is not a run id: %w", sel, arg, ErrNotFound)
			}
			return one(`SELECT id FROM runs WHERE id = ?`, id)
		case "model":
			return one(`SELECT id FROM runs WHERE model_name = ? ORDER BY id DESC LIMIT 1`, arg)
		case "label":
			return one(`SELECT id FROM runs WHERE label = ? ORDER BY id DESC LIMIT 1`, arg)
		case "hash":
			sel = arg
		}
	}
	sel = strings.TrimSpace(sel)
	if sel == "" {
		return 0, fmt.Errorf("empty run selector: %w", ErrNotFound)
	}
	if sel == "latest" {
		newest, err := one(`SELECT id FROM runs ORDER BY id DESC LIMIT 1`)
		if err != nil {
			return 0, err
		}
		// A model may be called "latest": where its newest run is not the newest of all, the
		// word means two runs and neither is guessed.
		if named, err := one(`SELECT id FROM runs WHERE model_name = 'latest' ORDER BY id DESC LIMIT 1`); err == nil && named != newest {
			return 0, fmt.Errorf(`run "latest": both the newest run (%d) and a model named "latest" (run %d); say id:%d or model:latest: %w`, newest, named, newest, ErrAmbiguous)
		}
		return newest, nil
	}
	if id, err := strconv.ParseInt(sel, 10, 64); err == nil {
		// digits may also be a hash prefix; an existing id wins
		if got, err := one(`SELECT id FROM runs WHERE id = ?`, id); err == nil {
			return got, nil
		}
	}
	if hexPrefix.MatchString(sel) {
		prefix := "sha256:" + strings.TrimPrefix(sel, "sha256:")
		rows, err := db.sql.QueryContext(ctx, `SELECT id FROM runs WHERE substr(content_hash, 1, ?) = ? LIMIT 2`, len(prefix), prefix)
		if err != nil {
			return 0, err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return 0, err
			}
			ids = append(ids, id)
		}
		rows.Close()
		switch len(ids) {
		case 1:
			return ids[0], nil
		case 2:
			return 0, fmt.Errorf("run %q: hash prefix matches several runs; give more digits: %w", sel, ErrAmbiguous)
		}
	}
	// MODEL@LABEL#STEP, MODEL#STEP: a checkpoint by its training step
	if i := strings.LastIndexByte(sel, '#'); i > 0 && i < len(sel)-1 && allDigits(sel[i+1:]) {
		step, err := strconv.ParseInt(sel[i+1:], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("run %q: step %q: %w", sel, sel[i+1:], ErrNotFound)
		}
		var id int64
		if name, label, ok := strings.Cut(sel[:i], "@"); ok {
			id, err = one(`SELECT id FROM runs WHERE model_name = ? AND label = ? AND step = ? ORDER BY id DESC LIMIT 1`, name, label, step)
		} else {
			id, err = one(`SELECT id FROM runs WHERE model_name = ? AND step = ? ORDER BY id DESC LIMIT 1`, sel[:i], step)
		}
		if !errors.Is(err, ErrNotFound) {
			return id, err
		}
		return byName() // a model whose name holds '#'
	}
	if name, label, ok := strings.Cut(sel, "@"); ok {
		id, err := one(`SELECT id FROM runs WHERE model_name = ? AND label = ? ORDER BY id DESC LIMIT 1`, name, label)
		if !errors.Is(err, ErrNotFound) {
			return id, err
		}
		return byName() // a model whose name holds '@'
	}
	return byName()
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// DeleteRun removes a run and everything stored with it.
func (db *DB) DeleteRun(ctx context.Context, id int64) error {
	if err := db.writable(); err != nil {
		return err
	}
	return db.tx(ctx, func(tx sqlTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("delete run %d: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("run %d: %w", id, ErrNotFound)
		}
		return nil
	})
}
