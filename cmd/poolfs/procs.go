package main

import (
	"os"
	"runtime"
)

// minProcs is the least GOMAXPROCS a poolfs process runs with.
//
// A goroutine in a blocking system call (pread, pwrite and fdatasync of
// fragments, a FUSE request's read) keeps its P until the runtime's
// monitor takes it back, and the monitor may sleep for up to 10 ms. On a
// machine of 2 cores, with GOMAXPROCS 2, both Ps were often held so while
// tens of goroutines waited to run: a 3 s execution trace of `poolfs up`
// under random 64 KiB writes showed 37 goroutines waiting for a P on
// average, with one of the two cores idle and the disk idle a quarter of
// the time. With 8 Ps, the same run (bench/randwrite.sh) wrote 10-15%
// faster, with the disk busy 92-96% of the time instead of 77%. On
// machines of more cores, GOMAXPROCS keeps its default.
const minProcs = 8

// raiseProcs sets GOMAXPROCS to at least minProcs unless the GOMAXPROCS
// environment variable chose it.
func raiseProcs() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	if runtime.GOMAXPROCS(0) < minProcs {
		runtime.GOMAXPROCS(minProcs)
	}
}
