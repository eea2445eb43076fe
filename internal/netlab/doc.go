// Package netlab builds several "hosts" on one Linux machine for tests: each
// host is a network namespace with a loopback and one address from
// 198.18.0.0/15 (the benchmarking range, RFC 2544), and all of a lab's hosts
// are joined by a bridge that lives in a namespace of its own (the switch).
// Nothing of a lab touches the machine's own network namespace: its hosts
// reach each other and their own loopback, nothing else, and two labs never
// see each other (each has its own switch), so every lab may use the same
// addresses.
//
// A host runs processes in its namespace (Host.Command: nsenter --net,
// which keeps the machine's mount namespace, so a FUSE mount made by a
// process of a host is visible to the test) and dials from it (Host.Dial:
// a socket made on an OS thread that entered the namespace).
//
// Faults (faults.go): LinkDown cuts a host off the switch; Loss drops a
// share of its packets at random and Block drops only those it sends to
// one other host (nftables rules in its namespace); RateLimit puts a token
// bucket (tc tbf) on its interface, and LimitRate (tc.go) on both ends of
// its link, so that it sends and receives at that rate, the switch's end
// queueing PortQueue bytes (1 MiB) as a switch port's buffer does.
//
// Lifetime. New registers a t.Cleanup that kills every process the lab
// started (SIGKILL to its process group) and deletes its namespaces, which
// deletes their links and the bridge, whether the test passed or not.
// Namespace names carry the test binary's pid (netlab-PID-N-host); New
// first sweeps the namespaces of binaries that died without cleaning up.
//
// Requirements: root (CAP_SYS_ADMIN and CAP_NET_ADMIN), ip(8) from
// iproute2, nsenter(1) from util-linux; the faults need nft(8) from
// nftables (NeedTools). Without them New skips the test,
// or fails it when the environment variable CI is set.
package netlab
