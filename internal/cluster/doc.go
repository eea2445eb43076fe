// Package cluster assembles poolfs: it starts the services of a
// one-machine cluster in one process (Start, used by `poolfs up` and by the
// end-to-end tests), or one service of a cluster of several machines
// (StartMgmt for `poolfs mgmt`, StartStorage for `poolfs storage`, which
// registers its drives with the management service and registers again
// every few seconds), and connects a client to a running cluster through
// the files in its directory (Connect, used by every other command; a
// machine that joined finds the metadata servers in the map).
//
// Several `poolfs mgmt` may run over one PostgreSQL database: the one that
// holds the lease row (leader.go; postgres.Engine.AcquireLease) leads and
// runs the periodic jobs, the others stand by; cluster.json and the join
// token list every management address, and DialMgmt calls the leader.
//
// A cluster of several machines starts with Create (secret, id,
// cluster.json naming the management address) and a join Token that
// carries them to the other machines (Join writes their directories). The
// token holds the secret: it is never logged. Create also makes the
// cluster CA; every machine then holds its own key and a certificate of
// its role, enrolled with the management service, and every connection
// proves both ends' certificates; the management service authorises
// calls by role and keeps the revocation list (identity.go, revoked.go);
// every process renews its certificate before it expires (renew.go).
//
// The directory of a cluster holds:
//
//	cluster.json   the management services' addresses and the cluster name
//	secret         the cluster secret (0600): every RPC authenticates with it
//	ca.pub         the cluster CA's public key: peers' certificates are checked
//	               against it (identity.go; none in a `poolfs up` directory)
//	ca.key         the CA's private key (the first host only)
//	enroll-server, enroll-client   the enrolment credentials (first host)
//	enroll         the credential this machine joined with (other machines)
//	node.key, node.cert   this machine's identity: its key and certificate
//	cluster-id     the cluster id, made at the first start: a PostgreSQL
//	               metadata database is bound to it and refuses others
//	meta.db        the embedded SQLite metadata store
//	alerts.json    the alert configuration, if any (0600; alerts.LoadConfig),
//	               and the webhook's key, alerts-webhook-secret
//	drives/dNN     the emulated drives
//	mgmt-id        the lease holder id of the directory's `poolfs mgmt`: one
//	               restarted after a crash takes its own lease back at once
//	lock           flock(2): one `poolfs up` or `poolfs mgmt` per directory
//
// All of it is its owner's only (directories 0700, files 0600, set where
// each is made, not left to the umask; private.go): the drives hold the
// file data and meta.db the namespace. Start removes group and other
// permissions from a directory an older poolfs made, and logs it.
//
// Services started together still talk to each other only over
// authenticated RPC on loopback, as they do when they run on different
// machines.
package cluster
