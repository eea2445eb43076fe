package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"poolfs/internal/bench"
	"poolfs/internal/fsx"
)

// benchFSXCmd is `poolfs bench fsx`: the file system exerciser (package
// fsx) on one file, any file system.
func benchFSXCmd() *cobra.Command {
	o := fsx.Options{Ops: 10000, Seed: 1, CheckEvery: 1000}
	var maxSize, maxLen, off string
	var seeds int
	var trace string
	var deadline time.Duration
	cmd := &cobra.Command{
		Use:   "fsx FILE",
		Short: "fsx-style exerciser: seeded random I/O on one file, every read checked against a model",
		Long: `Runs a seeded random sequence of operations on FILE (created, or truncated to zero):
pread, pwrite, mmap reads and writes, ftruncate, fallocate (with and without keep-size),
hole punching, zero range, copy_file_range, fsync/fdatasync and close-and-reopen. The
expected contents are kept in memory, and every read, the size after every change, and the
whole file every --check-every operations are compared byte for byte. A mismatch prints the
operation, the first wrong offset and the operations that touched it, and exits 1. The same
--seed gives the same operations. Operations the file system refuses as unsupported are
turned off and listed. FILE may be on any file system (run it on a local one to compare).
Do not run it inside the process that serves the mount (poolfs up --mount is another process).`,
		Example: `  poolfs bench fsx /mnt/poolfs/fsx.dat --ops 100000 --max-size 64m --max-len 1m
  poolfs bench fsx /mnt/poolfs/fsx.dat --direct --align 4096 --off mapread,mapwrite
  poolfs bench fsx /mnt/poolfs/fsx.dat --seeds 20 --ops 5000`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			o.Path = args[0]
			if o.MaxSize, err = bench.ParseSize(maxSize); err != nil {
				return err
			}
			if o.MaxLen, err = bench.ParseSize(maxLen); err != nil {
				return err
			}
			if off != "" {
				o.Off = strings.Split(off, ",")
			}
			o.Deadline = deadline
			if trace != "" {
				tf, err := os.Create(trace)
				if err != nil {
					return err
				}
				defer tf.Close()
				o.Trace = tf
			}
			if seeds < 1 {
				return fmt.Errorf("--seeds must be at least 1")
			}
			tty := term.IsTerminal(int(os.Stderr.Fd()))
			first := o.Seed
			for s := range uint64(seeds) {
				o.Seed = first + s
				o.Progress = func(n int) {
					if tty {
						fmt.Fprintf(os.Stderr, "\rseed %d: %d/%d operations", o.Seed, n, o.Ops)
					}
				}
				start := time.Now()
				res, err := fsx.Run(o)
				if tty {
					fmt.Fprint(os.Stderr, "\r\033[K")
				}
				if err != nil {
					return fmt.Errorf("seed %d, after %d operations: %w", o.Seed, res.Done, err)
				}
				names := slices.Sorted(func(yield func(string) bool) {
					for k := range res.Counts {
						if !yield(k) {
							return
						}
					}
				})
				var parts []string
				for _, k := range names {
					parts = append(parts, fmt.Sprintf("%s %d", k, res.Counts[k]))
				}
				fmt.Printf("seed %d: %d operations in %s, all reads matched; final size %s (%s)\n",
					o.Seed, res.Done, time.Since(start).Round(time.Millisecond), bench.FormatSize(res.Size), strings.Join(parts, ", "))
				for k, why := range res.Off {
					fmt.Printf("seed %d: %s turned off, unsupported: %s\n", o.Seed, k, why)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Ops, "ops", o.Ops, "operations per seed")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "first seed")
	f.IntVar(&seeds, "seeds", 1, "run this many seeds, one after the other (seed, seed+1, ...)")
	f.StringVar(&maxSize, "max-size", "16m", "the file never grows beyond this")
	f.StringVar(&maxLen, "max-len", "256k", "longest read, write or range of one operation")
	f.Int64Var(&o.Align, "align", 1, "offsets and lengths of reads, writes and copies are multiples of this (4096 with --direct)")
	f.BoolVar(&o.Direct, "direct", false, "open the file with O_DIRECT (use --align 4096; mmap may be refused)")
	f.IntVar(&o.CheckEvery, "check-every", o.CheckEvery, "compare the whole file every N operations (0: only at the end)")
	f.IntVar(&o.ReopenEvery, "reopen-every", 50, "close and reopen the file every N operations on average (0: never)")
	f.StringVar(&off, "off", "", "comma-separated operations not to run: "+strings.Join(fsx.OpNames, ","))
	f.StringVar(&o.Other, "other", "", "the same file by another path (through a second mount): checked whole after every close (close-to-open)")
	f.StringVar(&trace, "trace", "", "write every operation to this file, one a line, before it runs")
	f.DurationVar(&deadline, "time", 0, "stop each seed cleanly after this long (0: no limit)")
	return cmd
}
