package chunkstore

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"poolfs/internal/erasure"
)

// The crash test re-executes the test binary as a child that writes and
// deletes fragments from several goroutines and logs each acknowledged
// operation; the parent kills it with SIGKILL mid-run, reopens the drive
// and checks the contract: every fragment is absent or whole, and every
// acknowledged write that no delete touched is present.
const (
	crashDirEnv    = "CHUNKSTORE_CRASH_DIR"
	crashFormatEnv = "CHUNKSTORE_CRASH_FORMAT"
	crashBaseEnv   = "CHUNKSTORE_CRASH_BASE"
)

// crashFrag is the deterministic content of fragment n of the crash test.
func crashFrag(n int) (erasure.FragmentKey, []byte) {
	size := Align * (1 + n%7)
	if n%11 == 0 {
		size = 64 * Align
	}
	return erasure.FragmentKey{Ino: uint64(n), Stripe: uint64(n % 13), Gen: 1, Index: uint8(n % 10)}, pattern(size, uint64(n))
}

func crashOpts(format string) Options {
	return Options{Format: Format(format), DirectIO: true, SegmentSize: 256 << 10, Logger: quietLogger()}
}

func TestCrashKill(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			dir := t.TempDir()
			gone := map[int]bool{} // deleted for sure (acknowledged before an earlier crash)
			base := 0
			for round := range 3 {
				acked, deleting := crashRound(t, dir, string(f.opts.Format), base)
				d := openTest(t, dir, crashOpts(string(f.opts.Format)))
				present := map[erasure.FragmentKey]int64{}
				err := d.ListFragments(ctx, func(k erasure.FragmentKey, size int64, _ time.Time) error {
					present[k] = size
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				for k, size := range present {
					n := int(k.Ino)
					wk, want := crashFrag(n)
					if wk != k || size != int64(len(want)) {
						t.Fatalf("round %d: unexpected fragment %v of %d bytes", round, k, size)
					}
					got, err := d.ReadFragment(ctx, k, 0, -1, nil)
					if err != nil || !bytes.Equal(got, want) {
						t.Fatalf("round %d: fragment %d is not whole (err %v)", round, n, err)
					}
				}
				for n := range acked {
					k, _ := crashFrag(n)
					if _, ok := present[k]; !ok && !deleting[n] && !gone[n] {
						t.Fatalf("round %d: acknowledged fragment %d lost", round, n)
					}
				}
				u, err := d.Stat(ctx)
				if err != nil || u.Fragments != int64(len(present)) {
					t.Fatalf("round %d: usage %+v (err %v), %d fragments listed", round, u, err, len(present))
				}
				// Deletes that come back after a crash are deleted again, as
				// garbage collection would.
				for n := range deleting {
					k, _ := crashFrag(n)
					if err := d.DeleteFragment(ctx, k); err != nil {
						t.Fatal(err)
					}
					gone[n] = true
				}
				t.Logf("round %d: %d writes acknowledged, %d deletes started, %d fragments present",
					round, len(acked), len(deleting), len(present))
				d.Close()
				base += 1 << 20
			}
		})
	}
}

// crashRound runs a child until it has acknowledged some operations, kills
// it and returns the acknowledged writes and the started deletes.
func crashRound(t *testing.T, dir, format string, base int) (acked, deleting map[int]bool) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "acks")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashFormatEnv+"="+format,
		crashBaseEnv+"="+strconv.Itoa(base), "CHUNKSTORE_CRASH_LOG="+logPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(20 * time.Second)
	target := 60 + base%7*10
	for countLines(logPath) < target {
		select {
		case err := <-exited:
			t.Fatalf("child exited early (%v); stderr:\n%s", err, stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("child acknowledged too little in 20 s; stderr:\n%s", stderr.String())
		case <-time.After(time.Millisecond):
		}
	}
	cmd.Process.Kill() // SIGKILL
	<-exited
	acked, deleting = map[int]bool{}, map[int]bool{}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		op, num, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			continue // a torn last line
		}
		switch op {
		case "w":
			acked[n] = true
		case "d":
			deleting[n] = true
		}
	}
	return acked, deleting
}

func countLines(p string) int {
	b, _ := os.ReadFile(p)
	return bytes.Count(b, []byte("\n"))
}

// crashChild is the child side: write fragments base, base+1, ... from 4
// goroutines, deleting every third one written, until killed.
func crashChild(t *testing.T, dir string) {
	base, _ := strconv.Atoi(os.Getenv(crashBaseEnv))
	d, err := Open(dir, crashOpts(os.Getenv(crashFormatEnv)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL open:", err)
		os.Exit(1)
	}
	logf, err := os.OpenFile(os.Getenv("CHUNKSTORE_CRASH_LOG"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL log:", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	next := base
	ack := func(op string, n int) {
		logf.WriteString(op + " " + strconv.Itoa(n) + "\n") // one write(2): whole lines
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				mu.Lock()
				n := next
				next++
				mu.Unlock()
				k, b := crashFrag(n)
				if err := d.WriteFragment(ctx, k, b); err != nil {
					fmt.Fprintln(os.Stderr, "FAIL write:", err)
					os.Exit(1)
				}
				ack("w", n)
				if n%3 == 0 && n > base {
					victim := n - 2
					ack("d", victim) // logged before it starts: may or may not happen
					vk, _ := crashFrag(victim)
					if err := d.DeleteFragment(ctx, vk); err != nil {
						fmt.Fprintln(os.Stderr, "FAIL delete:", err)
						os.Exit(1)
					}
				}
			}
		})
	}
	wg.Wait()
}
