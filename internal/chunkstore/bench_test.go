package chunkstore

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"poolfs/internal/erasure"
)

// fsType names the file system of dir, for benchmark logs.
func fsType(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "?"
	}
	switch st.Type {
	case 0xEF53:
		return "ext4"
	case 0x01021994:
		return "tmpfs"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	}
	return fmt.Sprintf("0x%x", st.Type)
}

// BenchmarkWrite1M writes 1 MiB fragments with 1 and 16 writers. The
// variants measure the crash-safety cost: "group" is the shipped scheme
// (temp, fdatasync, rename, group-committed dir fsync), "perop" fsyncs the
// directory once per fragment, "nodirsync" skips the directory fsync (not
// crash-safe; the floor of any in-place scheme, which still needs
// fdatasync), "buffered" is the shipped scheme without O_DIRECT.
func BenchmarkWrite1M(b *testing.B) {
	for _, variant := range []string{"group", "perop", "nodirsync", "buffered"} {
		for _, par := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/par=%d", variant, par), func(b *testing.B) {
				dir := b.TempDir()
				d := openTest(b, dir, Options{DirectIO: variant != "buffered"})
				switch variant {
				case "perop":
					d.syncer.noGroup = true
				case "nodirsync":
					d.syncer.sync = func(int) error { return nil }
				}
				var next atomic.Uint64
				var syncs atomic.Int64
				orig := d.syncer.sync
				d.syncer.sync = func(i int) error { syncs.Add(1); return orig(i) }
				b.SetBytes(1 << 20)
				b.SetParallelism(par) // × GOMAXPROCS goroutines
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					buf := AlignedBuffer(1 << 20)
					for pb.Next() {
						n := next.Add(1)
						k := erasure.FragmentKey{Ino: n, Stripe: n / 8, Gen: 1, Index: uint8(n % 10)}
						if err := d.WriteFragment(ctx, k, buf); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(syncs.Load())/float64(b.N), "dirsyncs/op")
				b.Logf("fs %s, direct %v, %d writers", fsType(dir), d.DirectIO(), par*runtime.GOMAXPROCS(0))
			})
		}
	}
}

// BenchmarkRead1M reads 1 MiB fragments with O_DIRECT (no page cache).
func BenchmarkRead1M(b *testing.B) {
	dir := b.TempDir()
	d := openTest(b, dir, Options{DirectIO: true})
	const frags = 512
	buf := AlignedBuffer(1 << 20)
	for i := range frags {
		if err := d.WriteFragment(ctx, key(i), buf); err != nil {
			b.Fatal(err)
		}
	}
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("par=%d", par), func(b *testing.B) {
			var next atomic.Uint64
			b.SetBytes(1 << 20)
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				dst := AlignedBuffer(1 << 20)
				for pb.Next() {
					if _, err := d.ReadFragment(ctx, key(int(next.Add(1)%frags)), 0, -1, dst); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Logf("fs %s, direct %v", fsType(dir), d.DirectIO())
		})
	}
}
