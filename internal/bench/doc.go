// Package bench holds the acceptance benchmarks of poolfs: IOR-style
// bandwidth (ior.go), mdtest-style metadata rates (mdtest.go), an
// obdfilter-survey-style raw drive survey (survey.go), the versioned JSON
// result schema (result.go, documented in docs/bench.md) and the Markdown
// and SVG reports made from result files (report.go, svg.go).
//
// # Tasks and barriers
//
// ior and mdtest run N tasks. A Launcher starts them: Procs re-executes the
// poolfs binary once per task (`poolfs bench ior-task ...`, optionally
// through ssh on the hosts of a hosts file), so a mount sees N concurrent
// clients; InProcess runs them as goroutines (tests, and an injected Clock).
// Every phase starts with a barrier that releases all tasks together, as
// MPI_Barrier does for IOR, and each task reports one Sample per phase: its
// own start and end on its clock, the bytes and operations it did.
//
// # Measurement invariants
//
//   - A phase's time is from the earliest task start to the latest task end
//     (the slowest task's wall time, as IOR reports it); bandwidth is the
//     bytes of all tasks over that time, in MiB/s (MiB = 2^20 bytes); IOPS
//     and ops/s are operations over the same time.
//   - The phase time includes open, the I/O, fsync (with -e) and close.
//   - Every byte written is a function of (seed, iteration, writing task,
//     file offset) (pattern.go), so a read checks every byte it gets and a
//     wrong byte is reported with its file and offset (ErrVerify).
//   - All timing goes through a Clock; the measurement logic never calls
//     time.Now itself, so tests drive it with a scripted clock.
//
// Libraries in this package never print: commands format results with the
// Write* functions of report.go.
package bench
