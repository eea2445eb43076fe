package placement

import (
	"fmt"
	"strconv"
	"strings"
)

// newPool returns a declustered pool of n drives d00..d(n-1) of weight 1 with
// DefaultPGs, and no failure domains.
func newPool(k, m, n int) *Pool {
	p := &Pool{ID: 1, K: k, M: m}
	for i := range n {
		p.Drives = append(p.Drives, Drive{ID: DriveID(i), Weight: 1})
	}
	p.PGs = DefaultPGs(n, k+m)
	return p
}

// withDomains sets a regular topology: dims {6, 10} is 6 servers of 10
// drives; {3, 4, 5} is 3 enclosures × 4 drawers × 5 drives. Drives are
// assigned in ID order; the product of dims must be the drive count.
func withDomains(p *Pool, dims ...int) *Pool {
	names := []string{"srv", "enc", "drw", "lvl"}
	for i := range p.Drives {
		var path []string
		rest := i
		size := 1
		for _, d := range dims[1:] {
			size *= d
		}
		for l := 0; l < len(dims)-1; l++ {
			path = append(path, fmt.Sprintf("%s%d", names[min(l, len(names)-1)], rest/size))
			rest %= size
			size /= dims[l+1]
		}
		p.Drives[i].Domain = path
	}
	return p
}

// withWeights assigns weights cyclically: {1, 1.5} alternates.
func withWeights(p *Pool, ws ...float64) *Pool {
	for i := range p.Drives {
		p.Drives[i].Weight = ws[i%len(ws)]
	}
	return p
}

func clonePool(p *Pool) *Pool {
	q := *p
	q.Drives = sortedDrives(p.Drives)
	return &q
}

func setOut(p *Pool, id DriveID, out bool) *Pool {
	q := clonePool(p)
	for i := range q.Drives {
		if q.Drives[i].ID == id {
			q.Drives[i].Out = out
		}
	}
	return q
}

func schemeName(k, m int) string { return strconv.Itoa(k) + "+" + strconv.Itoa(m) }

func idsString(ids []DriveID) string {
	var b strings.Builder
	for i, d := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(d.String())
	}
	return b.String()
}
