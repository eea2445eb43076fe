// Package testbin builds the poolfs binary once for the tests of a package
// that run it as a separate process (end-to-end tests of the CLI, the
// benchmark tools' task processes). The binary is built with -race when
// the test binary is, so that races in the child processes fail the tests
// too. It is imported only by tests.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Main builds poolfs into a temporary directory, sets *bin to its path,
// runs the tests and exits with their status. Call it from TestMain.
func Main(m *testing.M, bin *string) {
	dir, err := os.MkdirTemp("", "poolfs-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbin:", err)
		os.Exit(1)
	}
	*bin = filepath.Join(dir, "poolfs")
	args := []string{"build", "-o", *bin}
	if Race {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "poolfs/cmd/poolfs")...).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "build poolfs: %v\n%s", err, out)
		os.Exit(1)
	}
	if Race && os.Getenv("GORACE") == "" {
		// The race runtime sleeps atexit_sleep_ms (1 s) at every exit to
		// let other threads report; the tests run the binary hundreds of
		// times. Races found still print and exit with status 66.
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
