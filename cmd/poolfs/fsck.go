package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/chunkstore"
	"poolfs/internal/cluster"
	"poolfs/internal/clustermap"
	"poolfs/internal/fsck"
	"poolfs/internal/meta"
	"poolfs/internal/meta/sqlite"
	"poolfs/internal/metarpc"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
	"poolfs/internal/storage"
)

var (
	_ fsck.Store     = (*meta.Store)(nil)
	_ fsck.Store     = (*metarpc.Client)(nil)
	_ fsck.Rebuilder = (*storage.Server)(nil)
	_ fsck.Rebuilder = onlineRebuilder{}
)

func fsckCmd(g *globals) *cobra.Command {
	var o fsck.Options
	var offline, salvage bool
	cmd := &cobra.Command{
		Use:   "fsck",
		Short: "Check the namespace, the stripe records and the fragments on the drives against each other",
		Long: `Check the namespace (dangling entries, link counts, orphan inodes), every file's
stripe records against the fragments on the drives (missing fragments, stripes
with fewer than k fragments, lost records) and report what is wrong by path.
It runs against the running cluster through its services, or, when the cluster
is stopped (or with --offline), on its directory.

--repair fixes what is safe: removes dangling entries, sets link counts, links
orphan inodes into /lost+found, re-writes missing fragments from the others.
--rebuild-stripes recreates stripe records lost from the store from the fragment
headers on the drives (the newest generation with k fragments that verify).
--salvage rebuilds a SQLite store that fails its integrity check from the rows
it can still read, before the check: run it with --rebuild-stripes --repair.
fsck never deletes a fragment. See docs/fsck-and-backup.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Progress = progressPrinter()
			var rep *fsck.Report
			var err error
			if salvage {
				if err := salvageStore(cmd.Context(), g.dir); err != nil {
					return err
				}
				offline = true
			}
			if offline {
				rep, err = fsckOffline(cmd.Context(), g.dir, o)
			} else {
				rep, err = fsckOnline(cmd.Context(), g, o)
				var cerr connectError
				if errors.As(err, &cerr) {
					fmt.Fprintf(os.Stderr, "fsck: the cluster does not answer (%v); checking it offline\n", cerr.err)
					rep, err = fsckOffline(cmd.Context(), g.dir, o)
				}
			}
			if err != nil {
				return storeAdvice(err, g.dir)
			}
			return printFsck(rep)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.Repair, "repair", false, "fix what is safe to fix (link counts, dangling entries, orphan inodes, missing fragments)")
	f.BoolVar(&o.RebuildStripes, "rebuild-stripes", false, "recreate lost stripe records from the fragment headers on the drives")
	f.BoolVar(&salvage, "salvage", false, "first rebuild a corrupt SQLite store from the rows it can still read (cluster stopped; the damaged file is kept), then check offline")
	f.BoolVar(&offline, "offline", false, "check the stopped cluster's directory directly (the default when the cluster does not answer)")
	return cmd
}

func printFsck(rep *fsck.Report) error {
	left := 0
	for _, p := range rep.Problems {
		fmt.Println(p)
		if !p.Repaired {
			left++
		}
	}
	fmt.Printf("fsck: %d files, %d stripe records, %d fragments (%d named by no record: the collector's); %d problems, %d left",
		rep.Files, rep.Stripes, rep.Fragments, rep.Unreferenced, len(rep.Problems), left)
	if rep.Restored > 0 || rep.Rewritten > 0 {
		fmt.Printf("; %d stripe records restored, %d fragments re-written", rep.Restored, rep.Rewritten)
	}
	fmt.Println()
	if left > 0 {
		return fmt.Errorf("fsck: %d problems left", left)
	}
	return nil
}

// progressPrinter reports long scans on stderr, at most twice a second.
func progressPrinter() func(fsck.Progress) {
	var last time.Time
	return func(p fsck.Progress) {
		if time.Since(last) < 500*time.Millisecond && p.Done < p.Total {
			return
		}
		last = time.Now()
		switch p.Phase {
		case "drives":
			fmt.Fprintf(os.Stderr, "fsck: drives %d/%d scanned, %d fragments\n", p.Done, p.Total, p.Items)
		case "files":
			fmt.Fprintf(os.Stderr, "fsck: files %d/%d checked\n", p.Done, p.Total)
		}
	}
}

// connectError: the running cluster could not be reached.
type connectError struct{ err error }

func (e connectError) Error() string { return e.err.Error() }

func fsckOnline(ctx context.Context, g *globals, o fsck.Options) (*fsck.Report, error) {
	conn, err := g.connect(ctx)
	if err != nil {
		return nil, connectError{err}
	}
	defer conn.Close()
	m, err := conn.Mgmt.Map(ctx)
	if err != nil {
		return nil, connectError{err}
	}
	d := conn.StorageDialer()
	defer d.Close()
	c := &fsck.Checker{Store: conn.Meta, Map: m, Drives: d, Rebuild: onlineRebuilder{d, m}}
	return c.Run(ctx, o)
}

// onlineRebuilder runs a reconstruct task on the storage server that owns
// its first target drive.
type onlineRebuilder struct {
	d *storage.Dialer
	m *clustermap.Map
}

func (r onlineRebuilder) Reconstruct(ctx context.Context, a *storage.ReconstructArgs) (*storage.ReconstructResult, error) {
	sc, err := r.d.Server(r.m, a.Targets[0].Drive)
	if err != nil {
		return nil, err
	}
	return sc.Reconstruct(ctx, a)
}

// localDrives serves the drives of a stopped cluster opened by fsck.
type localDrives map[placement.DriveID]chunkstore.Drive

func (l localDrives) Drive(_ *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error) {
	if d, ok := l[id]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w: %v", storage.ErrNoDrive, id)
}

func fsckOffline(ctx context.Context, dir string, o fsck.Options) (*fsck.Report, error) {
	log := slog.New(slog.DiscardHandler)
	eng, err := cluster.OpenEngine(ctx, dir, "", log)
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	st := meta.New(eng, meta.Options{})
	m, err := mgmt.New(st, nil, nil, nil).Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("fsck: cluster map: %w", err)
	}
	drives := localDrives{}
	defer func() {
		for _, d := range drives {
			d.(*chunkstore.LocalDrive).Close()
		}
	}()
	for _, d := range m.Drives {
		if d.State != clustermap.StateUp {
			continue
		}
		p := d.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		ld, err := chunkstore.Open(p, chunkstore.Options{Capacity: d.Capacity, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("fsck: drive %v: %w", d.ID, err)
		}
		drives[d.ID] = ld
	}
	c := &fsck.Checker{Store: st, Map: m, Drives: drives, Rebuild: storage.NewServer(drives, log)}
	rep, err := c.Run(ctx, o)
	if err != nil {
		return nil, err
	}
	return rep, st.Sync(ctx)
}

// salvageStore rebuilds the stopped cluster's corrupt SQLite store from its
// readable rows (sqlite.Salvage) and says what was lost.
func salvageStore(ctx context.Context, dir string) error {
	rep, err := sqlite.Salvage(ctx, filepath.Join(dir, "meta.db"))
	if err != nil {
		return fmt.Errorf("fsck --salvage (is the cluster stopped?): %w", err)
	}
	fmt.Printf("fsck: salvaged %d records of the metadata store; the damaged store is kept as %s\n", rep.Rows, rep.Old)
	for _, r := range rep.Skipped {
		fmt.Printf("fsck: unreadable, lost: records after key %x up to %x\n", r.From, r.To)
	}
	return nil
}
