// Package detect is the failure detector's judge: of drive speed (Slow)
// and of what a probe of a drive calls for (Judge).
//
// Slow flags a drive whose probes are far slower than its peers', clears
// it when it is back among them, and says when a flagged drive is slow
// enough to be treated as down. Judge takes one probe's outcome (the
// drive's state, the probe's error, Slow's word) and returns the Action
// it calls for: keep, mark up, mark down (for not answering or for
// slowness), mark all its server's drives down (the server refuses
// connections or hangs), or fail it (I/O errors).
//
// It is a pure core: Slow is fed each probe's latency (Observe) and
// returns a Verdict, Judge is a function; neither has a clock, does I/O
// (but the question Judge asks its caller when a probe timed out: does
// the server hang?) or starts goroutines. Package mgmt probes the drives,
// feeds them, and acts (map epochs, events, a slow drive kept up while its
// pool needs it for a stripe's width).
//
// Invariants:
//   - a probe is slow when it takes longer than max(Floor, Factor × the
//     median of the other drives' smoothed latency), or than
//     max(Floor, DownAfter) while no other drive was probed;
//   - a drive is flagged only after Probes slow probes in a row, cleared
//     only after Probes normal ones, and Down is returned only for a
//     flagged drive whose last Probes probes took DownAfter or longer;
//   - a valid Policy never has DownAfter above MaxDownAfter, the most a
//     probe is given;
//   - Judge never takes a drive or server down for a probe that only timed
//     out (a busy server answers slowly): only a definite answer (offline,
//     connections refused or dropped), a server that also fails a call
//     needing no drive, or a drive flagged slow past DownAfter; a server
//     in the service's own process is never judged down as a whole.
package detect
