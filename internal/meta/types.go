package meta

import (
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Ino is an inode number. Inode numbers are never reused.
type Ino uint64

// RootIno is the inode of the root directory, created by Store.Init.
const RootIno Ino = 1

// FileType is the kind of an inode.
type FileType uint8

// File types.
const (
	TypeFile FileType = iota + 1
	TypeDir
	TypeSymlink
	TypeFIFO
	TypeSocket
	TypeChar
	TypeBlock
)

var typeNames = [...]string{"?", "file", "dir", "symlink", "fifo", "socket", "char", "block"}

func (t FileType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

func (t FileType) valid() bool { return t >= TypeFile && t <= TypeBlock }

// Limits on input. Names and targets come from the network.
const (
	MaxNameLen   = 255  // bytes in one path component
	MaxTargetLen = 4096 // bytes in a symlink target
	MaxDrives    = 256  // k+m
	PermMask     = 07777
)

// Layout says where and how a file's stripes are stored. A directory's
// Layout is the default for children created in it.
type Layout struct {
	Pool   uint32
	K, M   int    // data and parity fragments per stripe
	Unit   uint32 // bytes per data fragment (stripe unit)
	Mirror bool   // K must be 1; n copies = 1+M
}

// Validate rejects layouts the stripe code cannot use.
func (l Layout) Validate() error {
	switch {
	case l.K < 1 || l.M < 0 || l.K+l.M > MaxDrives:
		return fmt.Errorf("layout %d+%d: %w", l.K, l.M, ErrInvalid)
	case l.Unit == 0:
		return fmt.Errorf("layout unit 0: %w", ErrInvalid)
	case l.Mirror && l.K != 1:
		return fmt.Errorf("mirror layout with k=%d: %w", l.K, ErrInvalid)
	}
	return nil
}

// StripeBytes is the number of user bytes one stripe holds (K*Unit).
func (l Layout) StripeBytes() uint64 { return uint64(l.K) * uint64(l.Unit) }

// Width is the number of fragments (drives) per stripe.
func (l Layout) Width() int { return l.K + l.M }

// Attr is the attributes of an inode.
type Attr struct {
	Ino      Ino
	Type     FileType
	Mode     uint32 // permission bits incl. setuid/setgid/sticky (PermMask)
	Uid, Gid uint32
	Nlink    uint32
	Size     uint64
	// Stored is, for a regular file, the user bytes its committed stripes
	// hold (the sum of their Len): what st_blocks reports, so a sparse
	// file shows the stripes written, not its size. Data bytes, not raw
	// ones (parity and mirror copies are the pool's cost, as statfs
	// reports usable capacity). For a file whose stripes were last
	// changed before the count existed, Size.
	Stored              uint64
	Atime, Mtime, Ctime int64 // unix ns
	Rdev                uint32
	Layout              Layout // file: its layout; dir: default for children
	Target              string // symlink
}

// Dirent is one directory entry.
type Dirent struct {
	Name string
	Ino  Ino
	Type FileType
}

// StripeRec is the committed record of one stripe of a file.
type StripeRec struct {
	Stripe    uint64
	Gen       uint64 // > 0, grows with every commit of the stripe
	PG        uint32
	Len       uint32 // user bytes in the stripe
	ShardSize uint32
	Drives    []uint32 // k+m drive ids, fragment i on Drives[i]
	// K is the number of data fragments of this stripe; the others of
	// Drives are parity, so the stripe's scheme is K+(len(Drives)-K). A
	// stripe may be narrower than its file's layout (a small file's mirrored
	// stripe 0 is 1+M). 0 means "the file layout's K": records committed
	// before stripes carried their own scheme. Use Scheme.
	K int
	// Deltas are the delta extents laid over this generation, in
	// commit order (deltas.go): filled by Store.Stripes, never stored in
	// the record. The stripe's content is its fragments' bytes with each
	// extent's bytes copied over them in turn.
	Deltas []Delta `json:",omitempty"`
	// Sum is the summary of the extents in place of Deltas, filled by
	// Store.StripeHeads (nil: no extents); never stored in the record.
	// Use DeltaSum, which reads either.
	Sum *DeltaSummary `json:",omitempty"`
}

// Scheme returns the stripe's data and parity fragment counts, taking K
// from layoutK when the record predates per-stripe schemes (K == 0).
func (r StripeRec) Scheme(layoutK int) (k, m int) {
	k = r.K
	if k == 0 {
		k = layoutK
	}
	return k, len(r.Drives) - k
}

// fits checks a record against its file's layout: a stripe has the
// layout's scheme or a narrower one (at least one data fragment, no more
// drives than the layout, no more parity than it has drives), and holds at
// most its data fragments' worth of the layout's unit.
func (r StripeRec) fits(l Layout) error {
	k, m := r.Scheme(l.K)
	if k < 1 || m < 0 || k+m > l.Width() || uint64(r.Len) > uint64(k)*uint64(l.Unit) ||
		(r.K == 0 && len(r.Drives) != l.Width()) {
		return fmt.Errorf("stripe %d: %d+%d on %d drives, len %d for layout %d+%d: %w",
			r.Stripe, k, m, len(r.Drives), r.Len, l.K, l.M, ErrInvalid)
	}
	return nil
}

// Mirrored reports whether the stripe is a mirror: one data fragment whose
// parity fragments are copies of it.
func (r StripeRec) Mirrored(layoutK int) bool {
	k, m := r.Scheme(layoutK)
	return k == 1 && m > 0
}

// StripeCommit is one stripe of a CommitStripes call.
type StripeCommit struct {
	Rec    StripeRec
	OldGen uint64 // generation the writer read; 0 = expects no stripe
	// Deltas is the sequence number of the last delta extent of the
	// stripe whose bytes Rec holds (the writer read the stripe with its
	// extents); a stripe with a later extent is a conflict. FoldAll: Rec
	// replaces the stripe whole, whatever extents it has. 0: the writer
	// saw no extents. The commit deletes the stripe's extents.
	Deltas uint64
}

// FoldAll in StripeCommit.Deltas says the new generation replaces the
// stripe's content whole (a full-stripe write), extents included.
const FoldAll uint64 = math.MaxUint64

// StripeRef names one committed stripe generation (an entry of the PG index).
type StripeRef struct {
	Ino    Ino
	Stripe uint64
	Gen    uint64
}

// GCItem is a stripe generation whose fragments are garbage.
type GCItem struct {
	Seq       uint64
	Ino       Ino
	Stripe    uint64
	Gen       uint64
	Drives    []uint32
	ShardSize uint32
}

// Event is one entry of the cluster event log.
type Event struct {
	Seq      uint64 // assigned by AppendEvent, ascending in commit order
	Time     int64  // unix ns; 0 in AppendEvent = now
	Kind     string // e.g. "drive.failed", "rebuild.done"
	Subject  string // e.g. "d07", "pool/0"
	Message  string
	Duration int64 // ns, for events that end something
}

// SetAttrMask selects the fields of SetAttr to change.
type SetAttrMask uint32

// SetAttr mask bits.
const (
	SetMode SetAttrMask = 1 << iota
	SetUid
	SetGid
	SetSize
	SetAtime
	SetMtime
	SetAtimeNow // atime = Options.Clock(); overrides SetAtime
	SetMtimeNow // mtime = Options.Clock(); overrides SetMtime
	// SetKillSuidGid clears S_ISUID, and S_ISGID if the group may
	// execute, of a non-directory, after any SetMode: what a write,
	// truncate or chown by a caller without CAP_FSETID does to a file
	// (FUSE_HANDLE_KILLPRIV_V2). Decided on the stored mode, inside the
	// transaction.
	SetKillSuidGid
)

// SetAttr is the input of Store.Setattr.
type SetAttr struct {
	Valid        SetAttrMask
	Mode         uint32
	Uid, Gid     uint32
	Size         uint64
	Atime, Mtime int64
}

// RenameFlags are the flags of renameat2(2).
type RenameFlags uint32

// Rename flags.
const (
	RenameNoReplace RenameFlags = 1 << iota // fail with ErrExist if the target exists
	RenameExchange                          // atomically swap source and target (both must exist)
)

// Options configures a Store. The zero value is usable.
type Options struct {
	Clock  func() time.Time // default time.Now
	Logger *slog.Logger     // default: discard
}

func validName(name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("name of %d bytes: %w", len(name), ErrNameTooLong)
	}
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("name %q: %w", name, ErrInvalid)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' || name[i] == 0 {
			return fmt.Errorf("name %q: %w", name, ErrInvalid)
		}
	}
	return nil
}
