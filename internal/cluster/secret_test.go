package cluster

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"poolfs/internal/rpc"
)

// TestSecretIsTheOneStartedWith: the clients a running cluster makes in its
// own process (the dashboard of `poolfs up`, its in-process mount) take the
// secret the services started with from Cluster.Secret. Once the file
// changes, that one still gets in and the file's is refused (a dashboard
// that read the file while a test wrote a wrong secret into it stopped
// `poolfs up`).
func TestSecretIsTheOneStartedWith(t *testing.T) {
	c, _ := startTest(t, Config{Drives: 4, Scheme: "2+1"})
	info, onDisk, err := ReadInfo(c.Config.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.Secret(), onDisk) {
		t.Fatal("Secret differs from the file the cluster started with")
	}
	s := c.Secret()
	s[0] ^= 0xff
	if bytes.Equal(c.Secret(), s) {
		t.Fatal("Secret returned the cluster's own slice")
	}
	path := filepath.Join(c.Config.Dir, "secret")
	if err := os.WriteFile(path, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, wrong, err := ReadInfo(c.Config.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, closeFn, err := DialMgmt(info, wrong); !errors.Is(err, rpc.ErrAuth) {
		if err == nil {
			closeFn()
		}
		t.Fatalf("the file's new secret: %v, want %v", err, rpc.ErrAuth)
	}
	mc, closeFn, err := DialMgmt(info, c.Secret())
	if err != nil {
		t.Fatalf("the secret started with: %v", err)
	}
	defer closeFn()
	if _, err := mc.Status(context.Background()); err != nil {
		t.Fatal(err)
	}
}
