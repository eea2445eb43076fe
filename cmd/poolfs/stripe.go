package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/meta"
)

func setstripeCmd(g *globals) *cobra.Command {
	var unit, scheme string
	var mirror int
	var force bool
	cmd := &cobra.Command{
		Use:   "setstripe DIR",
		Short: "Set the layout (stripe unit, erasure scheme or mirror) that files created under DIR get",
		Long: `Set the default layout of a directory: files and directories created in it from
now on inherit it; existing files keep theirs. The pool stays the directory's pool.
--scheme K+M erasure-codes stripes over K+M drives, --mirror N keeps N copies; either
may be narrower than the pool's stripe width (the drives of a placement group): a
narrow stripe uses the first K+M drives of its placement group. A layout without
redundancy (--scheme K+0, --mirror 1) loses data with any one drive, so it needs
--force.

` + pathRule,
		Example: `  poolfs setstripe /mnt/poolfs/ckpt --unit 4M
  poolfs setstripe /db --mirror 3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mirrorSet := cmd.Flags().Changed("mirror")
			if scheme != "" && mirrorSet {
				return fmt.Errorf("setstripe: --scheme and --mirror exclude each other")
			}
			if mirrorSet && mirror < 1 {
				return fmt.Errorf("setstripe: --mirror %d: want at least 1 copy (3 survive two drive failures)", mirror)
			}
			ctx := cmd.Context()
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				_, a, err := g.paths(conn).resolve(ctx, args[0])
				if err != nil {
					return err
				}
				if a.Type != meta.TypeDir {
					return &pathErr{op: "set the layout of", paths: []string{args[0]}, err: meta.ErrNotDir,
						hint: "A layout is set on a directory; files created in it get it."}
				}
				l := a.Layout
				if unit != "" {
					n, err := parseSize(unit)
					if err != nil || n <= 0 || n > 1<<32-1 {
						return fmt.Errorf("--unit %q: want e.g. 1M", unit)
					}
					l.Unit = uint32(n)
				}
				switch {
				case scheme != "":
					if l.K, l.M, err = cluster.ParseScheme(scheme); err != nil {
						return err
					}
					l.Mirror = false
				case mirrorSet:
					l.K, l.M, l.Mirror = 1, mirror-1, true
				}
				if (scheme != "" || mirrorSet) && l.M == 0 && !force {
					return fmt.Errorf("setstripe %s: %s keeps no redundancy: a single failed drive loses the files created under it; give --force to set it anyway",
						args[0], schemeString(l.K, l.M, l.Mirror))
				}
				if err := l.Validate(); err != nil {
					return fmt.Errorf("setstripe %s: %w", args[0], err)
				}
				m, err := conn.Client.Map(ctx)
				if err != nil {
					return err
				}
				pool, err := m.Pool(l.Pool)
				if err != nil {
					return err
				}
				if width := pool.K + pool.M; l.Width() > width {
					return fmt.Errorf("setstripe %s: %s: pool %q places stripes on %d drives (%d+%d); a layout may use at most %d",
						args[0], schemeString(l.K, l.M, l.Mirror), pool.Name, width, pool.K, pool.M, width)
				}
				if err := conn.Meta.SetLayout(ctx, a.Ino, l); err != nil {
					return fmt.Errorf("setstripe %s: %w", args[0], err)
				}
				if l.M == 0 {
					fmt.Fprintf(os.Stderr, "poolfs: warning: %s: files created here have no redundancy\n", args[0])
				}
				fmt.Println(layoutString(l))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&unit, "unit", "", "stripe unit: bytes of one data fragment, e.g. 1M (default: keep)")
	cmd.Flags().StringVar(&scheme, "scheme", "", "erasure scheme K+M, e.g. 8+2 or 4+2 (default: keep)")
	cmd.Flags().IntVar(&mirror, "mirror", 0, "keep N (at least 1) copies of every stripe instead of erasure coding")
	cmd.Flags().BoolVar(&force, "force", false, "accept a layout without redundancy (--scheme K+0, --mirror 1)")
	return cmd
}

func getstripeCmd(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "getstripe PATH",
		Short: "Print the layout of a file or directory (for files also the stripes written and their schemes)",
		Long:  "Print the layout of a file or directory (for files also the stripes written\nand their schemes).\n\n" + pathRule,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				_, a, err := g.paths(conn).resolve(ctx, args[0])
				if err != nil {
					return err
				}
				fmt.Printf("%s: %s\n", args[0], layoutString(a.Layout))
				if a.Type != meta.TypeFile {
					return nil
				}
				recs, err := conn.Meta.Stripes(ctx, a.Ino, 0, ^uint64(0))
				if err != nil {
					return err
				}
				sb := uint64(client.StripeBytes(a.Layout))
				logs, extents := 0, 0
				for _, r := range recs {
					extents += len(r.Deltas)
					if meta.IsLogStripe(r.Stripe) {
						logs++
					}
				}
				fmt.Printf("size %d, stripes %d of %d (%d bytes each; holes are not stored)\n",
					a.Size, len(recs)-logs, (a.Size+sb-1)/sb, sb)
				if logs > 0 {
					fmt.Printf("delta log: %d extents in %d log stripes (small writes not folded yet)\n", extents, logs)
				}
				for i, r := range recs {
					if i >= 8 && !all {
						fmt.Printf("... %d more (--all lists them)\n", len(recs)-i)
						break
					}
					if meta.IsLogStripe(r.Stripe) {
						fmt.Printf("log stripe %#x: %s\n", r.Stripe-meta.LogStripeBase, stripeString(a.Layout, r))
						continue
					}
					fmt.Printf("stripe %d: %s\n", r.Stripe, stripeString(a.Layout, r))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "list every stripe (default: the first 8)")
	return cmd
}

// parseSmallFileThreshold reads the SIZE of `poolfs pool set
// small-file-threshold SIZE`.
func parseSmallFileThreshold(size string) (int64, error) {
	n, err := parseSize(size)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("small-file-threshold %q: want a size such as 64K, or 0 to turn mirroring of small files off", size)
	}
	return n, nil
}

// layoutString prints a layout as `getstripe` shows it.
func layoutString(l meta.Layout) string {
	return fmt.Sprintf("pool %d, %s, unit %s, stripe %s", l.Pool, schemeString(l.K, l.M, l.Mirror), human(int64(l.Unit)), human(client.StripeBytes(l)))
}

// stripeString prints one stripe record: its own scheme, which differs from
// the file's for a small file's mirrored stripe.
func stripeString(l meta.Layout, r meta.StripeRec) string {
	k, m := r.Scheme(l.K)
	s := schemeString(k, m, k == 1 && m > 0)
	if k == 1 && m > 0 && !l.Mirror {
		s += " (small file)"
	}
	return fmt.Sprintf("%s, gen %d, pg %d, %d bytes, shard %s, drives %v", s, r.Gen, r.PG, r.Len, human(int64(r.ShardSize)), r.Drives)
}

func schemeString(k, m int, mirror bool) string {
	if mirror {
		return fmt.Sprintf("mirror %d", 1+m)
	}
	return fmt.Sprintf("ec %d+%d", k, m)
}
