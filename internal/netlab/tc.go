package netlab

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// LimitRate makes the host's link a link of bitsPerSec in each direction,
// as a slower network card would: RateLimit's token bucket (tc tbf) on the
// host's end limits what it sends, and one of the same rate on the
// switch's end limits what it receives. A second call replaces the
// limits. It needs tc(8) from iproute2 and the kernel's sch_tbf.
//
// The switch's end queues up to PortQueue bytes (or 50 ms of traffic, if
// that is more) before it drops, as a switch port's buffer does. A queue
// sized in time only would hold about 140 full frames at 32 Mbit/s, fewer
// than the minimum windows of the dozens of TCP connections that converge
// on one storage server when clients write to it: every connection then
// loses packets all the time, retransmissions are lost too, and TCP's
// retransmission timeouts, doubled each time, stall writes for seconds to
// minutes. A real port of a data-centre switch holds hundreds of
// kilobytes to megabytes, at link rates a thousand times higher; the
// host's own end drops nothing TCP does not see at once (its queue is
// local to the sender).
func (h *Host) LimitRate(bitsPerSec int64) error {
	if bitsPerSec <= 0 {
		return fmt.Errorf("netlab: rate %d bit/s: want > 0", bitsPerSec)
	}
	rate := strconv.FormatInt(bitsPerSec, 10) + "bit"
	if err := h.RateLimit(rate); err != nil {
		return err
	}
	// The bucket holds 10 ms of traffic (at least a few full frames).
	burst := max(bitsPerSec/8/100, 16<<10)
	limit := max(PortQueue, bitsPerSec/8/20+burst)
	if err := tc("-n", h.lab.sw, "qdisc", "replace", "dev", h.port, "root", "tbf",
		"rate", rate, "burst", strconv.FormatInt(burst, 10), "limit", strconv.FormatInt(limit, 10)); err != nil {
		return fmt.Errorf("netlab: host %s: %w", h.Name, err)
	}
	return nil
}

// PortQueue is the bytes a switch port of a rate-limited link (LimitRate)
// queues for its host at least: about 700 full frames.
const PortQueue = 1 << 20

// tc runs tc(8).
func tc(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("tc", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("tc %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
