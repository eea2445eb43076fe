package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/meta/postgres"
	"poolfs/internal/mgmt"
)

// Leadership of several management services over one PostgreSQL database:
// each tries to take the lease row mgmtLease every leaseRenew; the one
// that holds it leads (runs the periodic jobs, answers calls, writes the
// map under the lease's fence), the others stand by and refuse calls
// naming the leader. A leader that cannot renew steps down before its
// lease runs out; one that stops cleanly gives the lease up at once.
const (
	mgmtLease  = "mgmt"
	leaseTTL   = 6 * time.Second
	leaseRenew = 2 * time.Second
)

// leaseDB is the database's lease (postgres.Engine).
type leaseDB interface {
	AcquireLease(ctx context.Context, name, holder, addr string, ttl time.Duration) (postgres.LeaseState, error)
	ReleaseLease(ctx context.Context, name, holder string) error
	LeaseFence(name, holder string, term uint64) meta.Fence
}

var _ leaseDB = (*postgres.Engine)(nil)

// leader runs one management service's side of the lease.
type leader struct {
	db     leaseDB
	svc    *mgmt.Service
	holder string // unique to this process
	addr   string // where the service answers
	name   string // the cluster's name, for the first map
	log    *slog.Logger
	// lead starts the leader's jobs; they stop when ctx ends.
	lead func(ctx context.Context, wg *sync.WaitGroup)
	// changed, if set, is told of each change of leadership.
	changed func(leading bool, term uint64, leaderAddr string)

	leading  bool
	term     uint64
	renewed  time.Time // when the last successful renewal was sent
	cancel   context.CancelFunc
	jobs     sync.WaitGroup
	lastSeen string // the leader address last told to svc
}

// newLeader returns the lease side of svc, answering at addr, whose holder
// id is holder (mgmtHolder).
func newLeader(db leaseDB, svc *mgmt.Service, holder, addr, name string, log *slog.Logger) *leader {
	return &leader{db: db, svc: svc, addr: addr, name: name, log: log, holder: holder}
}

// holderFile holds the lease holder id of the management service of a
// directory, made at its first start: a service restarted after a crash
// renews its own lease at once instead of waiting for it to expire. The
// directory's lock (taken by StartMgmt) keeps two services from sharing it.
const holderFile = "mgmt-id"

// mgmtHolder returns the holder id of dir's management service, making it
// if dir has none.
func mgmtHolder(dir string) (string, error) {
	p := filepath.Join(dir, holderFile)
	if b, err := os.ReadFile(p); err == nil {
		if id := strings.TrimSpace(string(b)); len(id) == 32 {
			return id, nil
		}
		return "", fmt.Errorf("cluster: %s does not hold a management service id: remove it", p)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b)
	if err := writePrivate(p, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("cluster: write %s: %w", p, err)
	}
	return id, nil
}

// run keeps trying for the lease until ctx ends, then stops the jobs and
// gives the lease up if it holds it.
func (l *leader) run(ctx context.Context) {
	t := time.NewTicker(leaseRenew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.stepDown("stopping", "")
			rctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if err := l.db.ReleaseLease(rctx, mgmtLease, l.holder); err != nil {
				l.log.Warn("give up the management lease", "err", err)
			}
			cancel()
			return
		case <-t.C:
			l.step(ctx)
		}
	}
}

// step takes or renews the lease once and acts on the outcome.
func (l *leader) step(ctx context.Context) {
	sent := time.Now()
	actx, cancel := context.WithTimeout(ctx, leaseRenew)
	st, err := l.db.AcquireLease(actx, mgmtLease, l.holder, l.addr, leaseTTL)
	cancel()
	switch {
	case err != nil:
		if l.leading && time.Since(l.renewed) > leaseTTL-leaseRenew {
			l.stepDown("cannot renew the lease", "")
		}
		if ctx.Err() == nil {
			l.log.Warn("management lease", "err", err)
		}
	case st.Held && l.leading && st.Term == l.term:
		l.renewed = sent
	case st.Held:
		if l.leading {
			l.stepDown("lease taken again in a new term", "")
		}
		l.renewed = sent
		if err := l.takeOver(ctx, st.Term); err != nil {
			l.log.Error("take over as leader", "err", err)
			l.svc.Follow("")
		}
	default:
		who := ""
		if st.Valid {
			who = st.Addr
		}
		l.stepDown("another service holds the lease", who)
	}
}

// takeOver makes the service the leader of term: it writes only under the
// lease's fence, reads the map as the database holds it (storing the
// first one if there is none) and starts the jobs.
func (l *leader) takeOver(ctx context.Context, term uint64) error {
	fence := l.db.LeaseFence(mgmtLease, l.holder, term)
	if _, err := l.svc.Lead(ctx, fence); errors.Is(err, meta.ErrNotFound) {
		_, err = l.svc.Update(ctx, func(m *clustermap.Map) error {
			m.Name = l.name
			return nil
		})
		if err != nil {
			return fmt.Errorf("store the first map: %w", err)
		}
	} else if err != nil {
		return err
	}
	l.leading, l.term = true, term
	jctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	l.lead(jctx, &l.jobs)
	l.log.Info("management service leads", "term", term)
	if l.changed != nil {
		l.changed(true, term, l.addr)
	}
	return nil
}

// stepDown stops the leader's jobs, if it leads, and makes the service a
// standby of leaderAddr.
func (l *leader) stepDown(why, leaderAddr string) {
	if l.leading {
		l.svc.Follow(leaderAddr) // no map write from here on
		l.cancel()
		l.jobs.Wait()
		l.leading = false
		l.log.Warn("management service stands by", "why", why, "leader", leaderAddr)
		if l.changed != nil {
			l.changed(false, l.term, leaderAddr)
		}
		l.lastSeen = leaderAddr
		return
	}
	l.svc.Follow(leaderAddr)
	if leaderAddr != l.lastSeen && l.changed != nil {
		l.changed(false, 0, leaderAddr)
	}
	l.lastSeen = leaderAddr
}
