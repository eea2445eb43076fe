package metarpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"poolfs/internal/meta"
	"poolfs/internal/rpc"
)

// A backup crosses the wire in two steps: meta.Backup writes a consistent
// snapshot of the store (meta.Store.Backup) to a private temporary file on
// the server and returns its id and size; meta.BackupRead returns it in
// chunks of backupChunk bytes. The server keeps the snapshot open and
// unlinked, and forgets it after its last chunk was read or after
// backupTTL.
const (
	backupChunk = 8 << 20
	backupTTL   = 30 * time.Minute
)

type backupInfo struct {
	ID   string
	Size int64
}

type backupReadArgs struct {
	ID     string
	Offset int64
}

// snapshots are the backups being read, by id.
type snapshots struct {
	mu struct {
		sync.Mutex
		open map[string]*snapshot
	}
}

type snapshot struct {
	f       *os.File
	size    int64
	created time.Time
}

func registerBackup(s *rpc.Server, st *meta.Store) {
	sn := &snapshots{}
	sn.mu.open = map[string]*snapshot{}
	handle(s, "meta.Backup", func(ctx context.Context, _ none) (backupInfo, error) {
		return sn.take(ctx, st)
	})
	s.Handle("meta.BackupRead", func(ctx context.Context, req *rpc.Request) (*rpc.Response, error) {
		var a backupReadArgs
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return nil, fmt.Errorf("%w: meta.BackupRead: bad arguments: %v", meta.ErrInvalid, err)
		}
		b, err := sn.read(a.ID, a.Offset)
		if err != nil {
			return nil, err
		}
		return &rpc.Response{Result: none{}, Body: b}, nil
	})
}

func (sn *snapshots) take(ctx context.Context, st *meta.Store) (backupInfo, error) {
	dir, err := os.MkdirTemp("", "poolfs-meta-backup-")
	if err != nil {
		return backupInfo{}, fmt.Errorf("backup: %w", err)
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "meta.db")
	if err := st.Backup(ctx, p); err != nil {
		return backupInfo{}, err
	}
	f, err := os.Open(p)
	if err != nil {
		return backupInfo{}, fmt.Errorf("backup: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return backupInfo{}, fmt.Errorf("backup: %w", err)
	}
	id := make([]byte, 16)
	rand.Read(id) //nolint:errcheck // never fails
	info := backupInfo{ID: hex.EncodeToString(id), Size: fi.Size()}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	for k, o := range sn.mu.open {
		if time.Since(o.created) > backupTTL {
			o.f.Close()
			delete(sn.mu.open, k)
		}
	}
	sn.mu.open[info.ID] = &snapshot{f: f, size: info.Size, created: time.Now()}
	return info, nil
}

// read returns up to backupChunk bytes of snapshot id from off; the read
// that reaches the end forgets the snapshot.
func (sn *snapshots) read(id string, off int64) ([]byte, error) {
	sn.mu.Lock()
	o := sn.mu.open[id]
	sn.mu.Unlock()
	if o == nil {
		return nil, fmt.Errorf("backup %q: %w (expired or already read)", id, meta.ErrNotFound)
	}
	if off < 0 || off > o.size {
		return nil, fmt.Errorf("backup offset %d of %d: %w", off, o.size, meta.ErrInvalid)
	}
	b := make([]byte, min(backupChunk, o.size-off))
	if _, err := o.f.ReadAt(b, off); err != nil && err != io.EOF {
		return nil, fmt.Errorf("backup read: %w", err)
	}
	if off+int64(len(b)) == o.size {
		sn.mu.Lock()
		if sn.mu.open[id] == o {
			delete(sn.mu.open, id)
			o.f.Close()
		}
		sn.mu.Unlock()
	}
	return b, nil
}

// Backup writes a consistent snapshot of the service's store to w and
// returns its size. Errors wrap meta.ErrNoBackup for a store without a
// built-in backup (PostgreSQL).
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	info, err := call[backupInfo](ctx, c, "meta.Backup", none{})
	if err != nil {
		return 0, err
	}
	var off int64
	for off < info.Size {
		b, err := c.rc.CallBody(ctx, "meta.BackupRead", backupReadArgs{ID: info.ID, Offset: off}, nil, nil, nil)
		if err != nil {
			return off, err
		}
		if len(b) == 0 {
			return off, fmt.Errorf("backup: empty chunk at %d of %d bytes", off, info.Size)
		}
		if _, err := w.Write(b); err != nil {
			return off, err
		}
		off += int64(len(b))
	}
	return off, nil
}
