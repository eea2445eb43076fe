package placement

import "strings"

// Failure domains.
//
// A drive's Domain is a path from the top, e.g. {"srv1", "enc0", "drawer2"}.
// Level L of the path names, for each drive, the domain made of the first L+1
// components: drawer2 of enc0 of srv1 is a different domain from drawer2 of
// enc0 of srv2. Paths may have different lengths: a missing component counts
// as the empty string, so drives without a path share one domain at every
// level (the conservative reading: nothing says they are apart).
//
// The rule: at every level, at most `limit` fragments of one PG share a
// domain, where limit = M (losing a whole domain loses at most M fragments,
// which the code survives), or 1 when M = 0. A level is enforced only where
// the topology allows it: when sum over its domains of min(drives, limit) >=
// K+M, counting in-placement drives. Twelve drives in two servers cannot keep
// an 8+2 stripe at two fragments per server, so that level is skipped and
// only distinctness of drives is kept.
//
// The per-level caps are nested (a laminar family), so together with the
// truncation to K+M drives they form a matroid. Two consequences:
//   - greedy acceptance over a ranking of all drives always fills K+M slots
//     when every enforced level passes the count test above (the caps of a
//     deeper level never bind tighter than the level above: both are `limit`);
//   - removing or adding one drive changes the greedy result by at most one
//     exchange, which is the minimal-movement guarantee.
//
// If the greedy walk nevertheless fails with the enforced levels, straw2
// relaxes them from the deepest upwards and retries; with equal caps this
// cannot happen, and the fallback only guards against future changes.

// level holds the domains of one level of the path.
type level struct {
	dom   []int32  // domain index of each candidate (in-placement drive, ID order)
	names []string // domain path of each index, "/"-joined, for diagnostics
}

// domainLimit returns how many fragments of a PG may share a domain.
func domainLimit(m int) int {
	if m == 0 {
		return 1
	}
	return m
}

// buildLevels maps the candidates' domain paths to per-level domain indices.
// depth is the longest path among all the pool's drives (Out drives too, so
// that marking a drive Out never changes the number of levels).
func buildLevels(cands []Drive, depth int) []level {
	levels := make([]level, depth)
	for l := range levels {
		idx := make(map[string]int32)
		lv := &levels[l]
		lv.dom = make([]int32, len(cands))
		for i, d := range cands {
			key := domainKey(d.Domain, l)
			j, ok := idx[key]
			if !ok {
				j = int32(len(lv.names))
				idx[key] = j
				lv.names = append(lv.names, strings.ReplaceAll(key, "\x1f", "/"))
			}
			lv.dom[i] = j
		}
	}
	return levels
}

// domainKey returns the level-l domain of a path: its first l+1 components,
// padded with empty strings.
func domainKey(path []string, l int) string {
	var b strings.Builder
	for i := 0; i <= l; i++ {
		if i > 0 {
			b.WriteByte(0x1f)
		}
		if i < len(path) {
			b.WriteString(path[i])
		}
	}
	return b.String()
}

// enforcedLevels returns the levels (top first) whose domains can hold width
// fragments at `limit` per domain.
func enforcedLevels(levels []level, limit, width int) []int {
	var out []int
	for l, lv := range levels {
		count := make([]int, len(lv.names))
		for _, j := range lv.dom {
			count[j]++
		}
		capacity := 0
		for _, n := range count {
			capacity += min(n, limit)
		}
		if capacity >= width {
			out = append(out, l)
		}
	}
	return out
}
