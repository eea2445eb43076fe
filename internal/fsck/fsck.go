package fsck

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/clustermap"
	"poolfs/internal/erasure"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/storage"
)

// Store is what fsck needs of the metadata service: *meta.Store offline,
// *metarpc.Client online.
type Store interface {
	Getattr(ctx context.Context, ino meta.Ino) (meta.Attr, error)
	Readdir(ctx context.Context, ino meta.Ino, after string, limit int) ([]meta.Dirent, error)
	Stripes(ctx context.Context, ino meta.Ino, first, last uint64) ([]meta.StripeRec, error)
	CheckNamespace(ctx context.Context, repair bool) ([]meta.NamespaceProblem, error)
	RestoreStripe(ctx context.Context, ino meta.Ino, rec meta.StripeRec, oldGen uint64) error
}

// Drives resolves drive IDs of the map (client.Drives has this shape).
type Drives interface {
	Drive(m *clustermap.Map, id placement.DriveID) (chunkstore.Drive, error)
}

// Rebuilder runs a reconstruct task that writes fragments to the drive
// Targets[0].Drive (a *storage.Server offline; online, the client of the
// storage server owning that drive).
type Rebuilder interface {
	Reconstruct(ctx context.Context, a *storage.ReconstructArgs) (*storage.ReconstructResult, error)
}

// Options select what a run does.
type Options struct {
	Repair         bool // fix what is safe (see doc.go)
	RebuildStripes bool // recreate lost stripe records from fragment headers
	// Progress, if set, is called as the scans advance (from the calling
	// goroutine).
	Progress func(p Progress)
}

// Progress says how far a run is.
type Progress struct {
	Phase string // "namespace", "drives", "files"
	Done  int    // drives scanned, files checked
	Total int
	Items int // fragments listed so far
}

// Kinds of Problem besides the namespace ones (meta.Problem*).
const (
	ProblemMissingFragments = "missing-fragments" // readable, degraded
	ProblemUnreadableStripe = "unreadable-stripe" // fewer than k fragments
	ProblemLostRecord       = "lost-record"       // fragments, no record
	ProblemLostBytes        = "lost-bytes"        // stored bytes beyond the records
	ProblemStrayFragments   = "stray-fragments"   // fragments of an inode that does not exist
)

// Problem is one thing found wrong.
type Problem struct {
	Kind     string
	Path     string // the file's first path; "" if none is known
	Ino      meta.Ino
	Stripe   uint64
	Gen      uint64
	Detail   string
	Repaired bool
}

func (p Problem) String() string {
	where := p.Path
	if where == "" {
		where = fmt.Sprintf("inode %d", p.Ino)
	}
	s := fmt.Sprintf("%s: %s: %s", p.Kind, where, p.Detail)
	if p.Repaired {
		s += " [repaired]"
	}
	return s
}

// Report is the outcome of a run.
type Report struct {
	Problems     []Problem
	Files        int // regular files checked
	Stripes      int // stripe records checked
	Fragments    int // fragments listed on the drives
	Unreferenced int // fragments no record names (the collector's work)
	Restored     int // stripe records recreated (RebuildStripes)
	Rewritten    int // fragments re-written (Repair)
}

// Clean reports whether no problem is left unrepaired.
func (r *Report) Clean() bool {
	return !slices.ContainsFunc(r.Problems, func(p Problem) bool { return !p.Repaired })
}

// Checker runs fsck over one cluster.
type Checker struct {
	Store   Store
	Map     *clustermap.Map
	Drives  Drives
	Rebuild Rebuilder // nil: missing fragments are reported, not re-written
}

// sid names one stripe of one file.
type sid struct {
	ino    meta.Ino
	stripe uint64
}

// loc is where one fragment of a generation was found.
type loc struct {
	index int
	drive placement.DriveID
}

// run is the state of one Run.
type run struct {
	c     *Checker
	o     Options
	rep   *Report
	frags map[sid]map[uint64][]loc // fragments found, by stripe and generation
	seen  map[sid]map[uint64]bool  // generations named by a record (or restored)
	// orders is the stripe order of each pool's map (rebuild.go).
	orders map[uint32]*placement.StripeOrder
}

// Run checks the cluster and, as o asks, repairs it. It returns an error
// only when it cannot go on (the store unreachable); what is wrong with
// the cluster is in the report.
func (c *Checker) Run(ctx context.Context, o Options) (*Report, error) {
	r := &run{c: c, o: o, rep: &Report{}, frags: map[sid]map[uint64][]loc{}, seen: map[sid]map[uint64]bool{},
		orders: map[uint32]*placement.StripeOrder{}}
	r.progress(Progress{Phase: "namespace"})
	probs, err := c.Store.CheckNamespace(ctx, o.Repair)
	if err != nil {
		return nil, fmt.Errorf("fsck: namespace: %w", err)
	}
	for _, p := range probs {
		r.rep.Problems = append(r.rep.Problems, Problem{Kind: p.Kind, Ino: p.Ino, Detail: p.String(), Repaired: p.Repaired})
	}
	if err := r.scanDrives(ctx); err != nil {
		return nil, err
	}
	files, err := r.walk(ctx)
	if err != nil {
		return nil, err
	}
	for i, f := range files {
		r.progress(Progress{Phase: "files", Done: i, Total: len(files)})
		if err := r.checkFile(ctx, f.path, f.ino); err != nil {
			return nil, err
		}
	}
	r.progress(Progress{Phase: "files", Done: len(files), Total: len(files)})
	r.strays(ctx)
	return r.rep, nil
}

func (r *run) progress(p Progress) {
	if r.o.Progress != nil {
		r.o.Progress(p)
	}
}

func (r *run) add(p Problem) *Problem {
	r.rep.Problems = append(r.rep.Problems, p)
	return &r.rep.Problems[len(r.rep.Problems)-1]
}

// scanDrives lists the fragments of every drive that is up.
func (r *run) scanDrives(ctx context.Context) error {
	m := r.c.Map
	for i, d := range m.Drives {
		r.progress(Progress{Phase: "drives", Done: i, Total: len(m.Drives), Items: r.rep.Fragments})
		if d.State != clustermap.StateUp {
			continue
		}
		drv, err := r.c.Drives.Drive(m, d.ID)
		if err != nil {
			return fmt.Errorf("fsck: drive %v: %w", d.ID, err)
		}
		err = drv.ListFragments(ctx, func(k erasure.FragmentKey, _ int64, _ time.Time) error {
			r.found(sid{meta.Ino(k.Ino), k.Stripe}, k.Gen, loc{int(k.Index), d.ID})
			r.rep.Fragments++
			if r.rep.Fragments%10000 == 0 {
				r.progress(Progress{Phase: "drives", Done: i, Total: len(m.Drives), Items: r.rep.Fragments})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("fsck: list fragments of %v: %w", d.ID, err)
		}
	}
	r.progress(Progress{Phase: "drives", Done: len(m.Drives), Total: len(m.Drives), Items: r.rep.Fragments})
	return nil
}

// found notes fragment l of generation gen of stripe s as on its drive.
func (r *run) found(s sid, gen uint64, l loc) {
	gens := r.frags[s]
	if gens == nil {
		gens = map[uint64][]loc{}
		r.frags[s] = gens
	}
	gens[gen] = append(gens[gen], l)
}

type file struct {
	path string
	ino  meta.Ino
}

// walk returns every regular file reachable from the root, once per inode
// (its first path).
func (r *run) walk(ctx context.Context) ([]file, error) {
	var files []file
	seen := map[meta.Ino]bool{}
	dirs := []file{{"/", meta.RootIno}}
	for len(dirs) > 0 {
		d := dirs[0]
		dirs = dirs[1:]
		after := ""
		for {
			ents, err := r.c.Store.Readdir(ctx, d.ino, after, 1024)
			if err != nil {
				return nil, fmt.Errorf("fsck: read directory %s: %w", d.path, err)
			}
			for _, e := range ents {
				p := path.Join(d.path, e.Name)
				switch {
				case seen[e.Ino]:
				case e.Type == meta.TypeDir:
					dirs = append(dirs, file{p, e.Ino})
				case e.Type == meta.TypeFile:
					files = append(files, file{p, e.Ino})
				}
				seen[e.Ino] = true
			}
			if len(ents) < 1024 {
				break
			}
			after = ents[len(ents)-1].Name
		}
	}
	return files, nil
}

// strays counts the fragments no record named and reports those of
// inodes that do not exist.
func (r *run) strays(ctx context.Context) {
	byIno := map[meta.Ino]int{}
	for s, gens := range r.frags {
		for g, locs := range gens {
			if !r.seen[s][g] {
				r.rep.Unreferenced += len(locs)
				byIno[s.ino] += len(locs)
			}
		}
	}
	inos := make([]meta.Ino, 0, len(byIno))
	for ino := range byIno {
		inos = append(inos, ino)
	}
	slices.Sort(inos)
	for _, ino := range inos {
		if _, err := r.c.Store.Getattr(ctx, ino); errors.Is(err, meta.ErrNotFound) {
			r.add(Problem{Kind: ProblemStrayFragments, Ino: ino,
				Detail: fmt.Sprintf("%d fragments of a file that does not exist (poolfs gc --orphans removes them)", byIno[ino])})
		}
	}
}

// stripeBytes is the user bytes of one stripe of layout l, never 0.
func stripeBytes(l meta.Layout) uint64 { return max(l.StripeBytes(), 1) }
