package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"poolfs/internal/cluster"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
)

func poolCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "pool", Short: "Create and list pools"}
	cmd.AddCommand(poolCreateCmd(g), poolListCmd(g))
	return cmd
}

func poolCreateCmd(g *globals) *cobra.Command {
	var scheme, unit, size, preservation, layout string
	spec := mgmt.PoolSpec{}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a pool of new emulated drives (use it with `poolfs mkdir --pool NAME DIR`)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec.Name = args[0]
			var err error
			if spec.K, spec.M, err = cluster.ParseScheme(scheme); err != nil {
				return err
			}
			u, err := parseSize(unit)
			if err != nil {
				return err
			}
			spec.Unit = uint32(u)
			if spec.DriveSize, err = parseSize(size); err != nil {
				return err
			}
			spec.Preservation = -1
			if preservation != "auto" {
				if _, err := fmt.Sscanf(preservation, "%d", &spec.Preservation); err != nil || spec.Preservation < 0 {
					return fmt.Errorf("--preservation %q: want a number of drives or auto", preservation)
				}
			}
			switch layout {
			case "declustered":
				spec.Layout = placement.Declustered
			case "grouped":
				spec.Layout = placement.Grouped
			default:
				return fmt.Errorf("--layout %q: declustered or grouped", layout)
			}
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				if _, err := conn.Mgmt.CreatePool(cmd.Context(), spec); err != nil {
					return err
				}
				st, err := conn.Mgmt.Status(cmd.Context())
				if err != nil {
					return err
				}
				printPools(os.Stdout, st)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&spec.Drives, "drives", 12, "number of new emulated drives")
	f.StringVar(&scheme, "scheme", "8+2", "erasure scheme K+M")
	f.StringVar(&unit, "unit", "1M", "stripe unit")
	f.StringVar(&size, "drive-size", "10G", "capacity each new drive advertises")
	f.StringVar(&preservation, "preservation", "auto", "drives' worth kept free for rebuilds")
	f.StringVar(&layout, "layout", "declustered", "declustered or grouped (RAID-6-style groups with hot spares)")
	f.BoolVar(&spec.Force, "force", false, "create the drives even if they advertise more than the host has free")
	return cmd
}

func poolListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List pools with their capacity",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				st, err := conn.Mgmt.Status(cmd.Context())
				if err != nil {
					return err
				}
				printPools(os.Stdout, st)
				return nil
			})
		},
	}
}
