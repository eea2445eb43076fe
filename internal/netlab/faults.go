package netlab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Faults of a host's link beyond cutting it (LinkDown): packet loss and
// one-way partitions with nftables rules in the host's namespace, and a
// rate limit with a tc token bucket on its interface. Each rule lives in
// the host's namespace only, so it goes with the lab.

// nftTable is the nftables table of a host's fault rules.
const nftTable = "netlab"

// NeedTools skips t (fails it under CI=true) unless every tool is on the
// PATH: the faults of this file need nft (nftables) and tc (iproute2).
func NeedTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("netlab: needs %s: %v", tool, err)
			}
			t.Skipf("netlab: needs %s: %v", tool, err)
		}
	}
}

// Loss drops percent of the packets the host sends and of those it
// receives, each drawn at random (nft numgen random). It replaces the
// host's earlier loss and partition rules; 0 removes them.
func (h *Host) Loss(percent int) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("netlab: loss of %d%%: want 0 to 100", percent)
	}
	if err := h.ClearFilters(); err != nil || percent == 0 {
		return err
	}
	rule := fmt.Sprintf("numgen random mod 100 < %d drop", percent)
	return h.nft(nftRules(map[string][]string{"input": {rule}, "output": {rule}}))
}

// Block drops every packet the host sends to dst, and only those: dst's
// packets still reach the host (a one-way partition). It replaces the
// host's earlier loss and partition rules.
func (h *Host) Block(dst *Host) error {
	if err := h.ClearFilters(); err != nil {
		return err
	}
	return h.nft(nftRules(map[string][]string{"output": {"ip daddr " + dst.IP + " drop"}}))
}

// ClearFilters removes the host's loss and partition rules.
func (h *Host) ClearFilters() error {
	out, err := h.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		return fmt.Errorf("netlab: nft on %s: %v: %s", h.Name, err, out)
	}
	if !strings.Contains(string(out), "inet "+nftTable) {
		return nil
	}
	return h.nft("delete table inet " + nftTable + "\n")
}

// nftRules is an nft script making the table with one filter chain per
// hook (input, output) holding its rules.
func nftRules(chains map[string][]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", nftTable)
	for _, hook := range []string{"input", "output"} {
		rules, ok := chains[hook]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype filter hook %s priority 0; policy accept;\n", hook, hook)
		for _, r := range rules {
			fmt.Fprintf(&b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// nft runs an nft script in the host's namespace.
func (h *Host) nft(script string) error {
	cmd := h.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netlab: nft on %s: %v: %s", h.Name, err, out)
	}
	return nil
}

// RateLimit limits what the host sends to rate (tc's units: "20mbit") with
// a token bucket filter (tbf) on its interface; packets past its 50 ms
// queue are dropped, as on a congested link. It replaces an earlier limit.
func (h *Host) RateLimit(rate string) error {
	if rate == "" || strings.ContainsAny(rate, " \t\n") {
		return errors.New("netlab: rate limit: want a tc rate such as 20mbit")
	}
	out, err := h.Command("tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
		"rate", rate, "burst", "32kbit", "latency", "50ms").CombinedOutput()
	if err != nil {
		return fmt.Errorf("netlab: tc on %s: %v: %s", h.Name, err, out)
	}
	return nil
}

// ClearRateLimit removes the host's rate limit.
func (h *Host) ClearRateLimit() error {
	out, err := h.Command("tc", "qdisc", "del", "dev", "eth0", "root").CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No such file") && !strings.Contains(string(out), "Cannot delete qdisc with handle of zero") {
		return fmt.Errorf("netlab: tc on %s: %v: %s", h.Name, err, out)
	}
	return nil
}
