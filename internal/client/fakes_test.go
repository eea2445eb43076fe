package client_test

import (
	"context"
	"path/filepath"
	"testing"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/client"
	"poolfs/internal/meta"
	"poolfs/internal/meta/sqlite"
)

// conn is a client of the real metadata store (SQLite in a temporary
// directory, called directly) and in-memory drives: everything the
// client's logic needs and nothing else, no servers, RPC or management
// service. The drives and the map are there to watch and to change; the
// client sees the drives as it sees real ones (drivetest.UpOnly: a drive
// the map says is not up fails at once).
type conn struct {
	Meta   *meta.Store
	Client *client.Client
	Drives drivetest.Drives
	Maps   *drivetest.Maps
	Opts   client.Options // the client's
}

// restart gives c a new client of the same options: nothing cached.
func (c *conn) restart() {
	c.Client = client.New(c.Meta, c.Maps, drivetest.UpOnly(c.Drives), c.Opts)
}

// The pool start gives: 4+2 on 8 drives of 128 MiB (memory a runaway
// writer may fill), 64 KiB units (stripes of 256 KiB).
const (
	testK, testM = 4, 2
	testUnit     = 64 << 10
	driveBytes   = 128 << 20
)

// start returns a client with default options over a fresh store and
// drives.
func start(t *testing.T) *conn {
	t.Helper()
	return startWith(t, client.Options{})
}

// startWith is start with a client of options o.
func startWith(t *testing.T, o client.Options) *conn {
	t.Helper()
	return startSized(t, o, driveBytes)
}

// startSized is startWith on drives of size bytes. No collector runs
// here: unless o sets a garbage limit, writers do not wait for one.
func startSized(t *testing.T, o client.Options, size int64) *conn {
	t.Helper()
	if o.GarbageLimit == 0 {
		o.GarbageLimit = -1
	}
	ctx := context.Background()
	eng, err := sqlite.OpenWith(filepath.Join(t.TempDir(), "meta.db"), sqlite.Options{Deferred: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	m := drivetest.Map(8, testK, testM, testUnit, size)
	st := meta.New(eng, meta.Options{})
	p := m.Pools[0]
	if err := st.Init(ctx, meta.Layout{Pool: p.ID, K: p.K, M: p.M, Unit: p.Unit}); err != nil {
		t.Fatal(err)
	}
	capa, err := m.PoolCapacity(p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetPoolLimit(ctx, p.ID, uint64(capa.UsableRaw)); err != nil {
		t.Fatal(err)
	}
	c := &conn{Meta: st, Drives: drivetest.DrivesOf(m), Maps: drivetest.NewMaps(m), Opts: o}
	c.restart()
	return c
}
