package chunkstore

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// BenchmarkWrite1M writes 1 MiB fragments with 1 and 16 writers per core,
// in both formats, next to fio's sequential write on the same file system
// in the same run (sub-benchmark "fio", when fio is installed), the limit
// the ratios are taken against.
//
// Files variants measure the crash-safety cost of one file per fragment:
// "files" is the shipped scheme (temp, fdatasync, rename, group-committed
// dir fsync), "files-perop" fsyncs the directory once per fragment,
// "files-nodirsync" skips the directory fsync (not crash-safe; the floor of
// any in-place scheme, which still needs fdatasync), "files-buffered" is
// the shipped scheme without O_DIRECT. Segments variants: "segments" is the
// shipped scheme (preallocated segments, group-committed fdatasync),
// "segments-noprealloc" appends without fallocate.
func BenchmarkWrite1M(b *testing.B) {
	b.Run("fio", func(b *testing.B) { benchFio(b, "write") })
	for _, variant := range []string{"files", "files-perop", "files-nodirsync", "files-buffered", "segments", "segments-noprealloc"} {
		for _, par := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/par=%d", variant, par), func(b *testing.B) {
				dir := b.TempDir()
				opts := Options{DirectIO: variant != "files-buffered", Format: FormatFiles}
				if strings.HasPrefix(variant, "segments") {
					opts.Format = FormatSegments
				}
				d := openTest(b, dir, opts)
				var syncs atomic.Int64
				switch variant {
				case "files-perop":
					files(b, d).syncer.noGroup = true
				case "files-nodirsync":
					files(b, d).syncer.sync = func(int) error { return nil }
				case "segments-noprealloc":
					d.impl.(*segmentDrive).prealloc = false
				}
				if f, ok := d.impl.(*fileDrive); ok {
					orig := f.syncer.sync
					f.syncer.sync = func(i int) error { syncs.Add(1); return orig(i) }
				}
				var next atomic.Uint64
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
				if syncs.Load() > 0 {
					b.ReportMetric(float64(syncs.Load())/float64(b.N), "dirsyncs/op")
				}
				b.Logf("fs %s, format %s, direct %v, %d writers", fsType(dir), d.Format(), d.DirectIO(), par*runtime.GOMAXPROCS(0))
			})
		}
	}
}

// fioRuns caches fio results by rw: the benchmark framework calls a
// sub-benchmark several times, one fio run is the measurement.
var fioRuns sync.Map

// benchFio runs fio once per process (1 MiB blocks, O_DIRECT, libaio QD16,
// 2 GiB) on the benchmark's file system and reports its bandwidth as
// fio-MB/s.
func benchFio(b *testing.B, rw string) {
	if _, err := exec.LookPath("fio"); err != nil {
		b.Skip("fio not installed (scripts/deps.sh bench)")
	}
	if v, ok := fioRuns.Load(rw); ok {
		b.ReportMetric(v.(float64), "fio-MB/s")
		b.ReportMetric(0, "ns/op")
		return
	}
	out, err := exec.Command("fio", "--name=w", "--rw="+rw, "--bs=1M", "--direct=1", "--iodepth=16",
		"--ioengine=libaio", "--size=2G", "--filename="+filepath.Join(b.TempDir(), "fio.dat"), "--output-format=json").Output()
	if err != nil {
		b.Fatalf("fio: %v", err)
	}
	var res struct {
		Jobs []map[string]json.RawMessage `json:"jobs"`
	}
	var dir struct {
		BWBytes float64 `json:"bw_bytes"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Jobs) == 0 {
		b.Fatalf("fio output: %v", err)
	}
	if err := json.Unmarshal(res.Jobs[0][rw], &dir); err != nil {
		b.Fatalf("fio output: %v", err)
	}
	fioRuns.Store(rw, dir.BWBytes/1e6)
	b.ReportMetric(dir.BWBytes/1e6, "fio-MB/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRead1M reads 1 MiB fragments with O_DIRECT (no page cache), in
// both formats.
func BenchmarkRead1M(b *testing.B) {
	for _, f := range formats {
		b.Run(f.name, func(b *testing.B) {
			dir := b.TempDir()
			opts := f.opts
			opts.DirectIO, opts.SegmentSize = true, 0
			d := openTest(b, dir, opts)
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
					b.Logf("fs %s, format %s, direct %v", fsType(dir), d.Format(), d.DirectIO())
				})
			}
		})
	}
}

// BenchmarkOpen measures opening a drive of CHUNKSTORE_OPEN_N fragments of
// 8 KiB (default 100000), page cache dropped first when running as root:
// the files format scans its fanout directories, a cleanly closed segments
// drive reads one index per segment, and a crashed one ("segments-crashed",
// where every active segment is unsealed) scans record headers and checks
// data CRCs of the unsealed segments. One Open per sub-benchmark is the
// measurement (s/open).
func BenchmarkOpen(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("CHUNKSTORE_OPEN_N")); err == nil && v > 0 {
		n = v
	}
	for _, variant := range []string{"files", "segments", "segments-crashed"} {
		b.Run(variant, func(b *testing.B) {
			dir := b.TempDir()
			opts := Options{Format: FormatFiles, DirectIO: true, Logger: quietLogger()}
			if variant != "files" {
				opts.Format = FormatSegments
			}
			d, err := Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 32 {
				wg.Go(func() {
					buf := AlignedBuffer(2 * Align)
					for i := next.Add(1); i <= int64(n); i = next.Add(1) {
						if err := d.WriteFragment(ctx, key(int(i)), buf); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if variant == "segments-crashed" {
				crash(b, d)
			} else {
				d.Close()
			}
			unix.Sync()
			os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0) // root only; warm cache otherwise
			b.ResetTimer()
			start := time.Now()
			d, err = Open(dir, opts)
			elapsed := time.Since(start)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			u, _ := d.Stat(ctx)
			d.Close()
			if u.Fragments != int64(n) {
				b.Fatalf("%d fragments after open, want %d", u.Fragments, n)
			}
			b.ReportMetric(elapsed.Seconds(), "s/open")
			b.ReportMetric(0, "ns/op")
			b.Logf("%d fragments, fs %s", n, fsType(dir))
		})
	}
}
