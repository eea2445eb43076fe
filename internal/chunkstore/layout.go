package chunkstore

import (
	"fmt"
	"strconv"
	"strings"

	"poolfs/internal/erasure"
)

// On-disk layout (see doc.go):
//
//	<dir>/LOCK                                   flock(2) held while open
//	<dir>/frags/<fanout>/<ino>.<stripe>.<gen>.<index>
//	<dir>/frags/<fanout>/tmp-<name>-<seq>        in-flight write (removed by Open)
//
// <fanout> is two lower-case hex digits of a hash of (ino, stripe/256), so
// runs of consecutive stripes of a file sit together (see stripeRun) and the
// fragments of one huge file still spread over all 256 directories; <ino> and <gen>
// are lower-case hex, <stripe> and <index> decimal, all without leading zeros.

const (
	fragsDir   = "frags"
	lockFile   = "LOCK"
	tmpPrefix  = "tmp-"
	fanoutDirs = 256
)

// Modes of everything a drive creates: its owner's only. Fragments hold
// the cluster's file data, so a drive readable by other local users would
// bypass every file's permissions; and another user able to open LOCK
// could flock it and keep the drive from opening.
const (
	dirMode  = 0o700
	fileMode = 0o600
)

// stripeRun: runs of 2^stripeRun consecutive stripes of a file share a
// fanout directory, so the file system allocates their fragments close
// together and a sequential read of a file reads each drive mostly
// sequentially; different files and runs still spread over all directories.
const stripeRun = 8

// fanout returns the directory number (0..255) of a fragment.
func fanout(key erasure.FragmentKey) int {
	h := key.Ino*0x9E3779B97F4A7C15 ^ (key.Stripe>>stripeRun)*0xC2B2AE3D27D4EB4F
	h ^= h >> 31
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 29
	return int(h >> 56)
}

// fanoutName is the directory name of fanout directory i.
func fanoutName(i int) string { return fmt.Sprintf("%02x", i) }

// fragName is the file name of a fragment inside its fanout directory.
func fragName(key erasure.FragmentKey) string {
	b := make([]byte, 0, 48)
	b = strconv.AppendUint(b, key.Ino, 16)
	b = append(b, '.')
	b = strconv.AppendUint(b, key.Stripe, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, key.Gen, 16)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(key.Index), 10)
	return string(b)
}

// parseFragName parses a fragment file name strictly: it accepts exactly the
// names fragName produces (no leading zeros, no upper case, no signs, no
// extra fields) and reports ok=false for anything else. It never panics.
func parseFragName(name string) (key erasure.FragmentKey, ok bool) {
	parts := strings.Split(name, ".")
	if len(parts) != 4 {
		return key, false
	}
	var err error
	if key.Ino, err = strconv.ParseUint(parts[0], 16, 64); err != nil {
		return key, false
	}
	if key.Stripe, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return key, false
	}
	if key.Gen, err = strconv.ParseUint(parts[2], 16, 64); err != nil {
		return key, false
	}
	idx, err := strconv.ParseUint(parts[3], 10, 8)
	if err != nil {
		return key, false
	}
	key.Index = uint8(idx)
	// Round trip rejects leading zeros, upper-case hex, "+" signs, "0x"...
	if fragName(key) != name {
		return key, false
	}
	return key, true
}

// parseFragPath parses a name found in fanout directory dirIdx; a valid
// name in the wrong directory is foreign too.
func parseFragPath(dirIdx int, name string) (erasure.FragmentKey, bool) {
	key, ok := parseFragName(name)
	if !ok || fanout(key) != dirIdx {
		return erasure.FragmentKey{}, false
	}
	return key, true
}
