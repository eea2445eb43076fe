//go:build faults

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"poolfs/internal/netlab"
)

// partitionBound is the most a read or write through the client cut off
// from one server may take: no progress for the client's UnreachableAfter
// (10 s) on the stripes in flight, and room for a loaded machine. Without
// the client's own verdict on the server they would wait for ever.
const partitionBound = 60 * time.Second

// TestSeveralHostsClientPartition: the first client cannot send to s2
// (nftables, one way), while the management service and the other client
// still reach it, so s2 stays up. Through that client, files with
// fragments on s2 read back byte for byte (degraded) and a new file is
// written without error, both in bounded time; s2 is never marked down;
// the other client reads the new file byte for byte.
func TestSeveralHostsClientPartition(t *testing.T) {
	netlab.NeedTools(t, "nft")
	c := startLabCluster(t, 4)
	cl := c.clients[1]
	dir := c.dir(cl.Name)
	var base []labFile
	for i := range 4 { // written by the second client only: the first has none cached
		f := newLabFile(fmt.Sprintf("base-%d", i), 2<<20, uint64(1100+i))
		if err := os.WriteFile(filepath.Join(c.mounts[1], f.name), f.data, 0o644); err != nil {
			t.Fatal(err)
		}
		base = append(base, f)
	}
	allUp := func(rows map[string][]string) bool {
		for _, r := range rows {
			if r[1] != r[0] {
				return false
			}
		}
		return true
	}
	if err := c.clients[0].Block(c.srv[1]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.clients[0].ClearFilters() })

	bounded := func(what string, fn func() error) {
		t.Helper()
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- fn() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s while c1 cannot send to s2: %v", what, err)
			}
			t.Logf("%s while c1 cannot send to s2: %v", what, time.Since(start).Round(time.Millisecond))
		case <-time.After(partitionBound):
			_ = c.mountd[0].cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, in its output below
			time.Sleep(2 * time.Second)
			t.Fatalf("%s while c1 cannot send to s2: still waiting after %v", what, partitionBound)
		}
	}
	bounded("read through c1", func() error {
		for _, f := range base {
			if err := checkFile(c.mounts[0], f); err != nil {
				return err
			}
		}
		return nil
	})
	w := newLabFile("during-partition", 4<<20, 1200)
	bounded("write through c1", func() error {
		return os.WriteFile(filepath.Join(c.mounts[0], w.name), w.data, 0o644)
	})
	waitServers(t, cl, dir, 0, "s2 up (mgmt reaches it; only c1 does not)", allUp)
	for i, mnt := range c.mounts {
		for _, f := range append(base, w) {
			if err := checkFile(mnt, f); err != nil {
				t.Errorf("through mount %d during the partition: %v", i+1, err)
			}
		}
	}
	if err := c.clients[0].ClearFilters(); err != nil {
		t.Fatal(err)
	}
	w2 := newLabFile("after-partition", 2<<20, 1201)
	if err := os.WriteFile(filepath.Join(c.mounts[0], w2.name), w2.data, 0o644); err != nil {
		t.Fatalf("write through c1 after the partition healed: %v", err)
	}
	for i, mnt := range c.mounts {
		for _, f := range append(base, w, w2) {
			if err := checkFile(mnt, f); err != nil {
				t.Errorf("through mount %d after the partition healed: %v", i+1, err)
			}
		}
	}
}
