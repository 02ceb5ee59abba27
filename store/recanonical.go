package store

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/mrep-dev/mrep/model"
)

// Migrations written in Go, for the changes SQL cannot make. They are ordered with the .sql
// files by version and recorded the same way.
var codeMigrations = []migration{
	{version: 6, name: "0006_canonical_checksums", code: recanonicalChecksums},
}

// maxSignSearch bounds the zeros whose lost signs recanonicalChecksums tries one at a time: a
// run with more zero statistics than this is only tried with all of them negative.
const maxSignSearch = 256

// recanonicalChecksums rewrites the checksums written before floats were hashed canonically
// (-0.0 as 0.0). Such a checksum hashed a -0.0 statistic by its bits, and SQLite gives the
// zero back without its sign, so the run read as corrupt for ever; a -0.0 kept in JSON or a
// BLOB (histogram bounds, sketches, a measurement) read back whole, so its old checksum held
// and the canonical one now differs.
//
// A checksum is rewritten only where the old encoding of the rows as they stand reproduces it
// (the stored zeros taken with their signs as read, or with the statistics' zeros negative:
// all of them, or any one): a run whose rows were really changed keeps its old checksum and
// still reads as corrupt. Only runs that hold a zero statistic or a possible -0.0 elsewhere are
// loaded, so a database without any migrates at the cost of one query.
func recanonicalChecksums(ctx context.Context, tx sqlTx) error {
	if tx.pg {
		return nil // a PostgreSQL history was only ever written with canonical checksums
	}
	rows, err := tx.QueryContext(ctx, `SELECT id FROM runs WHERE checksum IS NOT NULL AND (
		measurement LIKE '%-0%' OR id IN (SELECT DISTINCT run_id FROM tensors WHERE
			stat_mean = 0 OR stat_std = 0 OR stat_min = 0 OR stat_max = 0 OR stat_norm = 0
			OR hist LIKE '%-0%' OR instr(sketch, X'0000000000000080') > 0))
		ORDER BY id`)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		d, sum, err := loadRows(ctx, tx, id)
		if err != nil {
			continue // unreadable rows stay as they are: reads report them
		}
		now, err := Checksum(d)
		if err != nil || now == sum.String {
			continue
		}
		if !legacyMatch(d, sum.String) {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET checksum = ? WHERE id = ?`, now, id); err != nil {
			return fmt.Errorf("run %d: %w", id, err)
		}
	}
	return nil
}

// legacyMatch says whether the checksum mrep wrote before canonical floats, over these rows,
// is want: with the statistics' zeros all positive, all negative, or one of them negative.
func legacyMatch(d *model.Dump, want string) bool {
	try := func(neg func(int) bool) (string, int) {
		h := &hasher{h: sha256.New(), legacy: true, negReal: neg}
		s, err := checksumWith(d, h)
		if err != nil {
			return "", 0
		}
		return s, h.zeros
	}
	s, zeros := try(nil)
	if s == want {
		return true
	}
	if s, _ := try(func(int) bool { return true }); s == want {
		return true
	}
	for k := 0; k < min(zeros, maxSignSearch); k++ {
		if s, _ := try(func(i int) bool { return i == k }); s == want {
			return true
		}
	}
	return false
}
