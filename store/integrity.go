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
	"hash"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/mrep-dev/mrep/model"
)

// ErrCorrupt: a run's rows no longer match the checksum written with them.
var ErrCorrupt = errors.New("corrupt run")

// ErrReadOnly: the database was opened read-only (a read-only file or directory).
var ErrReadOnly = errors.New("database is read-only")

// Checksum is sha256 over the dump as the store keeps it, in a fixed binary encoding of every
// field (length-prefixed strings, fixed-width numbers, presence markers), with trace modules in
// name order (the order they are read back in). Ingest writes it; every load recomputes and
// compares it. Hand-written rather than json.Marshal: a load of 500,000 tensors would spend a
// second in reflection otherwise.
func Checksum(d *model.Dump) (string, error) {
	return checksumWith(d, &hasher{h: sha256.New()})
}

func checksumWith(d *model.Dump, h *hasher) (string, error) {
	c, err := newChecksummerWith(d, len(d.Modules), h)
	if err != nil {
		return "", err
	}
	for i := range d.Modules {
		c.module(&d.Modules[i])
	}
	return c.sum(d), nil
}

// checksummer computes Checksum in parts, so a dump stored while it is decoded is hashed as
// its modules arrive: the header (with the module count), each module in order, the tail.
type checksummer struct{ h *hasher }

func newChecksummer(d *model.Dump, modules int) (*checksummer, error) {
	return newChecksummerWith(d, modules, &hasher{h: sha256.New()})
}

func newChecksummerWith(d *model.Dump, modules int, h *hasher) (*checksummer, error) {
	h.int(int64(d.SchemaVersion))
	h.str(d.Model.Name)
	h.str(d.Model.RootClass)
	h.str(d.Model.Source.Kind)
	h.str(d.Model.Source.Path)
	h.str(d.Model.Source.ModelType)
	h.str(d.Model.TextConfigKey)
	h.str(d.Model.DType)
	cfg, err := json.Marshal(d.Config) // map keys sorted; numbers keep their literals
	if err != nil {
		return nil, err
	}
	h.bytes(cfg)
	h.str(d.Framework.Python)
	h.str(d.Framework.Torch)
	h.strp(d.Framework.Transformers)
	h.str(d.Framework.MrepExport)
	h.strp(d.Run.Label)
	if h.present(d.Run.Step != nil) {
		h.int(*d.Run.Step)
	}
	h.int(int64(len(d.Run.Tags)))
	for _, t := range d.Run.Tags {
		h.str(t)
	}
	h.str(d.Run.CreatedAt)
	h.str(d.Run.ContentHash)
	h.int(int64(modules))
	return &checksummer{h}, nil
}

func (c *checksummer) module(m *model.Module) {
	h := c.h
	h.str(m.Name)
	h.str(m.Class)
	h.str(m.PyModule)
	h.strp(m.Parent)
	h.int(int64(len(m.Params)))
	for _, p := range m.Params {
		h.tensor(&p.Tensor)
		h.bool(p.RequiresGrad)
		h.bool(p.Lazy)
		if h.present(p.ExpertAxis != nil) {
			h.int(int64(*p.ExpertAxis))
		}
		if s := p.Stats; h.present(s != nil) {
			h.real(s.Mean)
			if h.present(s.Std != nil) {
				h.real(*s.Std)
			}
			h.real(s.Min)
			h.real(s.Max)
			h.int(s.Nonfinite)
			h.float(s.Hist.Lo)
			h.float(s.Hist.Hi)
			h.int(int64(len(s.Hist.Counts)))
			for _, c := range s.Hist.Counts {
				h.int(c)
			}
			// version-2 fields, hashed only when present so that runs ingested before
			// keep their checksums
			if s.Norm != nil {
				h.str("norm")
				h.real(*s.Norm)
			}
			if len(s.Sketch) > 0 {
				h.str("sketch")
				h.int(int64(len(s.Sketch)))
				for _, v := range s.Sketch {
					h.float(v)
				}
			}
		}
	}
	h.int(int64(len(m.Buffers)))
	for _, b := range m.Buffers {
		h.tensor(&b.Tensor)
		h.bool(b.Persistent)
	}

}

func (c *checksummer) sum(d *model.Dump) string {
	h := c.h
	if tr := d.Trace; h.present(tr != nil) {
		h.int(tr.Batch)
		h.int(tr.Seq)
		h.str(tr.Device)
		h.strp(tr.AttnImplementation)
		h.strp(tr.ExpertsImplementation)
		h.int(tr.TotalFlops)
		mods := append([]model.TraceModule(nil), tr.Modules...)
		sort.Slice(mods, func(i, j int) bool { return mods[i].Name < mods[j].Name })
		h.int(int64(len(mods)))
		for _, tm := range mods {
			h.str(tm.Name)
			h.int(tm.Flops)
			ops := make([]string, 0, len(tm.Ops))
			for k := range tm.Ops {
				ops = append(ops, k)
			}
			sort.Strings(ops)
			h.int(int64(len(ops)))
			for _, k := range ops {
				h.str(k)
				h.int(tm.Ops[k])
			}
		}
	}
	// version 2: hashed only when present, so runs ingested before keep their checksums
	if m := d.Measurement; m != nil {
		h.str("measurement")
		h.float(m.StepTimeS)
		h.int(m.StepsTimed)
		if h.present(m.TokensPerStep != nil) {
			h.int(*m.TokensPerStep)
		}
		if h.present(m.SeqLen != nil) {
			h.int(*m.SeqLen)
		}
		h.int(m.WorldSize)
		h.str(m.Device)
		h.str(m.Precision)
	}
	return "sha256:" + hex.EncodeToString(h.h.Sum(nil))
}

type hasher struct {
	h   hash.Hash
	buf [8]byte
	// legacy hashes as mrep did before floats were canonical (raw bits), to recognise a
	// checksum written then; negReal(i) says whether the i-th zero held in a REAL column
	// (which SQLite hands back without its sign) was a -0.0 when it was hashed.
	legacy  bool
	negReal func(i int) bool
	zeros   int
}

func (h *hasher) int(v int64) {
	binary.LittleEndian.PutUint64(h.buf[:], uint64(v))
	h.h.Write(h.buf[:])
}

// float hashes v's canonical encoding: -0.0 as 0.0, since SQLite stores a REAL's value, not
// its sign bit, and hands a -0.0 back as 0.0 (hashing the raw bits made such a run read as
// corrupt forever; a run without a -0.0 keeps its checksum).
func (h *hasher) float(v float64) {
	if v == 0 && !h.legacy {
		v = 0 // +0.0: -0.0 == 0 is true, and the constant has no sign bit
	}
	h.int(int64(math.Float64bits(v)))
}

// real hashes a value the store keeps in a REAL column (a statistic), the floats whose zero
// loses its sign on the way through SQLite.
func (h *hasher) real(v float64) {
	if v == 0 && h.legacy {
		if h.negReal != nil && h.negReal(h.zeros) {
			v = math.Copysign(0, -1)
		}
		h.zeros++
	}
	h.float(v)
}
func (h *hasher) bytes(b []byte) {
	h.int(int64(len(b)))
	h.h.Write(b)
}
func (h *hasher) str(s string) {
	h.int(int64(len(s)))
	io.WriteString(h.h, s)
}
func (h *hasher) bool(b bool) {
	if b {
		h.int(1)
	} else {
		h.int(0)
	}
}
func (h *hasher) present(ok bool) bool {
	h.bool(ok)
	return ok
}
func (h *hasher) strp(s *string) {
	if h.present(s != nil) {
		h.str(*s)
	}
}
func (h *hasher) tensor(t *model.Tensor) {
	h.str(t.Name)
	if h.present(t.Shape != nil) {
		h.int(int64(len(t.Shape)))
		for _, d := range t.Shape {
			h.int(d)
		}
	}
	h.str(t.DType)
	h.int(t.Numel)
	h.str(t.Device)
	h.str(t.TiedTo)
}

// queryer is what a load needs: a transaction or a connection inside one.
type queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// read runs fn in one read transaction (BEGIN DEFERRED on a dedicated connection), so every
// query of a load sees one snapshot: a run removed meanwhile is either whole or absent.
//
// On PostgreSQL the snapshot is a REPEATABLE READ, READ ONLY transaction: it takes no lock an
// ingest waits on, and an ingest committing meanwhile is not seen half-way.
func (db *DB) read(ctx context.Context, fn func(q queryer) error) error {
	if db.pg {
		t, err := db.sql.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
		if err != nil {
			return err
		}
		defer t.Rollback()
		return fn(sqlTx{Tx: t, pg: true})
	}
	c, err := db.sql.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	conn := sqlConn{Conn: c}
	if _, err := conn.ExecContext(ctx, "BEGIN DEFERRED"); err != nil {
		return err
	}
	err = fn(conn)
	if _, rerr := conn.ExecContext(context.Background(), "ROLLBACK"); err == nil && rerr != nil {
		err = rerr
	}
	return err
}

// CheckResult is one run's verification.
type CheckResult struct {
	ID    int64  `json:"id"`
	Model string `json:"model"`
	OK    bool   `json:"ok"`
	// Unverified: the run was ingested before checksums existed.
	Unverified bool   `json:"unverified,omitempty"`
	Problem    string `json:"problem,omitempty"`
}

// Check verifies every run's rows against its checksum, and SQLite's own structure
// (PRAGMA integrity_check).
//
// PostgreSQL keeps its own pages; there the structural check is that no module, tensor, trace
// or cached result is left without its run.
func (db *DB) Check(ctx context.Context) (integrity string, runs []CheckResult, err error) {
	if integrity, err = db.structure(ctx); err != nil {
		return "", nil, fmt.Errorf("integrity check: %w", err)
	}
	list, err := db.ListRuns(ctx, Filter{})
	if err != nil {
		return integrity, nil, err
	}
	for _, r := range list {
		res := CheckResult{ID: r.ID, Model: r.ModelName, OK: true}
		var sum sql.NullString
		if err := db.sql.QueryRowContext(ctx, `SELECT checksum FROM runs WHERE id = ?`, r.ID).Scan(&sum); err != nil {
			return integrity, nil, err
		}
		res.Unverified = !sum.Valid
		if _, err := db.LoadDump(ctx, r.ID); err != nil {
			res.OK, res.Problem = false, err.Error()
		}
		runs = append(runs, res)
	}
	return integrity, runs, nil
}

// structure is SQLite's integrity check, or on PostgreSQL the count of rows without a run.
func (db *DB) structure(ctx context.Context) (string, error) {
	if !db.pg {
		var res string
		err := db.sql.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res)
		return res, err
	}
	var orphans []string
	for _, t := range []string{"modules", "tensors", "traces", "trace_modules", "analysis_cache"} {
		var n int64
		if err := db.sql.QueryRowContext(ctx, `SELECT count(*) FROM `+t+` x WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = x.run_id)`).Scan(&n); err != nil {
			return "", err
		}
		if n > 0 {
			orphans = append(orphans, fmt.Sprintf("%d %s rows without their run", n, t))
		}
	}
	if len(orphans) > 0 {
		return strings.Join(orphans, "; "), nil
	}
	return "ok", nil
}
