package fusefs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"poolfs/internal/fsx"
)

// fsxEnv makes the test binary a child that runs the exerciser with the
// JSON options in it and prints the JSON result. A child, because fsx
// maps the file: a page fault on a mapping of a mount this process serves
// waits for a READ that only this process can answer, while its runtime
// may be stopping the world and waiting for the faulting thread.
const fsxEnv = "POOLFS_FUSEFS_FSX"

type fsxOutcome struct {
	Result fsx.Result
	Err    string
}

func fsxMain() int {
	var o fsx.Options
	if err := json.Unmarshal([]byte(os.Getenv(fsxEnv)), &o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var out fsxOutcome
	var err error
	if out.Result, err = fsx.Run(o); err != nil {
		out.Err = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// runFSX runs o in a child process.
func runFSX(t *testing.T, o fsx.Options) fsxOutcome {
	t.Helper()
	opts, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Deadline+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), fsxEnv+"="+string(opts))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("fsx child: %v: %s", err, stdout)
	}
	var out fsxOutcome
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("fsx child: %v: %s", err, stdout)
	}
	return out
}

// TestFSX runs the file system exerciser (package fsx: seeded random
// reads, writes, mmap reads and writes, truncations, fallocate, hole
// punching, zeroing, copy_file_range, fsync, reopen, each read checked
// byte for byte against a model) through the mount. The test cluster's
// stripe is 256 KiB (4+2, 64 KiB units): the files cross stripes, stay
// small (mirrored) or not, and small writes go to the delta log, the
// file closed and reopened often (close-to-open: what is committed), and
// checked through a second mount after every close.
func TestFSX(t *testing.T) {
	c := startCluster(t, cluster0())
	mnt, other := mount(t, c), mount(t, c)
	for _, tc := range []struct {
		name string
		o    fsx.Options
	}{
		{"stripes", fsx.Options{Ops: 2000, Seed: 16, MaxSize: 3 << 20, MaxLen: 320 << 10, CheckEvery: 500, ReopenEvery: 25}},
		{"small file", fsx.Options{Ops: 2000, Seed: 17, MaxSize: 64 << 10, MaxLen: 16 << 10, CheckEvery: 500, ReopenEvery: 25}},
		{"small writes", fsx.Options{Ops: 2000, Seed: 18, MaxSize: 2 << 20, MaxLen: 8 << 10, CheckEvery: 1000, ReopenEvery: 100}},
		// Fails on the code before small writes past the end of the file
		// into a stripe preallocated beyond it were kept out of the delta
		// log: the size was lost at a reopen (op 679).
		{"small writes reopened", fsx.Options{Ops: 1500, Seed: 500, MaxSize: 1 << 20, MaxLen: 4 << 10, CheckEvery: 1000, ReopenEvery: 10}},
		// Checked through a second mount after every close.
		{"two mounts", fsx.Options{Ops: 1500, Seed: 21, MaxSize: 1 << 20, MaxLen: 16 << 10, CheckEvery: 500, ReopenEvery: 10, Other: "-"}},
		{"direct", fsx.Options{Ops: 2000, Seed: 19, MaxSize: 2 << 20, MaxLen: 256 << 10, Align: 4096, Direct: true,
			Off: []string{"mapread", "mapwrite"}, CheckEvery: 500, ReopenEvery: 25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Path = filepath.Join(mnt, "fsx-"+filepath.Base(t.Name()))
			if tc.o.Other != "" {
				tc.o.Other = filepath.Join(other, "fsx-"+filepath.Base(t.Name()))
			}
			tc.o.Deadline = 2 * time.Minute
			start := time.Now()
			out := runFSX(t, tc.o)
			if out.Err != "" {
				t.Fatalf("after %d operations: %s", out.Result.Done, out.Err)
			}
			if len(out.Result.Off) > 0 {
				t.Errorf("operations refused as unsupported: %v", out.Result.Off)
			}
			if out.Result.Done < tc.o.Ops/4 {
				t.Errorf("only %d of %d operations in %s", out.Result.Done, tc.o.Ops, tc.o.Deadline)
			}
			t.Logf("%d operations in %s: %v; final size %d", out.Result.Done, time.Since(start).Round(time.Millisecond), out.Result.Counts, out.Result.Size)
		})
	}
}
