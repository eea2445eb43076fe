// Package cluster assembles poolfs: it starts the services of a
// one-machine cluster in one process (Start, used by `poolfs up` and by the
// end-to-end tests) and connects a client to a running cluster through the
// files that `up` writes into its directory (Connect, used by every other
// command).
//
// The directory of a cluster holds:
//
//	cluster.json   the management service's address and the cluster name
//	secret         the cluster secret (0600): every RPC authenticates with it
//	meta.db        the embedded SQLite metadata store
//	drives/dNN     the emulated drives
//
// Services started together still talk to each other only over
// authenticated RPC on loopback, as they do when they run on different
// machines.
package cluster
