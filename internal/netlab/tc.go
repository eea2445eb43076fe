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
func (h *Host) LimitRate(bitsPerSec int64) error {
	if bitsPerSec <= 0 {
		return fmt.Errorf("netlab: rate %d bit/s: want > 0", bitsPerSec)
	}
	rate := strconv.FormatInt(bitsPerSec, 10) + "bit"
	if err := h.RateLimit(rate); err != nil {
		return err
	}
	// The bucket holds 10 ms of traffic (at least a few full frames), and
	// a packet waits at most 50 ms for tokens before it is dropped.
	burst := max(bitsPerSec/8/100, 16<<10)
	if err := tc("-n", h.lab.sw, "qdisc", "replace", "dev", h.port, "root", "tbf",
		"rate", rate, "burst", strconv.FormatInt(burst, 10), "latency", "50ms"); err != nil {
		return fmt.Errorf("netlab: host %s: %w", h.Name, err)
	}
	return nil
}

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
