package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

func fileCmds(g *globals) []*cobra.Command {
	return []*cobra.Command{putCmd(g), getCmd(g), lsCmd(g), mkdirCmd(g), rmCmd(g), mvCmd(g), statCmd(g)}
}

func putCmd(g *globals) *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:   "put LOCAL PATH",
		Short: "Store a local file (- for stdin) as PATH, atomically replacing it",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				var r io.Reader = os.Stdin
				size := int64(-1)
				if args[0] != "-" {
					f, err := os.Open(args[0])
					if err != nil {
						return err
					}
					defer f.Close()
					if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
						size = st.Size()
					}
					r = f
				}
				bar := newBar(size, "put "+args[1], quiet)
				start := time.Now()
				a, err := conn.Client.Put(cmd.Context(), args[1], r, client.PutOptions{Size: size, Progress: bar.set})
				bar.finish()
				if err != nil {
					return err
				}
				if !quiet {
					fmt.Fprintf(os.Stderr, "%s: %s in %s (%s)\n", args[1], human(int64(a.Size)),
						time.Since(start).Round(time.Millisecond), rate(int64(a.Size), time.Since(start)))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar or summary")
	return cmd
}

func getCmd(g *globals) *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:   "get PATH LOCAL",
		Short: "Copy PATH to a local file (- for stdout)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				a, err := conn.Client.Resolve(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				var w io.Writer = os.Stdout
				var out *os.File
				if args[1] != "-" {
					out, err = os.Create(args[1])
					if err != nil {
						return err
					}
					w = out
				}
				bar := newBar(int64(a.Size), "get "+args[0], quiet)
				start := time.Now()
				_, err = conn.Client.Get(cmd.Context(), args[0], w, client.GetOptions{Progress: bar.set})
				bar.finish()
				if out != nil {
					if cerr := out.Close(); err == nil {
						err = cerr
					}
				}
				if err != nil {
					return err
				}
				if !quiet {
					fmt.Fprintf(os.Stderr, "%s: %s in %s (%s)\n", args[0], human(int64(a.Size)),
						time.Since(start).Round(time.Millisecond), rate(int64(a.Size), time.Since(start)))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar or summary")
	return cmd
}

func lsCmd(g *globals) *cobra.Command {
	var long bool
	cmd := &cobra.Command{
		Use:   "ls [PATH]",
		Short: "List a directory",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := "/"
			if len(args) == 1 {
				p = args[0]
			}
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				ents, err := conn.Client.ReadDir(cmd.Context(), p)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				for _, e := range ents {
					name := e.Name
					if e.Attr.Type == meta.TypeDir {
						name += "/"
					}
					if long {
						fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", modeString(e.Attr), e.Attr.Size,
							time.Unix(0, e.Attr.Mtime).Format("2006-01-02 15:04:05"), name)
					} else {
						fmt.Fprintln(tw, name)
					}
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "mode, size and modification time")
	return cmd
}

func mkdirCmd(g *globals) *cobra.Command {
	var parents bool
	var pool string
	cmd := &cobra.Command{
		Use:   "mkdir PATH...",
		Short: "Create directories",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				for _, p := range args {
					if err := conn.Client.Mkdir(cmd.Context(), p, 0o755, parents); err != nil {
						return err
					}
					if pool != "" {
						if err := conn.Client.SetPool(cmd.Context(), p, pool); err != nil {
							return err
						}
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&parents, "parents", "p", false, "make parents as needed; no error if it exists")
	cmd.Flags().StringVar(&pool, "pool", "", "files created below the directory go to this pool")
	return cmd
}

func rmCmd(g *globals) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "rm PATH...",
		Short: "Remove files (and directories with -r)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				for _, p := range args {
					var err error
					if recursive {
						err = conn.Client.RemoveAll(cmd.Context(), p)
					} else {
						err = conn.Client.Remove(cmd.Context(), p)
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove directories and their contents")
	return cmd
}

func mvCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "mv OLD NEW",
		Short: "Rename or move, atomically replacing NEW",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				return conn.Client.Rename(cmd.Context(), args[0], args[1])
			})
		},
	}
}

func statCmd(g *globals) *cobra.Command {
	var maxStripes int
	cmd := &cobra.Command{
		Use:   "stat PATH",
		Short: "Size, layout and, per stripe, its generation, PG and drives (like lfs getstripe)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				a, err := conn.Client.Resolve(ctx, args[0])
				if err != nil {
					return err
				}
				l := a.Layout
				fmt.Printf("path:    %s\ninode:   %d\ntype:    %s\nsize:    %d (%s)\nmode:    %s\n",
					args[0], a.Ino, typeName(a.Type), a.Size, human(int64(a.Size)), modeString(a))
				fmt.Printf("modify:  %s\nlayout:  pool %d, ec %d+%d, stripe unit %s, stripe %s\n",
					time.Unix(0, a.Mtime).Format(time.RFC3339Nano), l.Pool, l.K, l.M, human(int64(l.Unit)),
					human(client.StripeBytes(l)))
				if a.Type != meta.TypeFile || a.Size == 0 {
					return nil
				}
				sb := client.StripeBytes(l)
				last := (int64(a.Size) - 1) / sb
				recs, err := conn.Meta.Stripes(ctx, a.Ino, 0, uint64(last))
				if err != nil {
					return err
				}
				fmt.Printf("stripes: %d of %d allocated\n", len(recs), last+1)
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "stripe\tgeneration\tpg\tbytes\tshard\tdrives (data | parity)")
				for i, r := range recs {
					if maxStripes > 0 && i >= maxStripes {
						fmt.Fprintf(tw, "...\t(%d more; --max 0 shows all)\n", len(recs)-i)
						break
					}
					var ds []string
					for j, d := range r.Drives {
						if j == l.K {
							ds = append(ds, "|")
						}
						ds = append(ds, placement.DriveID(d).String())
					}
					fmt.Fprintf(tw, "%d\t%016x\t%d\t%d\t%s\t%s\n", r.Stripe, r.Gen, r.PG, r.Len,
						human(int64(r.ShardSize)), strings.Join(ds, " "))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&maxStripes, "max", 32, "stripes to list (0: all)")
	return cmd
}

func typeName(t meta.FileType) string {
	switch t {
	case meta.TypeDir:
		return "directory"
	case meta.TypeSymlink:
		return "symlink"
	case meta.TypeFile:
		return "file"
	default:
		return "special"
	}
}

func modeString(a meta.Attr) string {
	b := []byte("-rwxrwxrwx")
	switch a.Type {
	case meta.TypeDir:
		b[0] = 'd'
	case meta.TypeSymlink:
		b[0] = 'l'
	}
	for i := 0; i < 9; i++ {
		if a.Mode&(1<<(8-i)) == 0 {
			b[i+1] = '-'
		}
	}
	return string(b)
}
