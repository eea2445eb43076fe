package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// Initdb prepares a server that the caller runs itself (in a network
// namespace of a multi-host test, say): a new data directory whose
// pg_hba.conf trusts every client of the network cidr as well as local
// ones. It returns the postgres binary, the data directory, a directory
// for the server's unix socket, and the process attributes to run the
// server with (user postgres when root, killed with this process). The
// directories are removed when t ends. Without server binaries t is
// skipped, or failed when CI is set.
func Initdb(t testing.TB, cidr string) (postgres, data, sockDir string, attr *syscall.SysProcAttr) {
	t.Helper()
	bin := findBin()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("pgtest: no PostgreSQL server binaries (initdb, postgres) found: install postgresql")
		}
		t.Skip("pgtest: no PostgreSQL server binaries (initdb, postgres) in PATH or /usr/lib/postgresql/*/bin")
	}
	attr, err := sysProc()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	attr.Pdeathsig = syscall.SIGKILL
	dir, err := os.MkdirTemp("", fmt.Sprintf("pgtest-%d-", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if attr.Credential != nil {
		if err := os.Chown(dir, int(attr.Credential.Uid), int(attr.Credential.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	data = filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--no-locale", "--no-sync")
	initdb.SysProcAttr = attr
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	hba := filepath.Join(data, "pg_hba.conf")
	b, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append(b, []byte("host all all "+cidr+" trust\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if attr.Credential != nil {
		if err := os.Chown(hba, int(attr.Credential.Uid), int(attr.Credential.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(bin, "postgres"), data, dir, attr
}
