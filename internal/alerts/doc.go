// Package alerts turns the state of a cluster into alerts: rules with
// thresholds, evaluated periodically by the management service from what
// it already knows (pool usage and recovery, drive states, slow drives,
// peers' clocks), kept with their history, acknowledged by users and
// delivered by webhook and e-mail.
//
// The core is pure: conditions (rules.go) maps a State snapshot and the
// Thresholds to the conditions that hold, with no clock but State.Now and
// no I/O; its only memory is each pool's fill trend (trend.go, the
// least-squares line that time-to-full comes from) and each running
// rebuild's last progress. The Engine (engine.go) keeps the alerts; the
// notifiers (webhook.go, smtp.go) and the Store are given to it.
//
// Rules (Alert.Rule), their subjects and severities:
//
//	pool.full           pool P     warning ≥ 80%, critical ≥ 90% of its usable capacity used
//	pool.time-to-full   pool P     warning ≤ 7 days, critical ≤ 1 day at the fill trend of the last 6h
//	drive.failed        drive D    warning: failed, not replaced yet
//	drive.down          drive D    warning: not answering for 1m or more
//	drive.slow          drive D    warning: far slower than its peers
//	rebuild.stalled     pool P     critical: a running rebuild moved no byte for 10m
//	rebuild.impossible  pool P     critical: recovery cannot restore every stripe (too few drives, no room, tasks failing)
//	data.loss           pool P     critical: stripes lost more fragments than parity covers
//	pool.preservation   pool P     warning: the rebuild capacity the pool reserves is used up
//	host.space-low      server S   warning: a host file system has less left than its drives may take
//	server.down         server S   critical: every drive of the server is down or failed
//	clock.skew          server S   warning ≥ 1s, critical ≥ 10s from the management service's clock
//	                    mount H:P  (the same for a mount, from its I/O reports)
//
// Invariants:
//   - at most one alert per rule and subject is open; an alert opens the
//     first evaluation its condition holds and resolves at the first one
//     where it was last seen Thresholds.ResolveAfter ago or more (default
//     1m, which damps a condition that comes and goes);
//   - alert IDs are decimal numbers that grow with each new alert and are
//     never reused, across restarts (a record kept aside as undecodable
//     starts the count again);
//   - every opening, change of severity and resolution is saved (Store)
//     and queued on every channel; evaluation never waits for a delivery;
//   - each channel delivers in the order the notifications were made,
//     retrying one with exponential backoff (DeliveryPolicy) until it is
//     delivered or given up, and records the attempts and the last error
//     in the alert; a delivery not finished when the engine stops is
//     queued again by Load;
//   - the history is bounded: open alerts are all kept, resolved ones up to
//     Options.MaxHistory, the oldest dropped first;
//   - a saved record that does not decode is kept aside, never overwritten
//     (Store.SaveAside before any Save);
//   - secrets (the webhook's HMAC key, the SMTP password) are read from
//     files or the environment, are never in the saved record, the
//     notifications, errors or logs.
package alerts
