package recovery

import "time"

// The storage servers' rule for admitting rebuild I/O on a drive (the
// rebuild gate of internal/storage), without clock or locks, so that the
// simulation of a rebuild (internal/plan) admits I/O exactly as the
// servers do:
//
//   - An idle drive (no client I/O now or lately) takes GateIdleDepth
//     rebuild I/Os at once, whatever the share: priority matters only where
//     clients compete.
//   - A busy drive takes one rebuild I/O at a time, at most one per slot:
//     time is cut into slots of svc/share aligned on the clock (the same on
//     every drive), and an I/O may start only in the first svc/2 of a
//     slot, or, if the I/O of the slot before ran over into this one (it
//     queued behind client I/O), as soon as it ends. Without that, a
//     priority whose slot is shorter than a rebuild I/O plus the client
//     I/O queued ahead of it lost every other slot, and high (svc/0.7)
//     rebuilt no faster than medium (svc/0.4) under saturating load.

// GateIdleDepth is the rebuild I/Os an idle drive takes at once.
const GateIdleDepth = 2

// GateDrive is one drive's state as the gate rule sees it. Times are
// clock times (time since any fixed origin, the same for every drive).
type GateDrive struct {
	Busy     bool          // clients use the drive
	InFlight int           // rebuild I/Os admitted and not ended
	Started  time.Duration // when its last rebuild I/O was admitted
	Ended    time.Duration // when its last rebuild I/O ended
}

// GateAdmit reports whether one more rebuild I/O may start on drive d at
// now, given the mean rebuild I/O time svc and the share of a busy drive's
// time that rebuild may take (0 or 1 or more: no limit; svc 0: not known
// yet, no limit). If it may not, next is the start of the slot at which it
// next may, or 0 if only the end of a rebuild I/O in flight can change the
// answer. The caller may start an I/O that stands for several slots by
// setting Started to the start of the last slot it takes.
func GateAdmit(d GateDrive, now, svc time.Duration, share float64) (ok bool, next time.Duration) {
	if !d.Busy || share <= 0 || share >= 1 || svc <= 0 {
		return d.InFlight < GateIdleDepth, 0
	}
	if d.InFlight > 0 {
		return false, 0
	}
	period := GatePeriod(svc, share)
	phase := now % period
	start := now - phase                                    // this slot's
	overran := d.Started >= start-period && d.Ended > start // the last slot's I/O ended in this one
	if d.Started < start && (phase <= svc/2 || overran) {
		return true, 0 // the first rebuild I/O of this slot
	}
	next = start + period
	for d.Started >= next { // an I/O standing for several slots
		next += period
	}
	return false, next
}

// GatePeriod is the slot length of the gate on busy drives: svc/share.
func GatePeriod(svc time.Duration, share float64) time.Duration {
	return max(1, time.Duration(float64(svc)/share))
}
