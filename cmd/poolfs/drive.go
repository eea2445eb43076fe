package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

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
				conn, err := g.connect(cmd.Context())
				if err != nil {
					return err
				}
				defer conn.Close()
				if err := conn.Mgmt.FailDrive(cmd.Context(), id); err != nil {
					return err
				}
				fmt.Printf("drive %v failed; rebuild started (poolfs rebuild watch)\n", id)
				return nil
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
				conn, err := g.connect(cmd.Context())
				if err != nil {
					return err
				}
				defer conn.Close()
				nid, err := conn.Mgmt.ReplaceDrive(cmd.Context(), id)
				if err != nil {
					return err
				}
				fmt.Printf("drive %v replaced by %v; rebalancing (poolfs rebuild watch)\n", id, nid)
				return nil
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
			conn, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer conn.Close()
			id, err := conn.Mgmt.AddDrive(cmd.Context(), pool)
			if err != nil {
				return err
			}
			fmt.Printf("drive %v added; rebalancing (poolfs rebuild watch)\n", id)
			return nil
		},
	}
	cmd.Flags().StringVar(&pool, "pool", "", "pool to grow (default: the first)")
	return cmd
}

func driveFaultCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "fault ID fail|heal|corrupt FRACTION|slow DURATION",
		Short: "Inject a fault into an emulated drive: I/O errors, silent bit flips in a fraction of reads, slowness",
		Args:  cobra.RangeArgs(2, 3),
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
			case "fail", "heal":
			default:
				return fmt.Errorf("fault %q: want fail, heal, corrupt FRACTION or slow DURATION", a.Op)
			}
			conn, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer conn.Close()
			if err := conn.Mgmt.DriveFault(cmd.Context(), a); err != nil {
				return err
			}
			fmt.Printf("drive %v: %s injected\n", id, a.Op)
			return nil
		},
	}
}
