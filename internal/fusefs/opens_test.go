package fusefs

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"poolfs/internal/client"
	"poolfs/internal/meta"
)

// countingMeta counts opens per inode as the metadata service would.
type countingMeta struct {
	client.Meta // nil: only the methods below are called
	mu          sync.Mutex
	opens       map[meta.Ino]int
	calls       []string
}

func (m *countingMeta) add(ino meta.Ino, d int, call string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opens[ino] += d
	m.calls = append(m.calls, call)
}

func (m *countingMeta) Open(_ context.Context, ino meta.Ino) error {
	m.add(ino, 1, "open")
	return nil
}

func (m *countingMeta) Release(_ context.Context, ino meta.Ino) error {
	m.add(ino, -1, "release")
	return nil
}

func (m *countingMeta) ReleaseAll(_ context.Context, inos []meta.Ino) error {
	for _, ino := range inos {
		m.add(ino, -1, "releaseall")
	}
	return nil
}

func (m *countingMeta) CreateAttr(context.Context, meta.CreateArgs) (meta.Attr, meta.Attr, error) {
	panic("unused")
}

func (m *countingMeta) UnlinkAttr(context.Context, meta.Ino, string) (meta.Attr, error) {
	panic("unused")
}

func TestOpens(t *testing.T) {
	ctx := context.Background()
	m := &countingMeta{opens: map[meta.Ino]int{}}
	o := newOpens(m, slog.New(slog.DiscardHandler))
	if o.calls == nil {
		t.Fatal("mountCalls not found")
	}

	// A create's open is claimed without a call.
	m.add(1, 1, "createattr")
	o.noteOpened(1)
	if err := o.Open(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Release then Open again before the batch goes: no call at all.
	o.Release(ctx, 1)
	o.Open(ctx, 1)
	// A plain open calls the service.
	o.Open(ctx, 2)
	o.Release(ctx, 1)
	o.Release(ctx, 2)
	o.drain()
	// A create whose open was never claimed is given back.
	m.add(3, 1, "createattr")
	o.noteOpened(3)
	o.unclaim(ctx, 3)
	o.drain()

	m.mu.Lock()
	defer m.mu.Unlock()
	for ino, n := range m.opens {
		if n != 0 {
			t.Errorf("inode %d: open count %d after all releases", ino, n)
		}
	}
	if want := []string{"createattr", "open", "releaseall", "releaseall", "createattr", "releaseall"}; !slices.Equal(m.calls, want) {
		t.Errorf("calls %v, want %v", m.calls, want)
	}
}
