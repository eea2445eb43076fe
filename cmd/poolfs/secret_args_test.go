package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"poolfs/internal/dashboard"
)

// A PostgreSQL connection string that holds a password is refused on the
// command line of every command that takes one, before anything is made,
// and the error does not repeat the password.
func TestPasswordArgRefused(t *testing.T) {
	const pw = "S3cretPw"
	for _, tc := range []struct {
		name string
		args []string // after -c DIR
	}{
		{"up-url", []string{"up", "--meta", "postgres://poolfs:" + pw + "@127.0.0.1:1/poolfs"}},
		{"up-keyword", []string{"up", "--meta", "host=127.0.0.1 port=1 password=" + pw + " dbname=poolfs"}},
		{"mgmt-url", []string{"mgmt", "--db", "postgres://poolfs:" + pw + "@127.0.0.1:1/poolfs", "--listen", "127.0.0.1:0"}},
		{"meta-url", []string{"meta", "--db", "postgres://poolfs:" + pw + "@127.0.0.1:1/poolfs?sslmode=disable"}},
		{"meta-query", []string{"meta", "--db", "postgres://poolfs@127.0.0.1:1/poolfs?password=" + pw}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "c")
			out, err := runPoolfs("", nil, append([]string{"-c", dir}, tc.args...)...)
			if err == nil {
				t.Fatalf("accepted:\n%s", out)
			}
			if !strings.Contains(out, "would be readable by every local user") {
				t.Errorf("output does not say why: %s", out)
			}
			if strings.Contains(out, pw) {
				t.Errorf("output repeats the password: %s", out)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s was made (%v)", dir, err)
			}
		})
	}
}

// The first dashboard admin's password is read from a file of mode 0600;
// a file that group or others may read or write is refused and no user is
// made.
func TestAdminPasswordFileMode(t *testing.T) {
	for _, tc := range []struct {
		perm os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o640, false}, {0o604, false}, {0o620, false}} {
		t.Run(tc.perm.String(), func(t *testing.T) {
			tmp := t.TempDir()
			pwFile := filepath.Join(tmp, "pw")
			if err := os.WriteFile(pwFile, []byte("Adm1n-password\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(pwFile, tc.perm); err != nil {
				t.Fatal(err)
			}
			users, err := dashboard.OpenUsers(filepath.Join(tmp, dashboard.UsersFile), 0)
			if err != nil {
				t.Fatal(err)
			}
			err = firstAdmin(t.TempDir(), users, dashFlags{adminPassword: pwFile})
			if tc.ok != (err == nil) || users.Exists() != tc.ok {
				t.Fatalf("mode %v: firstAdmin = %v, users made: %v", tc.perm, err, users.Exists())
			}
			if !tc.ok && !strings.Contains(err.Error(), "chmod 600") {
				t.Errorf("error does not say how: %v", err)
			}
		})
	}
}
