package mgmt

import (
	"fmt"
	"time"
)

// Health of a pool or cluster: the redundancy of the data, first. A drive
// that failed but whose data was rebuilt leaves the pool healthy (with a
// note to replace it); a drive down in a pool with two parity fragments
// leaves it degraded, not critical.
const (
	HealthOK       = "healthy"   // every stripe has all its fragments
	HealthDegraded = "degraded"  // some stripes miss fragments; each still survives another failure
	HealthCritical = "critical"  // some stripes are one more failure away from loss, or unreadable until a drive returns
	HealthDataLoss = "data loss" // some stripes lost more fragments than parity covers
)

// healthRank orders the health values, best first.
var healthRank = map[string]int{HealthOK: 0, HealthDegraded: 1, HealthCritical: 2, HealthDataLoss: 3}

func worse(a, b string) string {
	if healthRank[b] > healthRank[a] {
		return b
	}
	return a
}

// DownDrive is a drive that stopped answering, in HealthInput.
type DownDrive struct {
	ID        string
	GraceLeft time.Duration // declared failed when it reaches 0
}

// HealthInput is what the health rule of one pool looks at.
type HealthInput struct {
	M int // parity fragments of the pool's scheme
	// Current reports that the stripe counts come from a scan at the
	// pool's current drive states. When false (a drive changed state and
	// the rescan has not finished) health is judged from the drives.
	Current bool
	// Stripe counts of the scan (recovery.Health and recovery.Plan).
	Stripes, Degraded, Critical, Lost, Waiting, Blocked int
	// LostFiles is how many files the Lost stripes belong to.
	LostFiles int
	// Failed drives of the pool not yet replaced; Down ones not answering.
	Failed []string
	Down   []DownDrive
	// Rebuild running: its kind (rebuild or rebalance), percent, rate
	// (bytes/s) and ETA; Incomplete says why the last pass could not
	// restore every stripe ("" if it could).
	Active     bool
	Kind       string
	Percent    float64
	Rate       float64
	ETA        time.Duration
	Incomplete string
	// Preservation is the rebuild capacity the pool reserves and
	// PreservationLeft what of it the drives in service still offer
	// (bytes; negative when the data no longer fits without it).
	Preservation, PreservationLeft int64
}

// Assessment is the verdict of the health rule: the health and the lines
// that explain it and say what to do, most urgent first.
type Assessment struct {
	Health string
	Notes  []string
}

// Assess is the health rule. It is pure: the same input gives the same
// verdict.
//
//   - data loss: a stripe lost more fragments than parity covers;
//   - critical: a stripe misses M fragments (one more failure loses it), or
//     is unreadable until a down drive returns;
//   - degraded: a stripe misses fragments but survives another failure;
//   - healthy: every stripe has all its fragments, whatever the drives'
//     states (a failed drive whose data was rebuilt asks to be replaced in
//     a note, without lowering the health).
//
// Until the stripes are scanned at the current drive states (Current is
// false) the drives decide: as many drives not in service as parity
// covers is critical, fewer degraded.
func Assess(in HealthInput) Assessment {
	a := Assessment{Health: HealthOK}
	switch {
	case in.Lost > 0:
		a.Health = HealthDataLoss
	case in.Critical > 0 || in.Waiting > 0:
		a.Health = HealthCritical
	case in.Degraded > 0:
		a.Health = HealthDegraded
	}
	if !in.Current {
		switch away := len(in.Failed) + len(in.Down); {
		case away > 0 && away >= in.M:
			a.Health = worse(a.Health, HealthCritical)
		case away > 0:
			a.Health = worse(a.Health, HealthDegraded)
		}
	}
	note := func(format string, args ...any) { a.Notes = append(a.Notes, fmt.Sprintf(format, args...)) }
	if in.Lost > 0 {
		note("DATA LOSS: %d stripes of %d files lost more fragments than parity covers (listed below)", in.Lost, in.LostFiles)
	}
	if in.Waiting > 0 {
		note("%d stripes are unreadable until a down drive returns", in.Waiting)
	}
	if in.Critical > 0 {
		note("%d stripes are one more drive failure away from data loss", in.Critical)
	}
	if in.Degraded > 0 {
		note("%d stripes miss fragments but survive another failure", in.Degraded)
	}
	if !in.Current && len(in.Failed)+len(in.Down) > 0 {
		note("stripes not yet checked at the current drive states")
	}
	for _, id := range in.Failed {
		note("drive %s failed: replace it (poolfs drive replace %s)", id, id)
	}
	for _, d := range in.Down {
		note("drive %s down: declared failed and rebuilt in %v unless it answers", d.ID, d.GraceLeft.Round(time.Second))
	}
	if in.Active {
		eta := "unknown"
		if in.ETA > 0 {
			eta = in.ETA.Round(time.Second).String()
		}
		note("%s running: %.1f%%, %s/s, ETA %s", in.Kind, in.Percent, human(int64(in.Rate)), eta)
	}
	if in.Incomplete != "" {
		note("rebuild cannot finish: %s", in.Incomplete)
	}
	if in.Blocked > 0 && in.Incomplete == "" {
		note("%d stripes have no drive to rebuild onto: add or replace a drive", in.Blocked)
	}
	if in.Preservation > 0 || in.PreservationLeft < 0 {
		switch {
		case in.PreservationLeft <= 0:
			note("preservation capacity used up: rebuilds now take space promised to data; replace or add drives")
		case in.PreservationLeft < in.Preservation:
			note("preservation capacity left: %s of %s", human(in.PreservationLeft), human(in.Preservation))
		}
	}
	return a
}
