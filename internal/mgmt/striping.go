package mgmt

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
)

// NarrowFile is a file whose data lies on fewer drives than its pool
// offers, so that reading or writing it cannot use the pool's bandwidth:
// its stripes are narrower than the pool's scheme (a layout set with
// setstripe), or its stripes together touch far fewer drives than
// placement spreads that many stripes over.
type NarrowFile struct {
	Ino     uint64 `json:"ino"`
	Path    string `json:"path,omitempty"`
	Pool    string `json:"pool"`
	Stripes int    `json:"stripes"`
	// Width is the fragments of its narrowest stripe, PoolWidth the pool
	// scheme's k+m; Drives the distinct drives its stripes use, Expected
	// how many placement spreads that many stripes over on average.
	Width     int     `json:"width"`
	PoolWidth int     `json:"pool_width"`
	Drives    int     `json:"drives"`
	Expected  float64 `json:"expected"`
	Reason    string  `json:"reason"`
}

// StripingReport is the result of Striping.
type StripingReport struct {
	Files   []NarrowFile `json:"files,omitempty"` // the most stripes first
	Scanned int          `json:"scanned"`         // files with at least two stripes
	At      int64        `json:"at"`              // unix ns
	ScanSec float64      `json:"scan_sec"`
}

// narrowFiles finds the narrow files among the stripes of one pool of
// poolDrives drives in service and scheme width poolWidth. Only files of
// at least two stripes are judged: a narrow one has narrower stripes than
// the scheme, or touches fewer than two thirds of the drives placement
// spreads that many stripes over on average. It is pure.
func narrowFiles(stripes []recovery.Stripe, pool string, poolDrives, poolWidth int) (files []NarrowFile, judged int) {
	type acc struct {
		stripes, width int
		drives         map[placement.DriveID]bool
	}
	byIno := map[uint64]*acc{}
	for _, s := range stripes {
		a := byIno[s.Ino]
		if a == nil {
			a = &acc{width: len(s.Drives), drives: map[placement.DriveID]bool{}}
			byIno[s.Ino] = a
		}
		a.stripes++
		a.width = min(a.width, len(s.Drives))
		for _, d := range s.Drives {
			a.drives[d] = true
		}
	}
	for ino, a := range byIno {
		if a.stripes < 2 || poolDrives == 0 {
			continue
		}
		judged++
		w := float64(min(a.width, poolDrives))
		expected := float64(poolDrives) * (1 - math.Pow(1-w/float64(poolDrives), float64(a.stripes)))
		f := NarrowFile{Ino: ino, Pool: pool, Stripes: a.stripes, Width: a.width, PoolWidth: poolWidth, Drives: len(a.drives),
			Expected: expected}
		switch {
		case a.width < poolWidth:
			f.Reason = fmt.Sprintf("stripes of %d fragments in a pool of %d-fragment stripes (a narrow layout: setstripe)", a.width, poolWidth)
		case float64(len(a.drives)) < expected*2/3:
			f.Reason = fmt.Sprintf("%d stripes on %d drives where placement spreads them over %.0f", a.stripes, len(a.drives), expected)
		default:
			continue
		}
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].Stripes != files[j].Stripes {
			return files[i].Stripes > files[j].Stripes
		}
		return files[i].Ino < files[j].Ino
	})
	return files, judged
}

// Striping scans every pool's stripes and returns up to limit files
// striped over too few drives (narrowFiles), with their paths. It reads
// every stripe record: callers run it seldom (the dashboard at most every
// few minutes).
func (s *Service) Striping(ctx context.Context, limit int) (*StripingReport, error) {
	start := time.Now()
	m, err := s.Map(ctx)
	if err != nil {
		return nil, err
	}
	rep := &StripingReport{At: start.UnixNano()}
	for i := range m.Pools {
		p := &m.Pools[i]
		stripes, _, err := s.Scan(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("mgmt: striping of pool %s: %w", p.Name, err)
		}
		inService := 0
		for _, id := range p.Drives {
			if d, err := m.Drive(id); err == nil && (d.State == clustermap.StateUp || d.State == clustermap.StateDown) {
				inService++
			}
		}
		files, judged := narrowFiles(stripes, p.Name, inService, p.K+p.M)
		rep.Files = append(rep.Files, files...)
		rep.Scanned += judged
	}
	sort.SliceStable(rep.Files, func(i, j int) bool { return rep.Files[i].Stripes > rep.Files[j].Stripes })
	if limit > 0 && len(rep.Files) > limit {
		rep.Files = rep.Files[:limit]
	}
	want := map[uint64][]uint64{}
	for _, f := range rep.Files {
		want[f.Ino] = nil
	}
	paths := s.pathsOf(ctx, want)
	for i := range rep.Files {
		rep.Files[i].Path = paths[rep.Files[i].Ino]
	}
	rep.ScanSec = time.Since(start).Seconds()
	return rep, nil
}

// StripingArgs are the arguments of mgmt.Striping.
type StripingArgs struct {
	Limit int `json:"limit"`
}

func (s *Service) registerStriping(r Handler) {
	handleJSON(r, "mgmt.Striping", func(ctx context.Context, a StripingArgs) (any, error) {
		return s.Striping(ctx, a.Limit)
	})
}

// Striping returns up to limit files striped over too few drives.
func (c *Client) Striping(ctx context.Context, limit int) (*StripingReport, error) {
	var rep StripingReport
	if err := c.rc.Call(ctx, "mgmt.Striping", StripingArgs{Limit: limit}, nil, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}
