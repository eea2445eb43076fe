package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"poolfs/internal/bench"
)

// benchCmd is `poolfs bench`: the acceptance benchmarks (internal/bench).
func benchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Acceptance benchmarks: ior, mdtest, survey, fsx, and reports from their results",
	}
	cmd.AddCommand(benchIORCmd(g), benchMDTestCmd(g), benchSurveyCmd(g), benchFSXCmd(), benchReportCmd(),
		benchTaskCmd("ior"), benchTaskCmd("mdtest"))
	return cmd
}

// benchTarget holds the flags that say where ior and mdtest do their I/O.
type benchTarget struct {
	api, dir, label, json, hosts string
}

func (b *benchTarget) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&b.dir, "dir", "", "directory to work in, which must exist: any local directory (in a poolfs mount, on a local FS) with --api posix; a path inside poolfs (default /bench) with --api poolfs")
	f.StringVar(&b.api, "api", bench.APIPosix, "I/O path: posix (os file I/O on --dir) or poolfs (the client library through the cluster of -c, no FUSE)")
	f.StringVar(&b.label, "label", "", "what is measured, shown in reports (default: the api and dir)")
	f.StringVar(&b.json, "json", "", "write the result to this file (schema: docs/bench.md)")
	f.StringVar(&b.hosts, "hosts", "", "hosts file: run task i through ssh on host i mod N (poolfs must be in PATH there)")
}

func (b *benchTarget) target(g *globals) bench.Target {
	t := bench.Target{API: b.api, Dir: b.dir}
	if b.api == bench.APIPoolfs {
		t.Cluster = g.dir
	}
	return t
}

// noteFS says on stderr which file system a posix --dir is on when that is
// not poolfs: an unmounted mount point is an ordinary directory of the
// disk below it, and would be measured without a word.
func (b *benchTarget) noteFS() {
	if b.api != bench.APIPosix || b.dir == "" {
		return
	}
	abs, err := filepath.Abs(b.dir)
	if err != nil {
		return
	}
	ms, err := readMounts()
	if i := mountOf(abs, ms); err == nil && i >= 0 && ms[i].fstype != poolfsFSType {
		fmt.Fprintf(os.Stderr, "note: --dir %s is on %s (%s mounted on %s), not in a poolfs mount\n", b.dir, ms[i].fstype, ms[i].source, ms[i].point)
	}
}

func (b *benchTarget) launcher() (bench.Launcher, error) {
	p := bench.Procs{Stderr: os.Stderr}
	if b.hosts != "" {
		hosts, err := bench.ReadHostsFile(b.hosts)
		if err != nil {
			return nil, err
		}
		p.Hosts = hosts
	}
	return p, nil
}

func (b *benchTarget) finish(res *bench.Result) error {
	if res.Label == "" {
		res.Label = b.api + " " + b.dir
	}
	if b.json != "" {
		if err := res.WriteFile(b.json); err != nil {
			return err
		}
	}
	return bench.WriteReport(os.Stdout, []*bench.Result{res}, bench.ReportOptions{})
}

func benchIORCmd(g *globals) *cobra.Command {
	var (
		tgt                  benchTarget
		transfers, tasks     string
		block                string
		write, read, noCheck bool
		direct               bool
	)
	t := bench.IORTask{Segments: 1, Iterations: 1, Seed: 0x5eed, Name: "ior.dat", Layout: bench.LayoutSegmented}
	cmd := &cobra.Command{
		Use:   "ior",
		Short: "IOR-style bandwidth: sequential or random, write and read, N task processes",
		Long: `Each of N tasks (processes) writes block bytes per segment in transfer-size
calls, then reads back (with -C the data another task wrote), every byte
checked. Bandwidth is MiB/s (2^20 bytes) over the slowest task's time.
Sweeps: --transfer 1k,4k,64k,1m,4m --tasks 1,2,4,8.`,
		Example: `  poolfs bench ior --dir /tmp/x -t 1m -b 64m --tasks 1,2 -F -e
  poolfs bench ior --api poolfs -c ./poolfs-data -t 64k,1m,4m -b 16m --tasks 2 -C --json ior.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			xs, err := bench.ParseSizeList(transfers)
			if err != nil {
				return err
			}
			ns, err := bench.ParseIntList(tasks)
			if err != nil {
				return err
			}
			if t.Block, err = bench.ParseSize(block); err != nil {
				return err
			}
			t.Target = tgt.target(g)
			t.Target.Direct = direct
			tgt.noteFS()
			t.Write, t.Read, t.Verify = write || !read, read || !write, !noCheck
			l, err := tgt.launcher()
			if err != nil {
				return err
			}
			res := bench.NewResult("ior", tgt.label, time.Now(), bench.ThisHost())
			res.IOR, err = bench.RunIOR(cmd.Context(), bench.IOROptions{Task: t, Transfers: xs, Tasks: ns, Launcher: l,
				Progress: func(r bench.IORRun) {
					var s []string
					for _, p := range r.Phases {
						s = append(s, fmt.Sprintf("%s %.1f MiB/s", p.Phase, p.BW.Mean))
					}
					fmt.Fprintf(os.Stderr, "ior: %d tasks, transfer %s: %s\n", r.Tasks, bench.FormatSize(r.Transfer), strings.Join(s, ", "))
				}})
			if err != nil {
				return err
			}
			return tgt.finish(res)
		},
	}
	tgt.flags(cmd)
	f := cmd.Flags()
	f.StringVarP(&transfers, "transfer", "t", "1m", "transfer size per I/O call, or a comma-separated sweep (1k,4k,1m)")
	f.StringVarP(&block, "block", "b", "16m", "bytes per task per segment (a multiple of every transfer size)")
	f.IntVarP(&t.Segments, "segments", "s", 1, "segments")
	f.StringVarP(&tasks, "tasks", "N", "1", "task processes, or a comma-separated sweep (1,2,4,8)")
	f.BoolVarP(&t.FilePerTask, "file-per-task", "F", false, "one file per task (default: one shared file)")
	f.StringVar(&t.Layout, "layout", bench.LayoutSegmented, "shared file layout: segmented or strided")
	f.BoolVarP(&t.Random, "random", "z", false, "random transfer order")
	f.BoolVarP(&write, "write", "w", false, "write phase only (with -r: both; default both)")
	f.BoolVarP(&read, "read", "r", false, "read phase only (reads what an earlier -w -k run wrote)")
	f.BoolVarP(&t.Fsync, "fsync", "e", false, "fsync before close in the write phase")
	f.BoolVarP(&t.Reorder, "reorder", "C", false, "task i reads the data of task (i+1) mod N, so caches are not measured")
	f.BoolVar(&noCheck, "no-verify", false, "do not check the bytes read")
	f.BoolVar(&direct, "direct", false, "open the files O_DIRECT, bypassing the page cache (posix API; transfer a multiple of 4k)")
	f.BoolVarP(&t.Keep, "keep", "k", false, "keep the files")
	f.IntVarP(&t.Iterations, "iterations", "i", 1, "iterations (min/mean/max are over them)")
	f.Uint64Var(&t.Seed, "seed", t.Seed, "data pattern seed")
	f.StringVarP(&t.Name, "name", "o", t.Name, "test file name (file per task: NAME.RANK)")
	return cmd
}

func benchMDTestCmd(g *globals) *cobra.Command {
	var (
		tgt                 benchTarget
		tasks, dirs, wbytes string
		filesOnly, dirsOnly bool
	)
	t := bench.MDTestTask{Items: 1000, Iterations: 1, Seed: 0x5eed, Name: "mdtest"}
	cmd := &cobra.Command{
		Use:   "mdtest",
		Short: "mdtest-style metadata rates: create, stat, read, remove of files and directories",
		Example: `  poolfs bench mdtest --dir /tmp/x -n 1000 --tasks 1,2
  poolfs bench mdtest --api poolfs -c ./poolfs-data -n 2000 --tasks 4 --dirs 100,1000,10000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := bench.ParseIntList(tasks)
			if err != nil {
				return err
			}
			ds, err := bench.ParseIntList(dirs)
			if err != nil {
				return err
			}
			if wbytes != "0" {
				if t.WriteBytes, err = bench.ParseSize(wbytes); err != nil {
					return err
				}
			}
			t.Target = tgt.target(g)
			tgt.noteFS()
			t.Files, t.Directories, t.Dirs = !dirsOnly, !filesOnly, ds[0]
			l, err := tgt.launcher()
			if err != nil {
				return err
			}
			res := bench.NewResult("mdtest", tgt.label, time.Now(), bench.ThisHost())
			res.MDTest, err = bench.RunMDTest(cmd.Context(), bench.MDTestOptions{Task: t, Tasks: ns, Dirs: ds, Launcher: l,
				Progress: func(r bench.MDTestRun) {
					fmt.Fprintf(os.Stderr, "mdtest: %d tasks, %d dirs done\n", r.Tasks, r.Dirs)
				}})
			if err != nil {
				return err
			}
			return tgt.finish(res)
		},
	}
	tgt.flags(cmd)
	f := cmd.Flags()
	f.IntVarP(&t.Items, "items", "n", t.Items, "files and directories per task")
	f.StringVarP(&tasks, "tasks", "N", "1", "task processes, or a comma-separated sweep")
	f.StringVar(&dirs, "dirs", "1", "leaf directories the items are spread over, or a sweep (100,1000,10000)")
	f.BoolVarP(&t.Unique, "unique-dir", "u", false, "each task works in its own directory tree")
	f.StringVarP(&wbytes, "write-bytes", "w", "0", "bytes written to each file at create and read back")
	f.BoolVarP(&filesOnly, "files-only", "F", false, "file phases only")
	f.BoolVarP(&dirsOnly, "dirs-only", "D", false, "directory phases only")
	f.IntVarP(&t.Iterations, "iterations", "i", 1, "iterations")
	f.StringVarP(&t.Name, "name", "o", t.Name, "tree name below --dir")
	return cmd
}

func benchSurveyCmd(g *globals) *cobra.Command {
	var size, record, label, jsonOut string
	o := bench.SurveyOptions{}
	cmd := &cobra.Command{
		Use:   "survey",
		Short: "obdfilter-survey-style raw write, rewrite and read bandwidth of every drive and of the pool",
		Long: `Writes sealed fragments with synthetic keys to every up drive through its
storage server (bypassing the namespace), rewrites and reads them (checking
every CRC), then deletes them. Drives below --slow times the median are flagged.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Size, err = bench.ParseSize(size); err != nil {
				return err
			}
			if o.Record, err = bench.ParseSize(record); err != nil {
				return err
			}
			o.Cluster = g.dir
			res := bench.NewResult("survey", label, time.Now(), bench.ThisHost())
			if res.Label == "" {
				res.Label = "cluster " + g.dir
			}
			if res.Survey, err = bench.RunSurvey(cmd.Context(), o); err != nil {
				return err
			}
			if jsonOut != "" {
				if err := res.WriteFile(jsonOut); err != nil {
					return err
				}
			}
			return bench.WriteReport(os.Stdout, []*bench.Result{res}, bench.ReportOptions{})
		},
	}
	f := cmd.Flags()
	f.StringVar(&size, "size", "256m", "bytes written to each drive")
	f.StringVar(&record, "record", "1m", "shard bytes per fragment")
	f.IntVar(&o.Threads, "threads", 4, "concurrent fragment I/Os per drive")
	f.Float64Var(&o.Slow, "slow", 0.8, "flag drives below this fraction of the median bandwidth")
	f.StringVar(&label, "label", "", "name shown in reports")
	f.StringVar(&jsonOut, "json", "", "write the result to this file (schema: docs/bench.md)")
	return cmd
}

func benchReportCmd() *cobra.Command {
	var charts string
	var limits []string
	cmd := &cobra.Command{
		Use:     "report RESULT.json...",
		Short:   "Markdown tables and SVG charts from result files",
		Example: `  poolfs bench report local.json poolfs.json --charts figs --limit disk=1450 > report.md`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := bench.ReportOptions{ChartDir: charts}
			for _, s := range limits {
				l, err := bench.ParseLimit(s)
				if err != nil {
					return err
				}
				o.Limits = append(o.Limits, l)
			}
			if charts != "" {
				if err := os.MkdirAll(charts, 0o755); err != nil {
					return err
				}
			}
			var rs []*bench.Result
			for _, a := range args {
				r, err := bench.ReadResult(a)
				if err != nil {
					return err
				}
				rs = append(rs, r)
			}
			return bench.WriteReport(os.Stdout, rs, o)
		},
	}
	cmd.Flags().StringVar(&charts, "charts", "", "write SVG charts into this directory")
	cmd.Flags().StringArrayVar(&limits, "limit", nil, "reference bandwidth NAME=MiB/s; bandwidths are also shown as % of it (repeatable)")
	return cmd
}

// benchTaskCmd is the hidden task process of ior or mdtest: it speaks the
// barrier protocol of bench.Procs on stdin and stdout.
func benchTaskCmd(kind string) *cobra.Command {
	var spec string
	var rank, tasks int
	cmd := &cobra.Command{
		Use:    kind + "-task",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := bench.DecodeTaskSpec(spec)
			if err != nil {
				return err
			}
			if s.Kind != kind {
				return fmt.Errorf("%w: %s-task given a %s spec", bench.ErrUsage, kind, s.Kind)
			}
			return bench.ServeTask(cmd.Context(), s, rank, tasks, os.Stdin, os.Stdout)
		},
	}
	cmd.Flags().StringVar(&spec, "spec", "", "task spec (base64url JSON)")
	cmd.Flags().IntVar(&rank, "rank", 0, "this task's rank")
	cmd.Flags().IntVar(&tasks, "tasks", 1, "number of tasks")
	return cmd
}
