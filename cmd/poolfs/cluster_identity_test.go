package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"poolfs/internal/cluster"
)

// `cluster create` prints a client token and a server token (last), and
// neither its output nor `cluster token` shows a private key; the keys
// and the certificate are 0600.
func TestClusterCreateTokens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	out := run(t, "-c", dir, "cluster", "create", "--mgmt", "127.0.0.1:9401")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	server, err := cluster.ParseToken(lines[len(lines)-1])
	if err != nil || server.Class != "server" {
		t.Fatalf("last line is not a server token (%v):\n%s", err, out)
	}
	client, err := cluster.ParseToken(strings.TrimSpace(run(t, "-c", dir, "cluster", "token", "--client")))
	if err != nil || client.Class != "client" || !strings.Contains(out, client.String()) {
		t.Fatalf("cluster token --client: %v, class %q; create printed:\n%s", err, client.Class, out)
	}
	printed := out + run(t, "-c", dir, "cluster", "token")
	for _, f := range []string{"ca.key", "node.key", "node.cert"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(filepath.Join(dir, f)); st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
		if f != "node.cert" && strings.Contains(printed, strings.TrimSpace(string(b))) {
			t.Errorf("%s was printed", f)
		}
	}
}
