package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"poolfs/internal/fusefs"
)

// haltPollParam is the guest halt-polling window of cpuidle-haltpoll.
const haltPollParam = "sys/module/haltpoll/parameters/guest_halt_poll_ns"

// idleHaltHint returns a note for the operator of a mount on a virtual
// machine whose idle CPUs halt at once (the cpuidle-haltpoll driver with a
// polling window of 0): every FUSE request then wakes a halted CPU, a VM
// exit, which on our VMs cost metadata rates a third or more (README,
// Benchmarks).
// Anywhere else it returns "". root is "/" but for tests.
func idleHaltHint(root string) string {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	if read("sys/devices/system/cpu/cpuidle/current_driver") != "haltpoll" || read(haltPollParam) != "0" {
		return ""
	}
	return "poolfs: note: this VM's idle CPUs halt at once (haltpoll guest_halt_poll_ns=0), so every FUSE request " +
		"over /dev/fuse wakes a halted CPU; metadata rates rise by half or more with FUSE over io_uring (Linux 6.14+, " +
		"root: --uring) or with `echo 200000 > /" + haltPollParam + "` (root; see README)"
}

// announceMount prints that a mount is up, how requests reach it, and the
// hint, if any: with io_uring requests stay on the CPU that made them, so
// halting idle CPUs costs little.
// It prints all of it at once, so a script that sees the first line sees
// the rest.
func announceMount(msg string, srv *fusefs.Server) {
	if srv.URing() {
		msg += "\npoolfs: FUSE requests come over per-CPU io_uring queues"
	} else if hint := idleHaltHint("/"); hint != "" {
		msg += "\n" + hint
	}
	fmt.Println(msg)
}
