package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// A least-privilege writer (SELECT, INSERT, UPDATE, DELETE on mrep's tables, no CREATE on the
// schema) opens a current history and writes to it: a current history needs no DDL. On a new
// database that role is told which right the first open needs. PostgreSQL only.
func TestLeastPrivilegeWriter(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL only (MREP_TEST_BACKEND=postgres)")
	}
	ctx := context.Background()
	owner := newDBPath(t)
	db, err := Open(ctx, owner, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	adm, err := sql.Open("pgx", owner)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	role := fmt.Sprintf("mrep_writer_%d", os.Getpid())
	for _, q := range []string{
		"DROP ROLE IF EXISTS " + role, "CREATE ROLE " + role + " LOGIN PASSWORD 'writer-pw'", "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
		"GRANT USAGE ON SCHEMA public TO " + role, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO " + role,
	} {
		if _, err := adm.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	u, _ := url.Parse(owner)
	u.User = url.UserPassword(role, "writer-pw")
	w, err := Open(ctx, u.String(), Options{Existing: true})
	if err != nil {
		t.Fatalf("the writer role opens a current history: %v", err)
	}
	if n, err := w.AddResults(ctx, []Result{{Digest: "d", Record: 1, Source: "s", Tool: "vllm", Run: "{}", Rows: "[]"}}); err != nil || n != 1 {
		t.Errorf("the writer role writes: %d %v", n, err)
	}
	w.Close()
	fresh := newDBPath(t)
	fu, _ := url.Parse(fresh)
	if _, err := adm.Exec(fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", strings.TrimPrefix(fu.Path, "/"), role)); err != nil {
		t.Fatal(err)
	}
	fu.User = url.UserPassword(role, "writer-pw")
	if _, err := Open(ctx, fu.String(), Options{}); err == nil || !strings.Contains(err.Error(), "needs the CREATE right on the schema") {
		t.Errorf("a new database opened by the writer role: %v", err)
	} else if errors.Is(err, ErrNewerSchema) {
		t.Errorf("wrong error: %v", err)
	}
}

// A lock another session holds fails a write after the lock timeout instead of stalling it for
// as long as the lock is held (here the URL's lock_timeout=1s; 60 s by default). PostgreSQL only.
func TestHeldLockTimesOut(t *testing.T) {
	if pg == nil {
		t.Skip("PostgreSQL only (MREP_TEST_BACKEND=postgres)")
	}
	ctx := context.Background()
	p := newDBPath(t)
	db, err := Open(ctx, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	holder, err := sql.Open("pgx", p)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	tx, err := holder.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("LOCK TABLE results IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(p)
	q := u.Query()
	q.Set("lock_timeout", "1s")
	u.RawQuery = q.Encode()
	w, err := Open(ctx, u.String(), Options{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	done := make(chan error, 1)
	go func() {
		_, err := w.AddResults(ctx, []Result{{Digest: "d", Record: 1, Source: "s", Tool: "vllm", Run: "{}", Rows: "[]"}})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "lock timeout") {
			t.Errorf("a write under a held lock: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the write waited on the lock past its timeout")
	}
}
