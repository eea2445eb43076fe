package recovery

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"poolfs/internal/placement"
)

// TestPlanProperties checks, on random pools, schemes, stripe counts and
// failures, what every rebuild plan must satisfy: targets are up drives of
// the PG's new set holding no other fragment of the stripe, sources are K
// distinct surviving fragments, applying the plan leaves every stripe
// healthy (nothing misplaced: no second move), and, where a stripe has
// more surviving fragments than K to choose from, the I/O per drive (reads
// plus writes) is even: within 5% of the mean with many stripes.
func TestPlanProperties(t *testing.T) {
	schemes := [][2]int{{8, 2}, {4, 2}, {6, 3}, {2, 1}}
	for seed := range uint64(16) {
		r := rand.New(rand.NewPCG(seed, 42))
		sc := schemes[r.IntN(len(schemes))]
		k, m := sc[0], sc[1]
		n := k + m + 2 + r.IntN(50)
		stripes := 500 + r.IntN(6000)
		fails := 1 + r.IntN(m)
		t.Run(fmt.Sprintf("%d+%d/%ddrives/%dstripes/%dfailed", k, m, n, stripes, fails), func(t *testing.T) {
			pool := placement.Pool{ID: 1, K: k, M: m, PGs: placement.DefaultPGs(n, k+m)}
			for i := range n {
				pool.Drives = append(pool.Drives, placement.Drive{ID: placement.DriveID(i), Weight: 1})
			}
			pm, err := pool.Map()
			if err != nil {
				t.Fatal(err)
			}
			var ss []Stripe
			for j := range stripes {
				ino, st := uint64(100+j/64), uint64(j%64)
				pg := placement.PGOf(pool.ID, ino, st, pool.PGs)
				ss = append(ss, Stripe{Ino: ino, Stripe: st, Gen: uint64(j + 1), PG: pg, Drives: slices.Clone(pm.Sets[pg])})
			}
			up := map[placement.DriveID]bool{}
			for i := range n {
				up[placement.DriveID(i)] = true
			}
			for _, i := range r.Perm(n)[:fails] {
				pool.Drives[i].Out = true
				delete(up, placement.DriveID(i))
			}
			if pm, err = pool.Map(); err != nil {
				t.Fatal(err)
			}
			in := Input{K: k, M: m, Sets: pm.Sets, Up: up, Stripes: ss}
			p := Make(in)
			checkTasks(t, in, &p)
			byKey := map[[2]uint64]int{}
			for j, s := range ss {
				byKey[[2]uint64{s.Ino, s.Stripe}] = j
			}
			for _, task := range p.Tasks {
				ss[byKey[[2]uint64{task.Stripe.Ino, task.Stripe.Stripe}]].Drives = task.NewDrives()
			}
			if h := Check(in); h.Healthy != h.Stripes {
				t.Fatalf("after the plan: %+v, want every stripe healthy", h)
			}
			io, survivors := p.IO(), n-fails
			perDrive := 0
			for _, c := range io {
				perDrive += c
			}
			perDrive /= survivors
			if fails >= m {
				return // every surviving fragment is read: no choice to balance
			}
			if b := balance(io); perDrive >= 200 && b > 1.05 {
				t.Errorf("I/O per drive busiest/mean %.3f with %d fragments per drive, want <= 1.05", b, perDrive)
			}
			if b := balance(io); b > 1.25 {
				t.Errorf("I/O per drive busiest/mean %.3f with %d fragments per drive, want <= 1.25", b, perDrive)
			}
		})
	}
}

func checkTasks(t *testing.T, in Input, p *Plan) {
	t.Helper()
	for _, task := range p.Tasks {
		set := in.Sets[task.Stripe.PG]
		nd := task.NewDrives()
		seen := map[placement.DriveID]bool{}
		for _, id := range nd {
			if seen[id] {
				t.Fatalf("%v: after the task two fragments on %v: %v", task.Stripe, id, nd)
			}
			seen[id] = true
		}
		for _, id := range task.Targets {
			if !in.Up[id] || !slices.Contains(set, id) {
				t.Fatalf("%v: target %v is not an up drive of PG %d's set %v", task.Stripe, id, task.Stripe.PG, set)
			}
		}
		if task.Copy() {
			continue
		}
		if len(task.Sources) != in.K {
			t.Fatalf("%v: %d sources, want %d", task.Stripe, len(task.Sources), in.K)
		}
		idx := map[int]bool{}
		for _, src := range task.Sources {
			if idx[src.Index] || !in.Up[src.Drive] || task.Stripe.Drives[src.Index] != src.Drive {
				t.Fatalf("%v: bad source %+v (sources %+v)", task.Stripe, src, task.Sources)
			}
			idx[src.Index] = true
		}
	}
}
