// Command lfsbound estimates the least write amplification a log-structured
// store can reach under random overwrites of a file, within a given space:
// the bound against which docs/small-writes.md weighs the delta log's
// folds. Run it with `go run ./bench/lfsbound`.
//
// The model: U blocks of live data in segments of S blocks, T = ratio × U
// blocks of space in all. Every user write overwrites one block, appended
// to the open user segment; when fewer than three segments are free, the
// cleaner empties a sealed segment, copying its live blocks into its own
// open segment (hot and cold apart). Write amplification is (user blocks
// + blocks copied) / user blocks, after the initial layout. Two cleaners:
// greedy (the segment with the fewest live blocks), which is the optimal
// online policy for independent uniform writes (Yang, Misra and
// Rubenstein, SIGMETRICS PER 2015; Althaus et al., ICDCS 2022), and FIFO
// (the oldest). Two write patterns: independent uniform offsets, and a
// random permutation of all blocks per pass, as fio writes with its
// random map (the default of bench/randwrite.sh's jobs).
//
// The space ratio of bench/randwrite.sh's on-disk target: at most 1.5 ×
// the raw live bytes plus the stated garbage budget G, so T/U = 1.5 +
// G / (1.25 × size): 1.9 for a 4 GiB file and G = 2 GiB.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
)

// model is one run of the store.
type model struct {
	seg, nseg int
	where     []int32 // block -> segment holding it
	live      []int   // live blocks a segment
	blocks    [][]int32
	sealed    []bool
	fifo      []int // sealed segments, oldest first
	free      []int
	moved     int
	greedy    bool
}

// stream is an open segment being filled.
type stream struct{ cur, fill int }

func newModel(blocks, seg int, ratio float64, greedy bool) *model {
	n := int(ratio*float64(blocks)) / seg
	m := &model{seg: seg, nseg: n, where: make([]int32, blocks), live: make([]int, n),
		blocks: make([][]int32, n), sealed: make([]bool, n), greedy: greedy}
	for i := n - 1; i >= 0; i-- {
		m.free = append(m.free, i)
	}
	return m
}

func (m *model) put(st *stream, b int32) {
	if st.cur < 0 || st.fill == m.seg {
		if st.cur >= 0 {
			m.sealed[st.cur] = true
			m.fifo = append(m.fifo, st.cur)
		}
		if len(m.free) == 0 {
			fmt.Fprintln(os.Stderr, "lfsbound: out of space (ratio too small)")
			os.Exit(1)
		}
		st.cur, m.free = m.free[len(m.free)-1], m.free[:len(m.free)-1]
		st.fill = 0
	}
	m.where[b] = int32(st.cur)
	m.live[st.cur]++
	m.blocks[st.cur] = append(m.blocks[st.cur], b)
	st.fill++
}

// clean empties one sealed segment into the cleaner's stream gc.
func (m *model) clean(gc *stream) {
	c := -1
	if m.greedy {
		best := 1 << 30
		for s := range m.nseg {
			if m.sealed[s] && m.live[s] < best {
				c, best = s, m.live[s]
			}
		}
	} else {
		for c < 0 || !m.sealed[c] {
			c, m.fifo = m.fifo[0], m.fifo[1:]
		}
	}
	var mv []int32
	for _, b := range m.blocks[c] {
		if m.where[b] == int32(c) {
			mv = append(mv, b)
		}
	}
	m.blocks[c], m.live[c], m.sealed[c] = m.blocks[c][:0], 0, false
	m.free = append(m.free, c)
	m.moved += len(mv)
	for _, b := range mv {
		m.put(gc, b)
	}
}

// run lays out the blocks, then writes passes × blocks user blocks, and
// returns the write amplification of the writes.
func run(blocks, seg int, ratio float64, greedy, perm bool, passes int, seed uint64) float64 {
	m := newModel(blocks, seg, ratio, greedy)
	user, gc := &stream{cur: -1}, &stream{cur: -1}
	for b := range blocks {
		m.put(user, int32(b))
	}
	rnd := rand.New(rand.NewPCG(seed, 1))
	moved0, n := m.moved, 0
	order := make([]int32, blocks)
	for range passes {
		for i := range order {
			if perm {
				order[i] = int32(i)
			} else {
				order[i] = int32(rnd.IntN(blocks))
			}
		}
		if perm {
			rnd.Shuffle(blocks, func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		for _, b := range order {
			if w := m.where[b]; w >= 0 {
				m.live[w]--
				m.where[b] = -1
			}
			for len(m.free) < 3 {
				m.clean(gc)
			}
			m.put(user, b)
			n++
		}
	}
	return float64(n+m.moved-moved0) / float64(n)
}

func main() {
	blocks := flag.Int("blocks", 65536, "live blocks (a 4 GiB file of 64 KiB writes: 65536)")
	seg := flag.Int("segment", 128, "blocks a segment (an 8 MiB log stripe of 64 KiB blocks: 128)")
	passes := flag.Int("passes", 12, "user writes, in passes over the file")
	flag.Parse()
	fmt.Printf("least write amplification of log cleaning (beyond the code's (K+M)/K): %d blocks, segments of %d, %d passes\n\n", *blocks, *seg, *passes)
	fmt.Println("| space / live (T/U) | greedy, uniform | FIFO, uniform | greedy, permutation a pass (fio) | FIFO, permutation a pass |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range []float64{1.25, 1.5, 1.9, 2.5} {
		fmt.Printf("| %.2f | %.3f | %.3f | %.3f | %.3f |\n", r,
			run(*blocks, *seg, r, true, false, *passes, 1), run(*blocks, *seg, r, false, false, *passes, 1),
			run(*blocks, *seg, r, true, true, *passes, 1), run(*blocks, *seg, r, false, true, *passes, 1))
	}
}
