package cluster

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/erasure"
	"poolfs/internal/mgmt"
)

// fragFilesOnDisk lists the fragment files under the cluster's drive
// directories, by stripe (file name without the generation and index).
func fragFilesOnDisk(t *testing.T, c *Cluster) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(c.Config.Dir, "drives"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.Count(d.Name(), ".") == 3 && !strings.HasPrefix(d.Name(), "tmp-") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func stripeOf(p string) string {
	parts := strings.Split(filepath.Base(p), ".")
	return parts[0] + "." + parts[1]
}

func indexOf(p string) string { return strings.Split(filepath.Base(p), ".")[3] }

func runScrub(t *testing.T, c *Cluster) mgmt.ScrubStatus {
	t.Helper()
	if err := c.Mgmt.StartScrub(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := c.Mgmt.Scrub()
		if !st.Active {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("scrub still running after 60s: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestScrubFindsAndRepairs(t *testing.T) {
	// Files format: the test edits fragment files.
	c, conn := startRebuildTest(t, Config{Drives: 12, DriveFormat: chunkstore.FormatFiles})
	files := fillFiles(t, conn, 12, 8, 16<<10)
	frags := fragFilesOnDisk(t, c)
	// Damage five fragments of five different stripes: three with flipped
	// data bytes, one deleted, one parity fragment re-sealed over garbage
	// (valid CRCs, wrong content: only parity verification sees it).
	used := map[string]bool{}
	var flipped, deleted, resealed int
	for _, p := range frags {
		if used[stripeOf(p)] {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h, err := erasure.DecodeHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		hs := erasure.HeaderSize(int(h.ShardSize))
		switch {
		case resealed == 0 && indexOf(p) == "9":
			shard := erasure.FragmentShard(b, int(h.ShardSize))
			rand.Read(shard)
			erasure.SealFragment(b, h)
			resealed++
		case flipped < 3:
			b[hs+int(h.ShardSize)/2] ^= 0x40
			flipped++
		case deleted == 0:
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			deleted++
			used[stripeOf(p)] = true
			continue
		default:
			continue
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		used[stripeOf(p)] = true
	}
	if flipped+deleted+resealed != 5 {
		t.Fatalf("damaged %d+%d+%d fragments, want 3+1+1", flipped, deleted, resealed)
	}
	st := runScrub(t, c)
	t.Logf("scrub: %+v", st)
	if st.Checked != st.Stripes || st.Stripes == 0 {
		t.Fatalf("checked %d of %d stripes", st.Checked, st.Stripes)
	}
	if st.Checksum != 3 || st.Missing != 1 || st.Inconsistent != 1 || st.Bad != 5 || st.Repaired != 5 || len(st.Unrecoverable) != 0 {
		t.Fatalf("scrub found %d checksum, %d missing, %d inconsistent (bad %d), repaired %d, unrecoverable %v; want 3, 1, 1, 5, 5, none",
			st.Checksum, st.Missing, st.Inconsistent, st.Bad, st.Repaired, st.Unrecoverable)
	}
	// Every fragment on disk decodes clean now, and a second pass agrees.
	n := 0
	for _, p := range fragFilesOnDisk(t, c) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := erasure.DecodeFragment(b); err != nil {
			t.Fatalf("%s after scrub: %v", p, err)
		}
		n++
	}
	if n != len(frags) {
		t.Fatalf("%d fragments after scrub, %d before", n, len(frags))
	}
	if st := runScrub(t, c); st.Bad != 0 || st.Checked != st.Stripes {
		t.Fatalf("second scrub: %+v", st)
	}
	verifyFiles(t, conn, files)
	evs, err := conn.Mgmt.Events(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, e := range evs {
		if e.Kind == mgmt.EventScrubDone {
			msgs = append(msgs, e.Message)
		}
	}
	if len(msgs) != 2 || !strings.Contains(msgs[0], "5 repaired") {
		t.Fatalf("scrub.done events %q", msgs)
	}
	// The CLI path: start, status and stop over RPC.
	if _, err := conn.Mgmt.Scrub(context.Background(), "start", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Mgmt.Scrub(context.Background(), "stop", ""); err != nil {
		t.Fatal(err)
	}
	if st, err := conn.Mgmt.Scrub(context.Background(), "status", ""); err != nil || st.Active {
		t.Fatalf("after stop: %+v, %v", st, err)
	}
}
