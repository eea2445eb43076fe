package cluster

import (
	"strings"
	"testing"
	"time"

	"poolfs/internal/identity"
)

// The management service warns of a node whose latest certificate is in
// the last sixth of its lifetime (its renewal is failing), not of one
// that renewed, and forgets nodes that stopped calling.
func TestCertWatchWarnsOfOverdueRenewal(t *testing.T) {
	ca, err := identity.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _ := identity.NewKey()
	const lifetime = 60 * 24 * time.Hour
	now := time.Unix(1_800_000_000, 0)
	cert := func(name string, left time.Duration) *identity.Cert {
		c, err := ca.Issue(name, identity.RoleServer, 1, now.Add(left), pub)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	w := newCertWatch(lifetime)
	w.saw(cert("s1", 5*24*time.Hour), now)  // overdue
	w.saw(cert("s2", 5*24*time.Hour), now)  // overdue, but renewed:
	w.saw(cert("s2", 59*24*time.Hour), now) // the later expiry counts
	w.saw(cert("s3", 30*24*time.Hour), now) // due, renewing in time
	w.saw(nil, now)
	notes := w.notes(now)
	if len(notes) != 1 || !strings.Contains(notes[0], "s1") || !strings.Contains(notes[0], "120h0m0s") {
		t.Fatalf("notes: %q, want one about s1 expiring in 120h", notes)
	}
	if notes := w.notes(now.Add(certSeenFor + time.Second)); len(notes) != 0 {
		t.Fatalf("notes after the nodes stopped calling: %q", notes)
	}
}
