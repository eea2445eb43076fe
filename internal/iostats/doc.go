// Package iostats counts a client's file system operations per job and
// keeps the recent figures of every client and job at the management
// service: Lustre's job stats and Panasas's per-client view.
//
// # Counting (client side)
//
// A mount records every operation it serves with Recorder.Record: its
// class (read, write or metadata), its bytes and its latency, under the
// job of the calling process. The job is the value of an environment
// variable of the caller (JobResolver: by default SLURM_JOB_ID, then
// PBS_JOBID, then LSB_JOBID, as Lustre's jobid_var), read from
// /proc/PID/environ on a goroutine of its own (waited for at most 50 ms:
// the read can block until the mount answers the very process) and cached
// per process id for 10 s; a caller without one, or unreadable in time (or
// the kernel itself, pid 0), counts under the job "". Latencies go into a
// Histogram of fixed logarithmic buckets, four per power of two from 1 µs
// to about 67 s, so a percentile read from it is within 12% of the true
// value; histograms add, so the figures of many clients and reports merge
// exactly.
//
// # Reporting
//
// Recorder.Take hands over what was counted since the last report as a
// Report (one JobStats per job). Reporter sends one every interval,
// numbered (Boot, Seq); a report whose delivery failed may still have
// arrived, so it is sent again unchanged before anything newer, and the
// Aggregator counts each number of a client once. Every operation is
// thus counted exactly once, whether the service was down or only a
// reply was lost, and none is lost while the service is unreachable. The
// Report is the wire record:
// the service decodes it with DecodeReport, which rejects anything
// malformed or oversized (bucket indexes, counts that do not add up, too
// many jobs, names too long or not UTF-8) before it is counted.
//
// # Aggregating (management side)
//
// An Aggregator adds reports into per-client and per-job entries: totals
// since the entry was first seen, and the last Window of figures in time
// slots from which Snapshot computes rates and percentiles. Entries idle
// longer than Retain are dropped, and the number of entries is capped
// (MaxEntries), so a client that invents job names costs bounded memory.
// The Aggregator has no clock and no goroutine: callers pass the time.
package iostats
