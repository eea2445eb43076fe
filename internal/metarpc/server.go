package metarpc

import (
	"context"
	"encoding/json"
	"fmt"

	"poolfs/internal/meta"
	"poolfs/internal/rpc"
)

// Errors is the table of meta sentinels that cross the wire.
func Errors() *rpc.ErrorTable { return rpc.NewErrorTable(ErrorCodes()...) }

// ErrorCodes lists the wire codes and sentinels of Errors, for servers that
// combine several services' tables.
func ErrorCodes() []any {
	return []any{
		"meta.expired", meta.ErrExpired, // before notfound, which it wraps
		"meta.notfound", meta.ErrNotFound,
		"meta.exist", meta.ErrExist,
		"meta.notdir", meta.ErrNotDir,
		"meta.isdir", meta.ErrIsDir,
		"meta.notempty", meta.ErrNotEmpty,
		"meta.invalid", meta.ErrInvalid,
		"meta.nametoolong", meta.ErrNameTooLong,
		"meta.conflict", meta.ErrConflict,
		"meta.poolfull", meta.ErrPoolFull,
		"meta.perm", meta.ErrPerm,
		"meta.corrupt", meta.ErrCorrupt,
		"meta.storecorrupt", meta.ErrStoreCorrupt,
		"meta.nobackup", meta.ErrNoBackup,
		"meta.noxattr", meta.ErrNoXattr,
	}
}

// handle registers one typed method.
func handle[A any, R any](s *rpc.Server, name string, f func(ctx context.Context, a A) (R, error)) {
	s.Handle(name, func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a A
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: %s: bad arguments: %v", meta.ErrInvalid, name, err)
		}
		r, err := f(ctx, a)
		if err != nil {
			return nil, err
		}
		return &rpc.Response{Result: r}, nil
	})
}

type none struct{}

type inoArgs struct{ Ino meta.Ino }
type entryArgs struct {
	Parent meta.Ino
	Name   string
}
type createArgs struct {
	Parent               meta.Ino
	Name                 string
	Type                 meta.FileType
	Mode, Uid, Gid, Rdev uint32
	Target               string
}
type linkArgs struct {
	Ino       meta.Ino
	NewParent meta.Ino
	NewName   string
}
type renameArgs struct {
	OldParent meta.Ino
	OldName   string
	NewParent meta.Ino
	NewName   string
	Flags     meta.RenameFlags
}
type readdirArgs struct {
	Ino   meta.Ino
	After string
	Limit int
}
type setattrArgs struct {
	Ino meta.Ino
	In  meta.SetAttr
}
type layoutArgs struct {
	Ino    meta.Ino
	Layout meta.Layout
}
type stripesArgs struct {
	Ino         meta.Ino
	First, Last uint64
}
type deltasArgs struct {
	Ino   meta.Ino
	Logs  []meta.LogCommit
	Mtime int64
}
type foldArgs struct {
	Ino     meta.Ino
	Commits []meta.StripeCommit
}
type commitArgs struct {
	Ino     meta.Ino
	Commits []meta.StripeCommit
	NewSize uint64
	Mtime   int64
}
type poolArgs struct{ Pool uint32 }
type usage struct{ Used, Limit uint64 }
type gcBytesArgs struct{ Limit int }

// MaxGCBytesItems is the most items of the collector's queue one meta.GCBytes
// call counts: the count comes from the network.
const MaxGCBytesItems = 4096

// Register exposes st on s under the "meta." prefix.
func Register(s *rpc.Server, st *meta.Store) {
	registerSync(s, st)
	registerSessions(s, st)
	registerBackup(s, st)
	registerFsck(s, st)
	handle(s, "meta.Create", func(ctx context.Context, a createArgs) (meta.Attr, error) {
		return st.Create(ctx, a.Parent, a.Name, a.Type, a.Mode, a.Uid, a.Gid, a.Rdev, a.Target)
	})
	handle(s, "meta.Link", func(ctx context.Context, a linkArgs) (meta.Attr, error) {
		return st.Link(ctx, a.Ino, a.NewParent, a.NewName)
	})
	handle(s, "meta.Unlink", func(ctx context.Context, a entryArgs) (none, error) {
		return none{}, st.Unlink(ctx, a.Parent, a.Name)
	})
	handle(s, "meta.Rmdir", func(ctx context.Context, a entryArgs) (none, error) {
		return none{}, st.Rmdir(ctx, a.Parent, a.Name)
	})
	handle(s, "meta.Rename", func(ctx context.Context, a renameArgs) (none, error) {
		return none{}, st.Rename(ctx, a.OldParent, a.OldName, a.NewParent, a.NewName, a.Flags)
	})
	handle(s, "meta.Readdir", func(ctx context.Context, a readdirArgs) ([]meta.Dirent, error) {
		return st.Readdir(ctx, a.Ino, a.After, a.Limit)
	})
	handle(s, "meta.Setattr", func(ctx context.Context, a setattrArgs) (meta.Attr, error) {
		return st.Setattr(ctx, a.Ino, a.In)
	})
	handle(s, "meta.SetLayout", func(ctx context.Context, a layoutArgs) (none, error) {
		return none{}, st.SetLayout(ctx, a.Ino, a.Layout)
	})
	handle(s, "meta.Stripes", func(ctx context.Context, a stripesArgs) ([]meta.StripeRec, error) {
		return st.Stripes(ctx, a.Ino, a.First, a.Last)
	})
	handle(s, "meta.StripeHeads", func(ctx context.Context, a stripesArgs) ([]meta.StripeRec, error) {
		return st.StripeHeads(ctx, a.Ino, a.First, a.Last)
	})
	handle(s, "meta.CommitStripes", func(ctx context.Context, a commitArgs) (meta.Attr, error) {
		return st.CommitStripes(ctx, a.Ino, a.Commits, a.NewSize, a.Mtime)
	})
	handle(s, "meta.CommitDeltas", func(ctx context.Context, a deltasArgs) (meta.Attr, error) {
		return st.CommitDeltas(ctx, a.Ino, a.Logs, a.Mtime)
	})
	handle(s, "meta.FoldStripes", func(ctx context.Context, a foldArgs) (none, error) {
		return none{}, st.FoldStripes(ctx, a.Ino, a.Commits)
	})
	handle(s, "meta.DropStripes", func(ctx context.Context, a stripesArgs) (meta.Attr, error) {
		return st.DropStripes(ctx, a.Ino, a.First, a.Last)
	})
	handle(s, "meta.GCBytes", func(ctx context.Context, a gcBytesArgs) (map[uint32]int64, error) {
		if a.Limit <= 0 || a.Limit > MaxGCBytesItems {
			a.Limit = MaxGCBytesItems
		}
		return st.GCBytes(ctx, a.Limit)
	})
	handle(s, "meta.PoolUsage", func(ctx context.Context, a poolArgs) (usage, error) {
		u, l, err := st.PoolUsage(ctx, a.Pool)
		return usage{u, l}, err
	})
	registerFiles(s, st)
	registerMount(s, st)
}
