package postgres

import "sync/atomic"

// Stats counts the engine's work since Open: what a metadata operation
// costs on the wire, and how often concurrent writers collide.
type Stats struct {
	RoundTrips uint64 // requests sent to the server and waited for (a batch is one)
	Statements uint64 // SQL statements sent (BEGIN and COMMIT included)
	Updates    uint64 // Update calls that committed
	Groups     uint64 // transactions that committed several Update calls
	Retries    uint64 // Update attempts run again after a conflict
	// OneTrip counts the transactions (of one call or a group) that
	// committed in one round trip, their functions run from memory;
	// Stale those whose check found a value changed (they then ran as
	// usual). speculate.go.
	OneTrip, Stale uint64
}

type counters struct {
	roundTrips, statements, updates, groups, retries, oneTrip, stale atomic.Uint64
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{
		RoundTrips: e.stats.roundTrips.Load(),
		Statements: e.stats.statements.Load(),
		Updates:    e.stats.updates.Load(),
		Groups:     e.stats.groups.Load(),
		Retries:    e.stats.retries.Load(),
		OneTrip:    e.stats.oneTrip.Load(),
		Stale:      e.stats.stale.Load(),
	}
}

// sent counts one round trip carrying n statements.
func (e *Engine) sent(n int) {
	e.stats.roundTrips.Add(1)
	e.stats.statements.Add(uint64(n))
}
