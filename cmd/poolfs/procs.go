package main

import (
	"os"
	"runtime"
)

// minProcs is the least GOMAXPROCS a poolfs process runs with.
//
// A goroutine in a blocking system call (pread, pwrite and fdatasync of
// fragments, a FUSE request's read) keeps its P until the runtime's
// monitor hands it to another thread. On a machine of 2 cores, with
// GOMAXPROCS 2, an execution trace of `poolfs up` under random 64 KiB
// writes showed tens of goroutines waiting for a P, with one of the two
// cores idle and the disk partly idle. With 4 Ps random writes ran faster
// and kept the disk busier, and 8 Ps did no better than 4 (`GOMAXPROCS=2`
// in front of bench/randwrite.sh compares). Twice the cores, not more:
// the Go garbage collector's background workers are a quarter of
// GOMAXPROCS, and small file creates did no better with 8. Machines of 4
// cores or more keep the default.
const minProcs = 4

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
