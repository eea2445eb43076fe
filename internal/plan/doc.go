// Package plan answers the questions asked before a pool is bought: how
// much of its raw capacity is usable, how long a drive's rebuild takes under
// load, and how likely the pool is to lose data. It is pure: no I/O, no
// clock, no goroutines; the same input gives the same answer (Monte Carlo
// runs are seeded).
//
// # Capacity
//
// CapacityOf computes a pool's capacity with the code `poolfs status` uses
// (clustermap.Map.PoolCapacity: preservation capacity, drive write
// limits), plus the drives the grouped layout leaves unused. Raw = Usable +
// Parity + Preservation + Unused, and Usable : Parity = K : M.
//
// # Rebuild
//
// SimulateRebuild runs the real thing on a simulated clock. It fails drives
// d03, d04, ... of the pool, finds the PGs that held them
// (placement.Placer.PGsOf), places every PG at the new epoch with the
// placement package, puts the pool's stripes in the PGs by the real stripe
// hash (placement.PGOf; above a few million stripes, Poisson counts per PG),
// and plans the rebuild with recovery.Make, the planner the management
// service runs. The plan's tasks then run in discrete-event time under the
// rules of recovery.Run (tasks per drive, tasks in flight, critical first),
// the storage servers' rebuild gate (recovery.GateAdmit, the servers' code:
// a drive clients use gives rebuild one I/O per slot of its priority's
// share; an idle one is taken whole) and the
// drive model of chunkstore.SpeedModel (one I/O at a time, each taking
// Service of its size). Large pools are simulated with at most SimStripes
// stripes, each standing for the real stripes of its PG.
//
// Client load is one number, the fraction of each drive's time clients
// use; it sets how often a drive counts as busy for the gate and how long a
// rebuild I/O queues behind client I/O. The result is the rebuild time from
// the start of the rebuild run, the time until the stripes at each level of
// loss are restored (LevelSeconds: the critical window), the busiest drive's
// share, the drive-model bound and an estimate of client throughput.
//
// What is left out: failure detection and the metadata scan before the run
// (seconds), the CPU (the simulation assumes the drives bound the rebuild,
// as `poolfs bench rebuild` arranges), the network, and client I/O of a
// shape other than evenly spread stripes.
//
// # Reliability
//
// Assess gives the mean time to data loss and the probability of loss in a
// year two ways. The Markov closed form solves the birth-death chain on the
// number of failed drives of a unit (a group if grouped, the pool if
// declustered) with failures at (n-i)λ (c^i·(n-i)λ with a CorrelationFactor
// c), repairs at Σ_{j≤i} 1/T_j (T_j the rebuild window of the j-th
// concurrent failure, from SimulateRebuild; 1/T_1 with SerialRepair, one
// rebuild at a time as the textbook formulas assume), loss
// from M failed with the chance that the M+1 failed drives share a PG
// (Coverage) and, on reaching M, with the chance that the rebuild meets a
// latent sector error (LSELossProb). The Monte Carlo estimate runs the same
// model drive by drive with fixed (or, to check against the chain,
// exponential) windows, and adds what the chain cannot: correlated failures
// of an enclosure or server, whose drives return after EnclosureHours, with
// placement's domain limit (at most M fragments of a stripe per domain).
// Loss is rare, so it uses failure biasing with likelihood ratios over
// regenerative cycles and reports a 95% confidence interval; with
// exponential windows and no enclosure failures the closed form must lie
// inside it (TestMarkovMatchesMonteCarlo). Set to the published model, both
// reproduce the RAID-6 (P+Q) MTTDL of Chen et al. 1994 within 1%
// (TestPublishedRAID6MTTDL).
package plan
