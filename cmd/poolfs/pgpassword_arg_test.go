package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
