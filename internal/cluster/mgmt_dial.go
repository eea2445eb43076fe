package cluster

import (
	"fmt"
	"net"
	"strings"

	"poolfs/internal/identity"
	"poolfs/internal/mgmt"
	"poolfs/internal/rpc"
)

// MgmtAddrs splits the management address of cluster.json or a join token:
// one host:port, or several separated by commas when several management
// services run (one leads, the others stand by).
func MgmtAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// checkMgmtAddrs rejects a management address list with an entry that is
// not host:port.
func checkMgmtAddrs(s string) error {
	addrs := MgmtAddrs(s)
	if len(addrs) == 0 {
		return fmt.Errorf("management address %q: want host:port[,host:port...]", s)
	}
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("management address %q: want host:port[,host:port...]", a)
		}
	}
	return nil
}

// DialMgmt connects to the management service of info: the one address
// directly (an error if it does not answer), or, for several, whichever
// leads (mgmt.Leaders: calls follow the leader and wait out a failover).
// The caller closes the client with the returned function. The node
// proves the identity of its directory (info.Dir) and accepts only
// management services'.
func DialMgmt(info Info, secret []byte) (*mgmt.Client, func() error, error) {
	c, err := loadCreds(info.Dir)
	if err != nil {
		return nil, nil, err
	}
	return dialMgmt(info, secret, c)
}

func dialMgmt(info Info, secret []byte, c creds) (*mgmt.Client, func() error, error) {
	addrs := MgmtAddrs(info.Mgmt)
	opts := c.client(rpc.ClientOptions{Errors: allErrors()}, identity.RoleMgmt)
	if len(addrs) == 1 {
		rc, err := rpc.Dial(addrs[0], secret, opts)
		if err != nil {
			return nil, nil, err
		}
		return mgmt.NewClient(rc), rc.Close, nil
	}
	opts.DialTimeout = mgmtDialTimeout
	l, err := mgmt.NewLeaders(addrs, secret, opts)
	if err != nil {
		return nil, nil, err
	}
	return mgmt.NewLeadersClient(l), l.Close, nil
}

// mgmtDialTimeout bounds a connection to one of several management
// services, so that a host that vanished costs little of the failover.
const mgmtDialTimeout = 2e9 // 2 s
