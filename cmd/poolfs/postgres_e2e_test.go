package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"poolfs/internal/testlog"
	"strings"
	"testing"
	"time"

	"poolfs/internal/meta/pgtest"
)

// TestPostgresPasswordNotShown runs `poolfs up` and `poolfs meta` on a
// PostgreSQL role that logs in with a password (scram-sha-256), given by
// PGPASSWORD and by a password file: they serve, and neither their
// command line (what ps shows every user) nor their output and logs hold
// the password. A password in the URL is refused, without being shown; a
// wrong password fails with an error that does not show it.
func TestPostgresPasswordNotShown(t *testing.T) {
	url, user, pw := pgtest.StartRole(t)
	dir := t.TempDir()
	passfile := filepath.Join(t.TempDir(), "pgpass")
	if err := os.WriteFile(passfile, []byte("*:*:*:"+user+":"+pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clean := []string{"PGPASSWORD=", "PGPASSFILE=" + filepath.Join(t.TempDir(), "none")}
	args := []string{"-v", "--meta", url, "--drives", "8", "--scheme", "4+2", "--unit", "64K", "--drive-size", "1G"}
	src := filepath.Join(t.TempDir(), "src")
	data := writeRandom(t, src, 1<<20+17)
	const refusal = "would be readable by every local user"
	noPassword := func(what, s string) {
		t.Helper()
		if strings.Contains(s, pw) {
			t.Fatalf("%s shows the password:\n%s", what, s)
		}
	}
	cmdline := func(pid int) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			t.Fatal(err)
		}
		return string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
	}

	for i, env := range [][]string{{"PGPASSWORD=" + pw}, {"PGPASSFILE=" + passfile}} {
		up := startUpEnv(t, append(clean, env...), dir, args...)
		noPassword("the command line of poolfs up", cmdline(up.cmd.Process.Pid))
		if i == 0 {
			run(t, "put", "-c", dir, src, "/f")
		}
		out := filepath.Join(t.TempDir(), "out")
		run(t, "get", "-c", dir, "/f", out)
		if !bytes.Equal(readFile(t, out), data) {
			t.Fatalf("%s: file differs", env[0])
		}
		waitBanner(t, up)
		up.stop(t)
		o := up.out.String()
		noPassword("the output of poolfs up", o)
		if !strings.Contains(o, "metadata: PostgreSQL "+url) || strings.Contains(o, refusal) {
			t.Fatalf("%s: output of poolfs up:\n%s", env[0], o)
		}
	}

	// The stand-alone metadata server, password from PGPASSWORD.
	meta := exec.Command(binary, "meta", "-c", dir, "--db", url, "--listen", "127.0.0.1:0")
	meta.Env = append(os.Environ(), "PGPASSWORD="+pw)
	var mout testlog.Buffer
	meta.Stdout, meta.Stderr = &mout, &mout
	if err := meta.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { meta.Process.Kill(); meta.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(mout.String(), "poolfs meta: serving") {
		if time.Now().After(deadline) || meta.ProcessState != nil {
			t.Fatalf("poolfs meta did not serve:\n%s", mout.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	noPassword("the command line of poolfs meta", cmdline(meta.Process.Pid))
	noPassword("the output of poolfs meta", mout.String())
	meta.Process.Kill()
	meta.Wait()

	// A password in the URL, right or wrong: refused, shown nowhere.
	for _, p := range []string{pw, "Wrong-" + pw} {
		withPW := strings.Replace(url, user+"@", user+":"+p+"@", 1)
		cmd := exec.Command(binary, append([]string{"up", "-c", dir, "--listen", "127.0.0.1:0", "-v", "--meta", withPW}, args[3:]...)...)
		cmd.Env = append(os.Environ(), clean...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), refusal) || !strings.Contains(string(out), "PGPASSWORD") {
			t.Fatalf("up with a password in --meta: %v\n%s", err, out)
		}
		noPassword("the refusal of a password in --meta", string(out))
	}

	// A wrong password: the error names the user, never the password.
	wrong := "Wrong-" + pw
	cmd := exec.Command(binary, append([]string{"up", "-c", dir, "--listen", "127.0.0.1:0", "-v", "--meta", url}, args[3:]...)...)
	cmd.Env = append(append(os.Environ(), clean...), "PGPASSWORD="+wrong)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "password authentication failed for user \""+user+"\"") {
		t.Fatalf("up with a wrong password: %v\n%s", err, out)
	}
	if strings.Contains(string(out), wrong) || strings.Contains(string(out), pw) {
		t.Fatalf("the failure shows the password:\n%s", out)
	}
}

// waitBanner waits until `poolfs up` has printed its banner (a SIGTERM
// before it is an error exit).
func waitBanner(t *testing.T, up *upProc) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(up.out.String(), "(Ctrl-C stops)"); {
		if time.Now().After(deadline) {
			t.Fatalf("poolfs up printed no banner:\n%s", up.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
