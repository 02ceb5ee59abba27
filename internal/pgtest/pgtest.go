// Package pgtest starts a throwaway PostgreSQL server for tests: the distribution's own server
// binaries (initdb, postgres) on a fresh data directory in a temporary folder, listening on a
// Unix socket only (no port to collide with), as an unprivileged user when the tests run as
// root (postgres refuses to run as root). Each test takes a database of its own.
//
// MREP_TEST_POSTGRES=postgres://… uses a server that is already running instead; its user
// must be allowed to create databases.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// Server is a running PostgreSQL server for tests.
type Server struct {
	admin string // DSN of the maintenance database
	base  *url.URL
	dir   string // our temporary folder, removed by Stop ("" for an external server)
	cmd   *exec.Cmd
	n     atomic.Int64
	mu    sync.Mutex
	adm   *sql.DB
}

// ErrNoServer: no PostgreSQL server binaries here and no MREP_TEST_POSTGRES.
var ErrNoServer = errors.New("no PostgreSQL server")

// Binaries finds the directory holding initdb and postgres: PATH first, then the Debian and
// Red Hat layouts (/usr/lib/postgresql/N/bin, /usr/pgsql-N/bin), the newest version.
func Binaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
		if q, err := exec.LookPath("postgres"); err == nil {
			// both on PATH (Debian links them into /usr/local/bin)
			if r, err := filepath.EvalSymlinks(q); err == nil {
				return filepath.Dir(r), nil
			}
		}
	}
	var dirs []string
	for _, pat := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin"} {
		m, _ := filepath.Glob(pat)
		dirs = append(dirs, m...)
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: initdb and postgres are not on PATH nor under /usr/lib/postgresql (install the distribution's postgresql package, or set MREP_TEST_POSTGRES)", ErrNoServer)
}

func version(dir string) int {
	for _, part := range strings.Split(dir, string(filepath.Separator)) {
		part = strings.TrimPrefix(part, "pgsql-")
		if v, err := strconv.Atoi(part); err == nil {
			return v
		}
	}
	return 0
}

// Start starts a server (or connects to MREP_TEST_POSTGRES).
func Start() (*Server, error) {
	if dsn := os.Getenv("MREP_TEST_POSTGRES"); dsn != "" {
		return connect(dsn, "")
	}
	bin, err := Binaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mrep-pg-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	cred, err := unprivileged()
	if err != nil {
		return fail(err)
	}
	if cred != nil {
		// the server's user owns its folder; the folder is left traversable for the socket
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "mrep", "--auth=trust", "-E", "UTF8", "--no-locale", "-N")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	// The tests' own user is trusted on the socket; every other role must give its password
	// (SCRAM), so credentials (a URL's password, PGPASSWORD, a pgpass file) are really checked.
	hba := "local all mrep trust\nlocal all all scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return fail(err)
	}
	// fsync and full-page writes off: a test server's durability is not under test (kill -9
	// of a client is; the server stays up)
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off", "-c", "max_connections=200")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return fail(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("postgres: %w", err))
	}
	dsn := (&url.URL{Scheme: "postgres", User: url.User("mrep"), Path: "/postgres", RawQuery: "host=" + url.QueryEscape(dir)}).String()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := connect(dsn, dir)
		if err == nil {
			s.cmd = cmd
			return s, nil
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return fail(fmt.Errorf("postgres did not start: %v\n%s", err, log))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unprivileged is the user a server started by root runs as: postgres (the distribution's
// package creates it), else nobody. nil when not root.
func unprivileged() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and neither user postgres nor nobody exists to run the server as")
}

func connect(dsn, dir string) (*Server, error) {
	adm, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := adm.PingContext(ctx); err != nil {
		adm.Close()
		return nil, err
	}
	u, err := url.Parse(dsn)
	if err != nil {
		adm.Close()
		return nil, err
	}
	return &Server{admin: dsn, base: u, dir: dir, adm: adm}, nil
}

// NewDatabase creates an empty database and returns its connection string.
func (s *Server) NewDatabase() (string, error) {
	name := fmt.Sprintf("mrep_test_%d_%d", os.Getpid(), s.n.Add(1))
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.adm.Exec(`CREATE DATABASE ` + name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u := *s.base
	u.Path = "/" + name
	return u.String(), nil
}

// Dir is the server's folder (its Unix socket lives there); "" for an external server.
func (s *Server) Dir() string { return s.dir }

// Stop shuts the server down (fast shutdown) and removes its folder.
func (s *Server) Stop() {
	s.adm.Close()
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-done
		}
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// Required says whether a missing server is a failure rather than a skip: in CI (CI is set),
// both backends must be tested.
func Required() bool { return os.Getenv("CI") != "" }
