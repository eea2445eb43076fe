//go:build faults

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"poolfs/internal/client"
	"poolfs/internal/netlab"
)

// TestSeveralHostsFaults runs one cluster of four storage servers over
// network namespaces through a sequence of faults, reading everything
// back byte for byte through both mounts after each:
//   - a server cut off while a file is overwritten (the writes sent to it
//     get no answer until it is marked down, then go elsewhere), back
//     within the grace: the new bytes are read from both clients, never
//     its stale fragments, and the resync moves only the rewritten stripes;
//   - a server that cannot send to the management host (a one-way
//     partition): it is marked down and writes carry on;
//   - 5% packet loss on a server's link, and a link limited to 20 Mbit/s;
//   - a server killed during a large write: the write succeeds;
//   - a server cut off past the pool's down grace: its drives are failed
//     and rebuilt by the others, the pool ends healthy with every stripe
//     whole, and when the link comes back its drives stay failed and
//     serve nothing.
//
// `make test` runs the first and the last; bench/faults.sh
// (POOLFS_FAULTS_LONG=1) runs them all.
func TestSeveralHostsFaults(t *testing.T) {
	netlab.NeedTools(t, "nft", "tc")
	c := startLabCluster(t, 4)
	var all []labFile
	write := func(i int, f labFile) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(c.mounts[i], f.name), f.data, 0o644); err != nil {
			t.Fatalf("write %s through mount %d: %v", f.name, i+1, err)
		}
		all = append(all, f)
	}
	checkAll := func(when string) {
		t.Helper()
		for _, mnt := range c.mounts {
			for _, f := range all {
				if err := checkFile(mnt, f); err != nil {
					t.Errorf("%s: %v", when, err)
				}
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	allUp := func(rows map[string][]string) bool {
		for _, r := range rows {
			if r[1] != r[0] {
				return false
			}
		}
		return true
	}
	serverDown := func(name string) func(map[string][]string) bool {
		return func(rows map[string][]string) bool { return rows[name] != nil && rows[name][2] == "3" }
	}
	cl := c.clients[1]
	dir := c.dir(cl.Name)
	for i := range 8 { // 16 stripes, a fragment of most on s1
		write(i%2, newLabFile(fmt.Sprintf("base-%d", i), 2<<20, uint64(500+i)))
	}
	checkAll("before any fault")

	// A server cut off while a file is rewritten, back within the grace.
	x := newLabFile("x", 3<<20, 600)
	write(0, x)
	events := len(strings.Split(c.poolfs(t, "events"), "\n"))
	if err := c.srv[0].LinkDown(); err != nil {
		t.Fatal(err)
	}
	// x is rewritten at once: its fragment writes to s1 get no answer
	// until s1 is marked down, then go to the other servers.
	x2 := newLabFile("x", 3<<20, 601)
	all = all[:len(all)-1]
	write(0, x2)
	waitServers(t, cl, dir, hangDetection, "s1 down", serverDown("s1"))
	// And a piece of base-1 is rewritten in place through the other mount:
	// its stripes are read degraded, without s1, and written anew.
	patch := newLabFile("patch", 300<<10, 602)
	f, err := os.OpenFile(filepath.Join(c.mounts[1], "base-1"), os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteAt(patch.data, 1<<20+12345)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("rewrite part of base-1 while s1 is cut off: %v", err)
	}
	copy(all[1].data[1<<20+12345:], patch.data)
	if err := c.srv[0].LinkUp(); err != nil {
		t.Fatal(err)
	}
	waitServers(t, cl, dir, 20*time.Second, "all drives up after s1's link came back", allUp)
	waitHealthy(t, cl, dir)
	checkAll("after s1 came back with x's old fragments")
	// The resync moved only the stripes rewritten meanwhile (x's 3, 1 of
	// base-1), not the others' that s1 held all along; a stripe may move
	// twice, as s1's drives come back one by one.
	ev := strings.Split(c.poolfs(t, "events"), "\n")[events-1:]
	moved := 0
	for _, m := range regexp.MustCompile(`(\d+) stripes to restore`).FindAllStringSubmatch(strings.Join(ev, "\n"), -1) {
		n, _ := strconv.Atoi(m[1])
		moved += n
	}
	if moved > 8 {
		t.Errorf("the resync after s1 came back restored %d stripes, more than twice the 4 rewritten:\n%s", moved, strings.Join(ev, "\n"))
	}
	t.Logf("resync after s1 came back: %d stripes", moved)
	// The old fragments of x and base-1 on s1 are deleted by the collector.
	waitFsck(t, c, 30*time.Second, "s1's stale fragments deleted", func(records, fragments, unreferenced int) bool {
		return unreferenced == 0 && fragments == 6*records
	})

	// The long sequence (bench/faults.sh) adds network faults and a kill.
	if os.Getenv("POOLFS_FAULTS_LONG") != "" {
		// A one-way partition: s4 cannot send to the management host.
		if err := c.srv[3].Block(c.mg); err != nil {
			t.Fatal(err)
		}
		waitServers(t, cl, dir, hangDetection, "s4 down (it cannot answer mgmt)", serverDown("s4"))
		time.Sleep(client.DefaultMapMaxAge)
		write(1, newLabFile("during-one-way", 2<<20, 700))
		checkAll("while s4 cannot send to mgmt")
		if err := c.srv[3].ClearFilters(); err != nil {
			t.Fatal(err)
		}
		waitServers(t, cl, dir, 20*time.Second, "all drives up after the partition healed", allUp)
		waitHealthy(t, cl, dir)

		// 5% loss on s2's link, then s3's link limited to 20 Mbit/s.
		if err := c.srv[1].Loss(5); err != nil {
			t.Fatal(err)
		}
		write(0, newLabFile("during-loss", 2<<20, 800))
		checkAll("with 5% loss on s2's link")
		if err := c.srv[1].Loss(0); err != nil {
			t.Fatal(err)
		}
		if err := c.srv[2].RateLimit("20mbit"); err != nil {
			t.Fatal(err)
		}
		write(1, newLabFile("during-slow-link", 2<<20, 900))
		checkAll("with s3's link limited to 20 Mbit/s")
		if err := c.srv[2].ClearRateLimit(); err != nil {
			t.Fatal(err)
		}
		waitHealthy(t, cl, dir)

		// s3 is killed halfway through a large write: the write succeeds.
		big := newLabFile("big", 24<<20, 1000)
		f, err := os.Create(filepath.Join(c.mounts[0], big.name))
		if err != nil {
			t.Fatal(err)
		}
		half := len(big.data) / 2
		if _, err := f.Write(big.data[:half]); err != nil {
			t.Fatalf("the first half of the write: %v", err)
		}
		if err := c.storage[2].cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(big.data[half:]); err != nil {
			t.Fatalf("the write after s3 was killed: %v", err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("close after s3 was killed during the write: %v", err)
		}
		all = append(all, big)
		checkAll("after s3 was killed during a write")
		c.startStorage(t, 2)
		waitServers(t, cl, dir, 20*time.Second, "all drives up after s3 restarted", allUp)
		waitHealthy(t, cl, dir)

	}

	// s2 cut off past the grace: failed, rebuilt by the others.
	c.poolfs(t, "pool", "set", "down-grace", "1s")
	if err := c.srv[1].LinkDown(); err != nil {
		t.Fatal(err)
	}
	waitServers(t, cl, dir, hangDetection+10*time.Second, "s2's drives failed", func(rows map[string][]string) bool {
		return rows["s2"] != nil && rows["s2"][3] == "3"
	})
	waitHealthy(t, cl, dir)
	checkAll("after s2's drives were rebuilt elsewhere")
	if err := c.srv[1].LinkUp(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // s2 registers again: its drives stay failed
	waitServers(t, cl, dir, 0, "s2's drives failed after it came back", func(rows map[string][]string) bool {
		return rows["s2"] != nil && rows["s2"][3] == "3"
	})
	checkAll("after s2 came back past the grace")
	// Every stripe has its k+m fragments on the drives that are up (the
	// fragments named by no record are the collector's: an attempt cut
	// short by the kill, old generations not yet deleted).
	// A rebuild's last copies and the collector's deletions may still be
	// under way when the pool turns healthy: give them a few passes.
	waitFsck(t, c, 20*time.Second, "every stripe whole after s2 came back past the grace", func(records, fragments, unreferenced int) bool {
		return fragments-unreferenced == 6*records
	})
}

// waitFsck runs poolfs fsck until ok holds for its counts of stripe
// records, fragments, and fragments named by no record, or within passes.
func waitFsck(t *testing.T, c *labCluster, within time.Duration, what string, ok func(records, fragments, unreferenced int) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	count := regexp.MustCompile(`(\d+) stripe records, (\d+) fragments \((\d+) named by no record`)
	for {
		out := c.poolfs(t, "fsck")
		if m := count.FindStringSubmatch(out); m != nil && ok(atoi(m[1]), atoi(m[2]), atoi(m[3])) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fsck: not %s within %v:\n%s", what, within, out)
		}
		time.Sleep(time.Second)
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }
