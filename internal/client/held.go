package client

import (
	"sync/atomic"
	"time"
)

// Held is how often and how long writers were held back for one reason.
type Held struct {
	Waits uint64        // writes that waited
	Wait  time.Duration // their time waiting, in all
}

// HeldStats says what held this client's writers back since it began.
type HeldStats struct {
	// Garbage: writes over committed generations that waited for the
	// collector's queue to fall within Options.GarbageLimit (garbage.go).
	Garbage Held
	// Folds: writes that waited for a file's folds while its delta log
	// was more than an eighth over its budget (foldBackpressureLocked).
	Folds Held
}

// Held returns what held this client's writers back so far. A rate of
// random writes far below the drives' shows here when the collector or the
// folds are what it waits on.
func (c *Client) Held() HeldStats {
	return HeldStats{Garbage: c.heldGarbage.load(), Folds: c.heldFolds.load()}
}

// heldCounter counts the waits of one reason.
type heldCounter struct {
	waits atomic.Uint64
	ns    atomic.Int64
}

// add counts one wait that began at start.
func (h *heldCounter) add(start time.Time) {
	h.waits.Add(1)
	h.ns.Add(int64(time.Since(start)))
}

func (h *heldCounter) load() Held {
	return Held{Waits: h.waits.Load(), Wait: time.Duration(h.ns.Load())}
}
