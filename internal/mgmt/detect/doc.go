// Package detect is the failure detector's judge of drive speed: it
// flags a drive whose probes are far slower than its peers', clears it
// when it is back among them, and says when a flagged drive is slow
// enough to be treated as down.
//
// It is a pure core: Slow is fed each probe's latency (Observe) and
// returns a Verdict; it has no clock, does no I/O and starts no
// goroutines. Package mgmt probes the drives, feeds it, and acts on its
// verdicts (events, marking a drive down unless its pool needs it for a
// stripe's width).
//
// Invariants:
//   - a probe is slow when it takes longer than max(Floor, Factor × the
//     median of the other drives' smoothed latency), or than
//     max(Floor, DownAfter) while no other drive was probed;
//   - a drive is flagged only after Probes slow probes in a row, cleared
//     only after Probes normal ones, and Down is returned only for a
//     flagged drive whose last Probes probes took DownAfter or longer;
//   - a valid Policy never has DownAfter above MaxDownAfter, the most a
//     probe is given.
package detect
