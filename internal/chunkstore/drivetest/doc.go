// Package drivetest provides in-memory drives for tests of the layers above
// chunkstore (the client's data path, stripeio, fsck, the management
// service): a Drive that keeps its fragments in memory and answers the
// chunkstore.Drive contract as a LocalDrive does, with the faults and the
// observations such tests need, and Drives, a set of them resolved by ID
// as a storage dialer resolves remote drives (UpOnly: as the client does).
// It is used by tests only; docs/test-fakes.md says when to use it.
//
// A Drive stores its fragments in a chunkstore.MemDrive, which checks its
// arguments as a real drive does (fragment lengths and read ranges aligned
// to chunkstore.Align, else chunkstore.ErrInvalid; a missing fragment is
// chunkstore.ErrNotFound; a write beyond the capacity is
// chunkstore.ErrFull and stores nothing), and copies what it is given and
// what it returns, so that a test sees the data path's buffer ownership
// mistakes as wrong bytes rather than passing by aliasing.
//
// Faults, in the order a call meets them:
//
//   - Hold: calls of the held operations wait, whatever their context
//     says, until released: a drive that does not answer at all.
//   - FailWrites: writes fail with a given error and store nothing.
//   - Fail, Offline, SlowDown, CorruptReads (a chunkstore.FaultyDrive,
//     embedded): the faults an operator can inject into a real drive.
//
// Every call is counted when it is made (Reads, Writes, Deletes), whatever
// its outcome; bytes are counted when a call succeeds (BytesRead,
// BytesWritten). Put, Remove, Fragment and Corrupt reach the stored
// fragments directly, past faults, holds and counters (though what they
// store counts in Stat's Written): a test seeds a drive and damages
// fragments at rest with them.
//
// A Drives set hands out its drives by ID, as a storage dialer does.
// UpOnly, the same set seen as the client sees drives, refuses at once,
// with chunkstore.ErrOffline, a drive the map says is not up (as
// mgmt.ReportingDrives fails a down drive) and counts the refusal on the
// drive (Refused), so that a test can tell that a reader asked for a drive
// it should have known to be unusable.
//
// Map builds the cluster map of one pool of such drives; Maps serves a
// map that a test can change.
package drivetest
