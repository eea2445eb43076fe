package mgmt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"poolfs/internal/rpc"
)

// Leaders calls whichever of several management services leads. A call
// goes to the last one that answered; one that is refused by a standby
// (ErrNotLeader) goes to the leader it names, and one whose service does
// not answer (rpc.ErrUnavailable) goes to the next address, until a
// leader answers or FailoverWithin has passed: a standby takes the lease
// within a lease's time of the leader's death, so callers see no error.
// Connections are made when first needed.
type Leaders struct {
	addrs  []string
	secret []byte
	opts   rpc.ClientOptions
	within time.Duration
	mu     struct {
		sync.Mutex
		cur   int                    // index in addrs of the last leader
		conns map[string]*rpc.Client // by address
	}
}

// FailoverWithin is how long Leaders keeps trying for a leader: more than
// the lease (6 s) and the renewal of the standby that takes it over.
const FailoverWithin = 15 * time.Second

// NewLeaders returns a caller of the management services at addrs (at
// least one), authenticated with secret.
func NewLeaders(addrs []string, secret []byte, opts rpc.ClientOptions) (*Leaders, error) {
	if len(addrs) == 0 {
		return nil, errors.New("mgmt: no management service address")
	}
	l := &Leaders{addrs: slices.Clone(addrs), secret: secret, opts: opts, within: FailoverWithin}
	l.mu.conns = map[string]*rpc.Client{}
	return l, nil
}

// NewLeadersClient returns a Client that calls through l.
func NewLeadersClient(l *Leaders) *Client { return &Client{rc: l} }

// Call calls the leader (see Leaders).
func (l *Leaders) Call(ctx context.Context, method string, args any, body []byte, result any) error {
	deadline := time.Now().Add(l.within)
	tried := 0
	for {
		addr := l.current()
		rc, err := l.conn(addr)
		if err == nil {
			err = rc.Call(ctx, method, args, body, result)
		}
		if err == nil || ctx.Err() != nil || !(errors.Is(err, ErrNotLeader) || errors.Is(err, rpc.ErrUnavailable)) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mgmt: no leading management service among %v within %v: %w", l.addrs, l.within, err)
		}
		tried++
		if !l.follow(LeaderOf(err), addr) && tried%len(l.addrs) == 0 {
			select { // every address refused: wait for a standby to take the lease
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				return err
			}
		}
	}
}

func (l *Leaders) current() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addrs[l.mu.cur]
}

// follow moves to leader if it is one of the addresses other than failed,
// else to the address after failed. It reports whether it went to a
// named leader.
func (l *Leaders) follow(leader, failed string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := slices.Index(l.addrs, leader); i >= 0 && leader != failed {
		l.mu.cur = i
		return true
	}
	if l.addrs[l.mu.cur] == failed {
		l.mu.cur = (l.mu.cur + 1) % len(l.addrs)
	}
	return false
}

// conn returns the connection to addr, dialling it if needed. A dial error
// wraps rpc.ErrUnavailable when the service does not answer.
func (l *Leaders) conn(addr string) (*rpc.Client, error) {
	l.mu.Lock()
	rc := l.mu.conns[addr]
	l.mu.Unlock()
	if rc != nil {
		return rc, nil
	}
	rc, err := rpc.Dial(addr, l.secret, l.opts)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.mu.conns[addr]; old != nil {
		rc.Close()
		return old, nil
	}
	l.mu.conns[addr] = rc
	return rc, nil
}

// Close closes the connections.
func (l *Leaders) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for a, rc := range l.mu.conns {
		rc.Close()
		delete(l.mu.conns, a)
	}
	return nil
}
