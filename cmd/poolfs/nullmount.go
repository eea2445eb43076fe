package main

import (
	"fmt"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/spf13/cobra"

	"poolfs/internal/fusenull"
)

// nullMountCmd mounts a FUSE file system that discards writes and reads
// zeros: the FUSE ceiling that the mount benchmark compares poolfs with.
func nullMountCmd() *cobra.Command {
	var o fusenull.Options
	var loopback string
	cmd := &cobra.Command{
		Use:    "mount-null MOUNTPOINT",
		Short:  "Mount a FUSE file system that discards writes (measures the FUSE ceiling)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var srv *fuse.Server
			var err error
			if loopback != "" {
				srv, err = fusenull.MountLoopback(args[0], loopback)
			} else {
				srv, err = fusenull.Mount(args[0], o)
			}
			if err != nil {
				return err
			}
			fmt.Printf("null file system mounted on %s (Ctrl-C unmounts)\n", args[0])
			go func() {
				<-cmd.Context().Done()
				srv.Unmount()
			}()
			srv.Wait()
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.DirectIO, "direct-io", false, "open files with FOPEN_DIRECT_IO")
	cmd.Flags().BoolVar(&o.ParallelIO, "parallel", false, "with --direct-io, allow parallel writes to one file")
	cmd.Flags().IntVar(&o.MaxWrite, "max-write", 1<<20, "largest FUSE request")
	cmd.Flags().StringVar(&loopback, "loopback", "", "instead, pass the namespace through to this local directory (the metadata ceiling of FUSE; use a tmpfs directory)")
	cmd.Flags().IntVar(&o.Readahead, "readahead", 0, "kernel readahead in bytes (0: as the poolfs mount, -1: the kernel default)")
	return cmd
}
