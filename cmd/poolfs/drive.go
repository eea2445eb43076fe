package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/cluster"
	"poolfs/internal/placement"
	"poolfs/internal/storage"
)

func driveCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "drive", Short: "Fail, replace, add drives and inject faults"}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "fail ID",
			Short: "Declare a drive failed (its emulated drive stops answering); rebuild starts by itself",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				id, err := placement.ParseDriveID(args[0])
				if err != nil {
					return err
				}
				return g.withConn(cmd, func(conn *cluster.Conn) error {
					if err := conn.Mgmt.FailDrive(cmd.Context(), id); err != nil {
						return err
					}
					fmt.Printf("drive %v failed; rebuild started (poolfs rebuild watch)\n", id)
					return nil
				})
			},
		},
		&cobra.Command{
			Use:   "replace ID",
			Short: "Take a drive out and put a new empty one in its place; rebalancing fills it",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				id, err := placement.ParseDriveID(args[0])
				if err != nil {
					return err
				}
				return g.withConn(cmd, func(conn *cluster.Conn) error {
					nid, err := conn.Mgmt.ReplaceDrive(cmd.Context(), id)
					if err != nil {
						return err
					}
					fmt.Printf("drive %v replaced by %v; rebalancing (poolfs rebuild watch)\n", id, nid)
					return nil
				})
			},
		},
		driveAddCmd(g),
		driveFaultCmd(g),
	)
	return cmd
}

func driveAddCmd(g *globals) *cobra.Command {
	var pool string
	cmd := &cobra.Command{
		Use:   "add",
		Short: "Add a new empty drive to a pool; about 1/N of the data moves onto it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				id, err := conn.Mgmt.AddDrive(cmd.Context(), pool)
				if err != nil {
					return err
				}
				fmt.Printf("drive %v added; rebalancing (poolfs rebuild watch)\n", id)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&pool, "pool", "", "pool to grow (default: the first)")
	return cmd
}

func driveFaultCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "fault ID fail|heal|offline|online|corrupt FRACTION|slow DURATION",
		Short: "Inject a fault into an emulated drive: I/O errors, unreachable for a while, silent bit flips in a fraction of reads, slowness",
		Long: `Inject a fault into an emulated drive. Faults add up: a drive may be slow and
corrupt at once.

  fail      every I/O returns an error: the drive is declared failed and rebuilt
  heal      clear every injected fault at once (fail, offline, corrupt, slow);
            a drive already declared failed stays failed (drive replace)
  offline   the drive stops answering, as when its server restarts or a cable
            is pulled: it is marked down, not failed; reads reconstruct, new
            stripes go elsewhere, nothing is rebuilt. Unless it comes back
            within the pool's down-grace (poolfs pool set down-grace, default
            10m) it is then declared failed and rebuilt.
  online    the drive answers again: it is marked up, and only the stripes
            written while it was away are copied back onto it
  corrupt F flip one bit in a fraction F (0..1) of reads (read repair fixes
            them; bench survey counts them per drive); corrupt 0 stops it
  slow D    add delay D (e.g. 20ms) to every I/O; slow 0 stops it`,
		Example: `  poolfs drive fault d03 corrupt 0.01
  poolfs drive fault d03 heal`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := placement.ParseDriveID(args[0])
			if err != nil {
				return err
			}
			a := storage.FaultArgs{Drive: id, Op: args[1], Seed: time.Now().UnixNano()}
			switch a.Op {
			case "corrupt":
				if len(args) != 3 {
					return fmt.Errorf("corrupt needs a FRACTION, e.g. 0.01")
				}
				if a.Fraction, err = strconv.ParseFloat(args[2], 64); err != nil || a.Fraction < 0 || a.Fraction > 1 {
					return fmt.Errorf("fraction %q: want 0..1", args[2])
				}
			case "slow":
				if len(args) != 3 {
					return fmt.Errorf("slow needs a DURATION, e.g. 20ms")
				}
				if a.Delay, err = time.ParseDuration(args[2]); err != nil || a.Delay < 0 {
					return fmt.Errorf("duration %q: want e.g. 20ms", args[2])
				}
			case "fail", "heal", "offline", "online":
			default:
				return fmt.Errorf("fault %q: want fail, heal, offline, online, corrupt FRACTION or slow DURATION", a.Op)
			}
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				if err := conn.Mgmt.DriveFault(cmd.Context(), a); err != nil {
					return err
				}
				fmt.Printf("drive %v: %s injected\n", id, a.Op)
				if a.Op == "offline" || a.Op == "online" {
					if m, err := conn.Mgmt.Map(cmd.Context()); err == nil {
						if d, err := m.Drive(id); err == nil {
							fmt.Printf("drive %v is %s at map epoch %d\n", id, d.State, m.Epoch)
						}
					}
				}
				return nil
			})
		},
	}
}
