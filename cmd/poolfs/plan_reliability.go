package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"poolfs/internal/bench"
	"poolfs/internal/plan"
)

func planReliabilityCmd() *cobra.Command {
	var f poolFlags
	var r rebuildFlags
	var in plan.ReliabilityInput
	var svg, scrubs string
	var fixedHours float64
	cmd := &cobra.Command{
		Use:   "reliability",
		Short: "Probability of data loss per year and MTTDL, Markov closed form and Monte Carlo",
		Long: `For each pool, simulates the rebuild of 1..M concurrent failures (as plan rebuild) to get
its rebuild windows, then computes the mean time to data loss and the probability of loss in a
year two ways: the Markov closed form (independent exponential failures and repairs) and a Monte
Carlo simulation with 95% confidence intervals that also takes correlated failures of an
enclosure or server (--enclosure-afr) and latent sector errors missed by scrub (--lse-per-drive-year,
--scrub-days). With no enclosure failures the two must agree within the interval, up to the
difference between fixed and exponential rebuild windows.

The textbook models are options: --rebuild-hours sets every rebuild window instead of the
simulation, --serial-repair rebuilds one failed drive at a time, --correlation makes each further
failure in a unit that many times likelier, --exponential-repair draws the Monte Carlo's windows
as the Markov chain assumes. With a RAID-6 group of Chen et al. (1994), it gives their MTTDL:
  poolfs plan reliability --drives 16 --scheme 14+2 --layout grouped --preservation -1 \
    --drive-size 5000000000 --afr 0.04383 --lse-per-drive-year 0 --rebuild-hours 1 \
    --serial-repair --correlation 10 --exponential-repair
(one group; their 100-data-disk array is 100/14 groups).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pools, err := f.pools()
			if err != nil {
				return err
			}
			if fixedHours < 0 || math.IsNaN(fixedHours) || math.IsInf(fixedHours, 0) {
				return fmt.Errorf("--rebuild-hours %g: want hours >= 0 (0: simulate)", fixedHours)
			}
			var scrubDays []float64
			for _, s := range strings.Split(scrubs, ",") {
				v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
				if err != nil || v < 0 {
					return fmt.Errorf("--scrub-days %q: want days >= 0 (0: never)", s)
				}
				scrubDays = append(scrubDays, v)
			}
			// The model's inputs are refused before the rebuild simulations
			// that give its windows (a minute's work for a big pool), with
			// one placeholder window per tolerated failure.
			for _, p := range pools {
				for _, sd := range scrubDays {
					q := in
					q.Pool, q.ScrubDays, q.RebuildHours = p, sd, slices.Repeat([]float64{1}, max(1, p.M))
					if err := q.Validate(); err != nil {
						return err
					}
				}
			}
			fmt.Printf("%-22s %6s %6s %-22s %12s %26s %10s %24s\n", "pool", "drives", "scrub", "rebuild windows", "MTTDL Markov", "MTTDL Monte Carlo (95%)", "loss/yr M", "loss/yr MC (95%)")
			var series []bench.Series
			prio := strings.Split(r.priorities, ",")[0]
			for _, p := range pools {
				var windows []float64
				var names []string
				var rin plan.RebuildInput
				for fails := 1; fails <= max(1, p.M); fails++ {
					r.failures = fails
					rin, err = r.input(p, prio)
					if err != nil {
						return err
					}
					if fixedHours > 0 {
						windows = append(windows, fixedHours)
						names = append(names, dur(fixedHours*3600))
						continue
					}
					res, err := plan.SimulateRebuild(rin)
					if err != nil {
						return fmt.Errorf("%d drives %s, %d failures: %w", p.Drives, poolName(p), fails, err)
					}
					w := res.LevelSeconds[min(fails, len(res.LevelSeconds)-1)]
					windows = append(windows, max(w, 1)/3600)
					names = append(names, dur(w))
				}
				for _, sd := range scrubDays {
					q := in
					q.Pool, q.FillBytes, q.RebuildHours, q.ScrubDays = p, rin.FillBytes, windows, sd
					rel, err := plan.Assess(q)
					if err != nil {
						return err
					}
					scrub := "never"
					if sd > 0 {
						scrub = fmt.Sprintf("%gd", sd)
					}
					fmt.Printf("%-22s %6d %6s %-22s %12s %26s %10s %24s\n", poolName(p), p.Drives, scrub, strings.Join(names, ", "),
						years(rel.MarkovMTTDLHours), fmt.Sprintf("%s [%s, %s]", years(rel.MCMTTDLHours), years(rel.MCMTTDLLow), years(rel.MCMTTDLHigh)),
						prob(rel.MarkovLossPerYear), fmt.Sprintf("%s [%s, %s]", prob(rel.MCLossPerYear), prob(rel.MCLossLow), prob(rel.MCLossHigh)))
					name := poolName(p)
					if len(scrubDays) > 1 {
						name += " scrub " + scrub
					}
					series = addSeries(series, name, float64(p.Drives), math.Log10(max(rel.MCLossPerYear, 1e-300)))
				}
			}
			return lineChart(svg, "Probability of data loss in a year (Monte Carlo)", "log10 P(loss per year)", series)
		},
	}
	f.add(cmd)
	r.add(cmd)
	fl := cmd.Flags()
	fl.Float64Var(&in.AFR, "afr", 0.02, "annual failure rate of a drive (0.02 = 2%)")
	fl.Float64Var(&in.EnclosureAFR, "enclosure-afr", 0, "annual failure rate of an enclosure (or server, the top domain), taking its drives away")
	fl.Float64Var(&in.EnclosureHours, "enclosure-hours", 4, "hours until a failed enclosure's drives return")
	fl.Float64Var(&in.LSEPerDriveYear, "lse-per-drive-year", 0.013, "latent sector errors a drive develops a year (1.3%: Bairavasundaram et al., SIGMETRICS 2007)")
	fl.StringVar(&scrubs, "scrub-days", "14", "days between scrubs that find latent errors, comma-separated (0: never scrubbed)")
	fl.Float64Var(&in.ServiceYears, "service-years", 5, "drive service life (how long an unscrubbed latent error can wait)")
	fl.IntVar(&in.Trials, "trials", 200000, "Monte Carlo excursions")
	fl.Uint64Var(&in.Seed, "seed", 1, "Monte Carlo seed")
	fl.Float64Var(&fixedHours, "rebuild-hours", 0, "every rebuild window, in hours, instead of the simulated ones (0: simulate)")
	fl.BoolVar(&in.SerialRepair, "serial-repair", false, "rebuild a unit's failed drives one at a time, each in the first window (the textbook model; poolfs rebuilds them at once)")
	fl.Float64Var(&in.CorrelationFactor, "correlation", 0, "each further failure in a unit is this many times likelier than the one before (0 or 1: independent)")
	fl.BoolVar(&in.ExponentialRepair, "exponential-repair", false, "Monte Carlo rebuild windows drawn from an exponential distribution, as the Markov chain assumes")
	fl.StringVar(&svg, "svg", "", "write a chart of the loss probability against pool size to this file")
	return cmd
}

// years formats hours as years.
func years(h float64) string {
	switch {
	case math.IsNaN(h):
		return "n/a"
	case math.IsInf(h, 1):
		return "inf"
	}
	return fmt.Sprintf("%.3g y", h/plan.HoursPerYear)
}

// prob formats a probability.
func prob(p float64) string {
	if math.IsNaN(p) {
		return "n/a"
	}
	return fmt.Sprintf("%.2g", p)
}
