// Package sqlite is the embedded meta.Engine: one SQLite database file in
// WAL mode with a single table kv(k BLOB PRIMARY KEY, v BLOB NOT NULL)
// WITHOUT ROWID.
//
// Durability and group commit. Update returns nil only after the
// transaction is durable: synchronous=FULL, so every commit fsyncs the WAL.
// To make that cheap, concurrent Update calls are batched into a single
// SQLite transaction (BEGIN IMMEDIATE ... COMMIT, one fsync), run by one
// goroutine at a time (the committer: the Update that found no batch
// running, or the goroutine it hands the queue to; writers in
// sqlite.go): each fn runs inside its own SAVEPOINT, so an fn that returns
// an error rolls back only its own writes, and fns of a batch run one after
// another, so the batch is equivalent to running them serially. If the
// batch's COMMIT fails, every Update in it returns that error and none of
// their writes is visible. While one batch commits, the next one gathers.
//
// A batch of one Update (a lone writer) runs without a savepoint: its
// error rolls back the whole transaction.
//
// Lingering transactions (Options.Linger, linger.go) go further for a
// Deferred engine: the transaction stays open for later Updates, which
// return once the cache holds their writes; it commits after Linger, at
// Sync and at Close. Their writes run in SQLite behind them ("Writes
// behind" in linger.go): at commit, on a goroutine other than the
// Update's, and before any Scan; a Get reads them from memory first. A
// key written by many Updates of one transaction is stored once, and an
// Update that scans nothing runs no statement and no savepoint. A View
// that misses the cache while such writes are uncommitted runs on the
// write connection inside the open transaction, so every View sees every
// Update that returned before it began.
//
// Reads (View) run on a pool of read-only connections, each in its own
// deferred transaction, which in WAL mode is a consistent snapshot. They
// map the database file (mmap_size), because SQLite drops a connection's
// page cache whenever another connection committed: with a map, re-reading
// checkpointed pages costs no system call.
//
// The cache (cache.go). Most reads run no SQLite statement: the engine
// keeps the committed values (and absences) of recently used keys, and a
// View whose keys are all cached reads only them. This is correct because
// the engine is the database's only writer: Open takes an exclusive flock
// on the file (a second engine on it fails at once with a clear error),
// and the committer applies each batch's writes to the cache after COMMIT
// and before any of its Updates returns. A View still sees one committed
// state: cache entries carry the generation since which they hold, a View
// uses only entries no newer than the generation it started at, and when
// it must go to SQLite it checks the snapshot against what it already
// returned (and, in the rare case they differ, runs again on SQLite
// alone, so a View's fn may run twice, as an Update's may).
//
// Integrity (integrity.go). A damaged page can hide records as well as
// garble them (a file's stripes then read as holes, and the orphan scan
// takes live fragments for garbage), so Open runs PRAGMA integrity_check
// before anything reads the store and refuses a corrupt one with an error
// wrapping meta.ErrStoreCorrupt that names the problems. CheckIntegrity
// runs quick_check or integrity_check on a read connection while the
// engine runs (the cluster does so periodically and before an orphan
// scan). Either check reads every page, so its cost grows with the store;
// for poolfs's single table the full check costs little more than the
// quick one (BenchmarkIntegrityCheck), so Open runs the full one.
//
// Backup and restore (backup.go). Backup writes a consistent snapshot of
// the committed store to a new file (mode 0600) with VACUUM INTO on a read
// connection, so writers go on meanwhile; Restore verifies a backup with
// the full integrity check and puts it in place of a stopped engine's
// database, keeping the replaced one aside.
package sqlite
