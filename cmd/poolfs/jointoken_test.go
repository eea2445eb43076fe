package main

import (
	"encoding/hex"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"poolfs/internal/cluster"
)

// newJoinToken makes a cluster in a temporary directory and returns its
// server token.
func newJoinToken(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "first")
	if _, err := cluster.Create(dir, "", "127.0.0.1:9401"); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(run(t, "-c", dir, "cluster", "token"))
}

// writeTokenFile writes tok to a new file of mode perm and returns its name.
func writeTokenFile(t *testing.T, tok string, perm os.FileMode) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, perm); err != nil {
		t.Fatal(err)
	}
	return file
}

// runPoolfs runs poolfs args with stdin and the extra environment env and
// returns its combined output and error. POOLFS_JOIN_TOKEN is empty unless
// env sets it.
func runPoolfs(stdin string, env []string, args ...string) (string, error) {
	cmd := exec.Command(binary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(append(os.Environ(), tokenEnv+"="), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// dirFiles returns the contents and modes of the files in dir by name.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[rel] = st.Mode().String() + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// tokenLeak returns the first part of token tok (16 characters after its
// prefix, or the secret in hex) that s holds, or "".
func tokenLeak(t *testing.T, s, tok string) string {
	t.Helper()
	parsed, err := cluster.ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	if h := hex.EncodeToString(parsed.Secret); strings.Contains(s, h) {
		return h
	}
	for i := len("poolfs-join-2:"); i+16 <= len(tok); i++ {
		if strings.Contains(s, tok[i:i+16]) {
			return tok[i : i+16]
		}
	}
	return ""
}

// `cluster join` reads the token from a 0600 file, standard input or
// POOLFS_JOIN_TOKEN and makes the same directory as cluster.Join does.
func TestClusterJoinTokenSources(t *testing.T) {
	tok := newJoinToken(t)
	file := writeTokenFile(t, tok, 0o600)
	parsed, err := cluster.ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(t.TempDir(), "want")
	if err := cluster.Join(want, parsed); err != nil {
		t.Fatal(err)
	}
	wantFiles := dirFiles(t, want)
	for _, tc := range []struct {
		name  string
		stdin string
		env   []string
		args  []string
	}{
		{name: "file", args: []string{"--token-file", file}},
		{name: "file-over-env", args: []string{"--token-file", file}, env: []string{tokenEnv + "=not-a-token"}},
		{name: "file-dash-stdin", stdin: tok + "\n", args: []string{"--token-file", "-"}},
		{name: "stdin", stdin: "  " + tok + "\r\n\n"},
		{name: "env", env: []string{tokenEnv + "=" + tok}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "joined")
			out, err := runPoolfs(tc.stdin, tc.env, append([]string{"-c", dir, "cluster", "join"}, tc.args...)...)
			if err != nil {
				t.Fatalf("cluster join: %v\n%s", err, out)
			}
			if !strings.Contains(out, "joined: "+dir) {
				t.Errorf("output: %s", out)
			}
			if leak := tokenLeak(t, out, tok); leak != "" {
				t.Errorf("output holds %q of the token: %s", leak, out)
			}
			if got := dirFiles(t, dir); !maps.Equal(got, wantFiles) {
				t.Errorf("joined directory holds %v, cluster.Join makes %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(wantFiles)))
			}
		})
	}
}

// A token on the command line, in a file that group or others may read,
// or nowhere is refused: the error names no part of the token and no
// directory is made.
func TestJoinTokenRefused(t *testing.T) {
	tok := newJoinToken(t)
	file := writeTokenFile(t, tok, 0o600)
	openFile, groupFile, otherFile := writeTokenFile(t, tok, 0o644), writeTokenFile(t, tok, 0o640), writeTokenFile(t, tok, 0o602)
	storage := []string{"--server", "s1", "--listen", "127.0.0.1:0", "--drive", filepath.Join(t.TempDir(), "d0")}
	for _, tc := range []struct {
		name  string
		args  []string // after -c DIR
		stdin string
		want  string
	}{
		{name: "join-argument", args: []string{"cluster", "join", tok}, want: "no join token on the command line"},
		{name: "join-argument-and-file", args: []string{"cluster", "join", "--token-file", file, tok}, want: "no join token on the command line"},
		{name: "join-file-0644", args: []string{"cluster", "join", "--token-file", openFile}, want: "has mode 0644"},
		{name: "join-file-0640", args: []string{"cluster", "join", "--token-file", groupFile}, want: "has mode 0640"},
		{name: "join-file-0602", args: []string{"cluster", "join", "--token-file", otherFile}, want: "has mode 0602"},
		{name: "join-empty-stdin", args: []string{"cluster", "join"}, want: "bad join token: it is empty"},
		{name: "join-bad-stdin", args: []string{"cluster", "join"}, stdin: tok[:40], want: "bad join token"},
		{name: "meta-join", args: []string{"meta", "--db", "postgres://x@127.0.0.1:1/x", "--join", tok}, want: "meta takes no join token on the command line"},
		{name: "meta-join-file-0644", args: []string{"meta", "--db", "postgres://x@127.0.0.1:1/x", "--join-file", openFile}, want: "has mode 0644"},
		{name: "storage-join", args: append([]string{"storage", "--join=" + tok}, storage...), want: "storage takes no join token on the command line"},
		{name: "storage-join-file-0644", args: append([]string{"storage", "--join-file", openFile}, storage...), want: "has mode 0644"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "joined")
			out, err := runPoolfs(tc.stdin, nil, append([]string{"-c", dir}, tc.args...)...)
			if err == nil {
				t.Fatalf("poolfs %s succeeded:\n%s", tc.name, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output %q does not say %q", out, tc.want)
			}
			if leak := tokenLeak(t, out, tok); leak != "" {
				t.Errorf("output holds %q of the token: %s", leak, out)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s was made (%v)", dir, err)
			}
		})
	}
}
