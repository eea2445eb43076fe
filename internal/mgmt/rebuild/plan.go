package rebuild

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
	"poolfs/internal/recovery"
)

// StateSig summarises the drive states of a pool: a plan (and a scan's
// stripe counts) stays valid as long as it does not change.
func StateSig(m *clustermap.Map, p *clustermap.Pool) string {
	var b strings.Builder
	for _, id := range p.Drives {
		if d, err := m.Drive(id); err == nil {
			fmt.Fprintf(&b, "%v=%s,", id, d.State)
		}
	}
	return b.String()
}

// scanWorkers is how many PGs Scan reads at once: the metadata engines
// serve several readers, and a scan is thousands of small queries (one per
// PG), so it is bound by their round trips, not by one CPU.
const scanWorkers = 4

// Scan reads the committed stripes of every PG of a pool, in PG order,
// with their records. It is the input of the planner; a PG with no
// stripes costs one index lookup.
func (c *Coordinator) Scan(ctx context.Context, pool *clustermap.Pool) ([]recovery.Stripe, []meta.StripeRec, error) {
	type pgStripes struct {
		st   []recovery.Stripe
		recs []meta.StripeRec
	}
	per := make([]pgStripes, pool.PGs)
	errs := make([]error, scanWorkers)
	var wg sync.WaitGroup
	for w := range scanWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pg := w; pg < pool.PGs && errs[w] == nil; pg += scanWorkers {
				per[pg].st, per[pg].recs, errs[w] = c.scanPG(ctx, pool.ID, uint32(pg))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	var out []recovery.Stripe
	var recs []meta.StripeRec
	for _, p := range per {
		out = append(out, p.st...)
		recs = append(recs, p.recs...)
	}
	return out, recs, nil
}

// scanPG reads the committed stripes of one PG.
func (c *Coordinator) scanPG(ctx context.Context, pool, pg uint32) ([]recovery.Stripe, []meta.StripeRec, error) {
	var out []recovery.Stripe
	var recs []meta.StripeRec
	var after meta.StripeRef
	for {
		refs, err := c.d.Store.ListPG(ctx, pool, pg, after, 1024)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range refs {
			rs, err := c.d.Store.Stripes(ctx, r.Ino, r.Stripe, r.Stripe)
			if err != nil && !errors.Is(err, meta.ErrNotFound) {
				return nil, nil, err
			}
			if len(rs) != 1 || rs[0].Gen != r.Gen {
				continue // rewritten or removed since the index was read
			}
			st := recovery.Stripe{Ino: uint64(r.Ino), Stripe: r.Stripe, Gen: r.Gen, PG: rs[0].PG, K: rs[0].K}
			for _, d := range rs[0].Drives {
				st.Drives = append(st.Drives, placement.DriveID(d))
			}
			out = append(out, st)
			recs = append(recs, rs[0])
		}
		if len(refs) < 1024 {
			return out, recs, nil
		}
		after = refs[len(refs)-1]
	}
}

// PlanInput builds the planner input of a pool at map m.
func PlanInput(m *clustermap.Map, pool *clustermap.Pool, stripes []recovery.Stripe) (recovery.Input, error) {
	in, err := planInput(m, pool, stripes)
	if err != nil {
		return recovery.Input{}, err
	}
	return in, nil
}

// planInput is PlanInput that, when the pool's placement cannot be
// computed (fewer drives up than a stripe is wide), still returns the
// input without PG sets alongside the error: enough to classify the
// stripes (recovery.Check) and find those lost (recovery.Make), though no
// task has a target.
func planInput(m *clustermap.Map, pool *clustermap.Pool, stripes []recovery.Stripe) (recovery.Input, error) {
	up, down := map[placement.DriveID]bool{}, map[placement.DriveID]bool{}
	for _, id := range pool.Drives {
		if d, err := m.Drive(id); err == nil && d.State == clustermap.StateUp {
			up[id] = true
		} else if err == nil && d.State == clustermap.StateDown {
			down[id] = true
		}
	}
	in := recovery.Input{K: pool.K, M: pool.M, Up: up, Down: down, Stripes: stripes}
	pp, err := m.Placement(pool.ID)
	if err != nil {
		return in, err
	}
	pm, err := pp.Map()
	if err != nil {
		return in, fmt.Errorf("placement of pool %q at epoch %d: %w", pool.Name, m.Epoch, err)
	}
	in.Sets = pm.Sets
	return in, nil
}

// incompleteReason says why a plan cannot restore every stripe of a pool,
// or "" if it can; perr is the placement error of planInput.
func incompleteReason(pool *clustermap.Pool, in recovery.Input, plan recovery.Plan, perr error) string {
	var parts []string
	switch {
	case errors.Is(perr, placement.ErrNotEnoughDrives):
		parts = append(parts, fmt.Sprintf("%d drives up, %d+%d stripes need %d: replace or add drives",
			len(in.Up), pool.K, pool.M, pool.K+pool.M))
	case perr != nil:
		parts = append(parts, perr.Error())
	case len(plan.Blocked) > 0:
		parts = append(parts, fmt.Sprintf("%d stripes have no free drive in their placement group: replace or add a drive",
			len(plan.Blocked)))
	}
	if n := len(plan.Unrecoverable); n > 0 {
		parts = append(parts, fmt.Sprintf("%d stripes lost more fragments than parity covers and cannot be restored", n))
	}
	return strings.Join(parts, "; ")
}
