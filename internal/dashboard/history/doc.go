// Package history keeps the dashboard's time series in fixed rings: each
// series holds the last hour at one-second resolution, the last day at
// one minute and the last 30 days at five minutes, so its memory and its
// file never grow. A sample lands in all three tiers at once: the coarse
// tiers hold the mean of the samples of their slot so far.
//
// Invariants:
//   - a slot is addressed by its absolute time (unix time / resolution),
//     so the rings need no clock of their own and a restart resumes them
//     where they were; slots no sample reached (the service was stopped,
//     or a sampler skipped) are NaN, drawn as gaps, never as zeros;
//   - a sample older than a tier's current slot is ignored by that tier
//     (time only moves forward in a ring);
//   - Encode and Decode round-trip every series exactly (values are
//     float32); Decode refuses any input that is not a whole, well formed
//     file of this version (Fuzz test) and never allocates more than the
//     fixed sizes of the tiers allow.
//
// Rate turns cumulative counters (bytes read since a drive was opened)
// into per-second rates and skips the sample in which a counter went
// backwards (its server restarted); Prune forgets the counters no longer
// reported (a replaced drive, a client gone).
package history
