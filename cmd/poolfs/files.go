package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"poolfs/internal/client"
	"poolfs/internal/cluster"
	"poolfs/internal/meta"
	"poolfs/internal/placement"
)

func fileCmds(g *globals) []*cobra.Command {
	return []*cobra.Command{putCmd(g), getCmd(g), lsCmd(g), mkdirCmd(g), rmCmd(g), mvCmd(g), statCmd(g)}
}

func lsCmd(g *globals) *cobra.Command {
	var long, escape, literal bool
	cmd := &cobra.Command{
		Use:   "ls [PATH]",
		Short: "List a directory",
		Long: `List a directory (default /). On a terminal, names are printed as GNU ls -b
prints them: control characters, other non-printable bytes, backslashes and
spaces escaped C-style (\n, \t, \033, \\, "\ "). Written to a pipe or a file,
names are printed as they are, as ls does. -b and -N choose either way.

` + pathRule,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			arg := "/"
			if len(args) == 1 {
				arg = args[0]
			}
			if escape && literal {
				return fmt.Errorf("ls: -b and -N exclude each other")
			}
			if !escape && !literal {
				escape = term.IsTerminal(int(os.Stdout.Fd()))
			}
			ctx := cmd.Context()
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				p, err := g.paths(conn).path(ctx, arg)
				if err != nil {
					return err
				}
				ents, err := conn.Client.ReadDir(ctx, p)
				if err != nil {
					return failed("access", err, arg)
				}
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				for _, e := range ents {
					name := e.Name
					if escape {
						name = escapeName(name)
					}
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
	cmd.Flags().BoolVarP(&escape, "escape", "b", false, "escape non-printable characters, backslashes and spaces C-style, as ls -b (default on a terminal)")
	cmd.Flags().BoolVarP(&literal, "literal", "N", false, "print names as they are (default when not writing to a terminal)")
	return cmd
}

func mkdirCmd(g *globals) *cobra.Command {
	var parents bool
	var pool string
	cmd := &cobra.Command{
		Use:   "mkdir PATH...",
		Short: "Create directories",
		Long:  "Create directories.\n\n" + pathRule,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				pa := g.paths(conn)
				for _, arg := range args {
					p, err := pa.path(ctx, arg)
					if err != nil {
						return err
					}
					if err := conn.Client.Mkdir(ctx, p, 0o755, parents); err != nil {
						return failed("create directory", err, arg)
					}
					if pool != "" {
						if err := conn.Client.SetPool(ctx, p, pool); err != nil {
							return failed("set the pool of", err, arg)
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
		Short: "Remove files and empty directories (and directories with their contents with -r)",
		Long:  "Remove files and empty directories; with -r, directories and their contents.\n\n" + pathRule,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				pa := g.paths(conn)
				for _, arg := range args {
					p, err := pa.path(ctx, arg)
					if err != nil {
						return err
					}
					if recursive {
						err = conn.Client.RemoveAll(ctx, p)
					} else {
						err = conn.Client.Remove(ctx, p)
					}
					if err != nil {
						return failed("remove", err, arg)
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
		Short: "Rename or move, atomically replacing NEW (a file moved onto a directory goes into it)",
		Long:  "Rename or move OLD to NEW, atomically replacing NEW; a file moved onto a\ndirectory goes into it, as with mv.\n\n" + pathRule,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				pa := g.paths(conn)
				oldp, err := pa.path(ctx, args[0])
				if err != nil {
					return err
				}
				newp, err := pa.path(ctx, args[1])
				if err != nil {
					return err
				}
				if _, err := conn.Client.Resolve(ctx, oldp); err != nil {
					return failed("stat", err, args[0])
				}
				return failed("move", conn.Client.Rename(ctx, oldp, newp), args[0], args[1])
			})
		},
	}
}

func statCmd(g *globals) *cobra.Command {
	var maxStripes int
	cmd := &cobra.Command{
		Use:   "stat PATH",
		Short: "Size, layout and, per stripe, its generation, PG and drives (like lfs getstripe)",
		Long:  "Size, layout and, per stripe, its generation, PG and drives (like lfs getstripe).\n\n" + pathRule,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				p, a, err := g.paths(conn).resolve(ctx, args[0])
				if err != nil {
					return err
				}
				l := a.Layout
				fmt.Printf("path:    %s\ninode:   %d\ntype:    %s\nsize:    %d (%s)\nmode:    %s\n",
					p, a.Ino, typeName(a.Type), a.Size, human(int64(a.Size)), modeString(a))
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
