package fusefs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// DefaultReadahead is the kernel readahead a mount asks for: enough for
// the kernel to keep several 1 MiB READ requests in flight, which the
// File's stripe readahead then answers from memory.
const DefaultReadahead = 16 << 20

// SetReadahead sets the kernel's readahead window for the FUSE file system
// mounted on dir (/sys/class/bdi/MAJ:MIN/read_ahead_kb). FUSE caps the
// window a file system can ask for at mount time (MaxReadAhead) to 128 KiB,
// so sequential buffered reads would otherwise reach the file system one
// synchronous request at a time. Needs root; the error says why it failed.
func SetReadahead(dir string, bytes int) error {
	// The kernel sets the window when it processes the reply to INIT, which
	// may come after the mount returned; a STATFS request waits for it.
	var sfs unix.Statfs_t
	_ = unix.Statfs(dir, &sfs)
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("fusefs: readahead of %s: %w", dir, err)
	}
	p := filepath.Join("/sys/class/bdi", fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)), "read_ahead_kb")
	if err := os.WriteFile(p, []byte(strconv.Itoa(bytes>>10)), 0); err != nil {
		return fmt.Errorf("fusefs: readahead of %s: %w", dir, err)
	}
	return nil
}
