package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/meta"
)

func setstripeCmd(g *globals) *cobra.Command {
	var unit, scheme string
	cmd := &cobra.Command{
		Use:   "setstripe DIR",
		Short: "Set the layout (stripe unit, erasure scheme) that files created under DIR get",
		Long: `Set the default layout of a directory: files and directories created in it from
now on inherit it; existing files keep theirs. The pool stays the directory's pool;
K+M must fit the pool (today: equal its stripe width, the drives of a placement group).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			conn, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer conn.Close()
			a, err := conn.Client.Resolve(ctx, args[0])
			if err != nil {
				return err
			}
			if a.Type != meta.TypeDir {
				return fmt.Errorf("setstripe %s: %w", args[0], meta.ErrNotDir)
			}
			l := a.Layout
			if unit != "" {
				n, err := parseSize(unit)
				if err != nil || n <= 0 || n > 1<<32-1 {
					return fmt.Errorf("--unit %q: want e.g. 1M", unit)
				}
				l.Unit = uint32(n)
			}
			if scheme != "" {
				if l.K, l.M, err = cluster.ParseScheme(scheme); err != nil {
					return err
				}
				l.Mirror = false
			}
			if err := l.Validate(); err != nil {
				return fmt.Errorf("setstripe %s: %w", args[0], err)
			}
			m, err := conn.Client.Map(ctx)
			if err != nil {
				return err
			}
			p, err := m.Pool(l.Pool)
			if err != nil {
				return err
			}
			if width := p.K + p.M; l.Width() != width {
				return fmt.Errorf("setstripe %s: scheme %d+%d: pool %q places stripes on %d drives (%d+%d); K+M must be %d",
					args[0], l.K, l.M, p.Name, width, p.K, p.M, width)
			}
			if l.Width() > len(p.Drives) {
				return fmt.Errorf("setstripe %s: scheme %d+%d needs %d drives, pool %q has %d", args[0], l.K, l.M, l.Width(), p.Name, len(p.Drives))
			}
			if err := conn.Meta.SetLayout(ctx, a.Ino, l); err != nil {
				return fmt.Errorf("setstripe %s: %w", args[0], err)
			}
			fmt.Println(layoutString(l))
			return nil
		},
	}
	cmd.Flags().StringVar(&unit, "unit", "", "stripe unit: bytes of one data fragment, e.g. 1M (default: keep)")
	cmd.Flags().StringVar(&scheme, "scheme", "", "erasure scheme K+M, e.g. 8+2 (default: keep)")
	return cmd
}

func getstripeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "getstripe PATH",
		Short: "Print the layout of a file or directory (for files also the stripes written)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			conn, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer conn.Close()
			a, err := conn.Client.Resolve(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Printf("%s: %s\n", args[0], layoutString(a.Layout))
			if a.Type == meta.TypeFile {
				recs, err := conn.Meta.Stripes(ctx, a.Ino, 0, ^uint64(0))
				if err != nil {
					return err
				}
				sb := uint64(client.StripeBytes(a.Layout))
				fmt.Printf("size %d, stripes %d of %d (%d bytes each; holes are not stored)\n",
					a.Size, len(recs), (a.Size+sb-1)/sb, sb)
			}
			return nil
		},
	}
}

// layoutString prints a layout as `getstripe` shows it.
func layoutString(l meta.Layout) string {
	scheme := fmt.Sprintf("ec %d+%d", l.K, l.M)
	if l.Mirror {
		scheme = fmt.Sprintf("mirror %d", 1+l.M)
	}
	return fmt.Sprintf("pool %d, %s, unit %s, stripe %s", l.Pool, scheme, human(int64(l.Unit)), human(client.StripeBytes(l)))
}
