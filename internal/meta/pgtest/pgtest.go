// Package pgtest starts throwaway PostgreSQL servers for tests.
//
// Start returns the URL of a fresh, empty database. With POOLFS_TEST_PG_URL
// set, databases are created on that server. Otherwise one server per test
// binary is started from the PostgreSQL server binaries (PATH, then
// /usr/lib/postgresql/*/bin): initdb into a temporary directory, postgres
// on a free 127.0.0.1 port with fsync=on and its unix socket in that
// directory. The server lives while any test that called Start runs; the
// last t.Cleanup stops it (immediate shutdown) and removes its directory.
// It is also killed if the test binary dies (parent-death signal). As root,
// the server runs as user postgres, which refuses to run as root.
//
// StartRole also makes a role that must log in with a password: the
// server's pg_hba.conf asks members of pgtest_password for one
// (scram-sha-256 over TCP) and trusts everyone else.
//
// Without server binaries, Start skips the test, or fails it when the
// environment variable CI is set.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable holding the URL of an existing server.
const EnvURL = "POOLFS_TEST_PG_URL"

var shared struct {
	mu    sync.Mutex
	refs  int         // tests using srv; guarded by mu
	srv   *server     // guarded by mu
	timer *time.Timer // pending stop; guarded by mu
}

// linger is how long the server outlives its last user, so that a test's
// subtests, each calling Start, share one server instead of each paying
// for initdb. A binary that exits sooner kills it by the parent-death
// signal; the next run removes the directory it left.
const linger = 2 * time.Second

var dbSeq atomic.Uint64

type server struct {
	dir    string
	cmd    *exec.Cmd
	exited chan error // receives cmd.Wait's result
	base   string     // URL of the "postgres" database
}

// Start returns the URL of a new empty database for t.
func Start(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	external := base != ""
	if !external {
		var err error
		if base, err = acquire(t); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	name := fmt.Sprintf("pgtest_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, dbSeq.Add(1))
	if err := admin(base, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if external { // a local server's databases go with its directory
		t.Cleanup(func() {
			if err := admin(base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
				t.Logf("pgtest: %v", err)
			}
		})
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

// passwordGroup is the role whose members log in with a password over
// TCP (scram-sha-256); the server trusts everyone else.
const passwordGroup = "pgtest_password"

// requirePasswords puts the password rule for passwordGroup first in the
// server's pg_hba.conf.
func requirePasswords(hba string) error {
	b, err := os.ReadFile(hba)
	if err != nil {
		return err
	}
	rule := "host all +" + passwordGroup + " 127.0.0.1/32 scram-sha-256\n"
	return os.WriteFile(hba, append([]byte(rule), b...), 0o600)
}

// StartRole returns the URL of a new empty database owned by a new role
// that must log in with a password (scram-sha-256 over TCP), the role's
// name and its password. The URL names the role but holds no password.
// On a server given by POOLFS_TEST_PG_URL, whose authentication rules are
// not the test's, the test is skipped.
func StartRole(t testing.TB) (dbURL, user, password string) {
	t.Helper()
	if os.Getenv(EnvURL) != "" {
		t.Skip("pgtest: StartRole needs a server started by pgtest (its pg_hba.conf), not " + EnvURL)
	}
	dbURL = Start(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	n := dbSeq.Add(1)
	user = fmt.Sprintf("pgtest_role_%d_%d", os.Getpid(), n)
	password = fmt.Sprintf("pw-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), n)
	base := *u
	base.Path = "/postgres"
	for _, sql := range []string{
		"DO $$BEGIN CREATE ROLE " + passwordGroup + " NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END$$",
		"CREATE ROLE " + user + " LOGIN PASSWORD '" + password + "' IN ROLE " + passwordGroup,
		"ALTER DATABASE " + u.Path[1:] + " OWNER TO " + user,
	} {
		if err := admin(base.String(), sql); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	if err := admin(dbURL, "ALTER SCHEMA public OWNER TO "+user); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u.User = url.User(user)
	return u.String(), user, password
}

func admin(base, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

// acquire returns the shared server's base URL, starting it if needed, and
// registers the release with t.
func acquire(t testing.TB) (string, error) {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.timer != nil {
		shared.timer.Stop()
		shared.timer = nil
	}
	if shared.srv == nil {
		bin := findBin()
		if bin == "" {
			if os.Getenv("CI") != "" {
				t.Fatal("pgtest: no PostgreSQL server binaries (initdb, postgres) found: install postgresql")
			}
			t.Skip("pgtest: no PostgreSQL server binaries (initdb, postgres) in PATH or /usr/lib/postgresql/*/bin; set " + EnvURL + " or install postgresql")
		}
		srv, err := startServer(bin)
		if err != nil {
			return "", err
		}
		shared.srv = srv
	}
	shared.refs++
	base := shared.srv.base
	t.Cleanup(func() {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		if shared.refs--; shared.refs == 0 {
			srv := shared.srv
			shared.timer = time.AfterFunc(linger, func() {
				shared.mu.Lock()
				defer shared.mu.Unlock()
				if shared.refs == 0 && shared.srv == srv {
					srv.stop()
					shared.srv, shared.timer = nil, nil
				}
			})
		}
	})
	return base, nil
}

func findBin() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "postgres")); err == nil {
			return filepath.Dir(p)
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- { // newest version first
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

// sysProc runs children as user postgres when we are root, and kills them
// when this process dies.
func sysProc() (*syscall.SysProcAttr, error) {
	a := &syscall.SysProcAttr{Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if os.Geteuid() != 0 {
		return a, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return a, nil
}

func startServer(bin string) (*server, error) {
	attr, err := sysProc()
	if err != nil {
		return nil, err
	}
	removeStale()
	dir, err := os.MkdirTemp("", fmt.Sprintf("pgtest-%d-", os.Getpid()))
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir}
	fail := func(err error) (*server, error) {
		s.stop()
		return nil, err
	}
	if attr.Credential != nil {
		if err := os.Chown(dir, int(attr.Credential.Uid), int(attr.Credential.Gid)); err != nil {
			return fail(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--no-locale", "--no-sync")
	initdb.SysProcAttr = attr
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	if err := requirePasswords(filepath.Join(data, "pg_hba.conf")); err != nil {
		return fail(err)
	}
	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+dir,
		"-c", "fsync=on", "-c", "max_connections=200", "-c", "shared_buffers=64MB")
	s.cmd.SysProcAttr = attr
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return fail(fmt.Errorf("start postgres: %w", err))
	}
	s.exited = make(chan error, 1)
	go func() { s.exited <- s.cmd.Wait() }()
	s.base = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := admin(s.base, "SELECT 1")
		if err == nil {
			return s, nil
		}
		select {
		case werr := <-s.exited:
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			s.cmd = nil
			return fail(fmt.Errorf("postgres exited: %v\n%s", werr, log))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("postgres not ready after 60s: %w", err))
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stop shuts the server down at once (SIGQUIT: immediate shutdown, like
// pg_ctl stop -m immediate) and removes its directory.
func (s *server) stop() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	os.RemoveAll(s.dir)
}

// removeStale removes the directories of servers whose test binary is gone,
// stopping the server first if it still runs.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgtest-*-*"))
	for _, dir := range dirs {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(dir), "pgtest-%d-", &pid); err != nil || pid <= 0 || alive(pid) {
			continue
		}
		pidfile, _ := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
		var pm int
		if _, err := fmt.Sscanf(string(pidfile), "%d", &pm); err == nil && pm > 0 && alive(pm) {
			_ = syscall.Kill(pm, syscall.SIGQUIT)
			time.Sleep(200 * time.Millisecond)
		}
		os.RemoveAll(dir)
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
