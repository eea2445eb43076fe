package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"poolfs/internal/cluster"
	"poolfs/internal/meta"
	"poolfs/internal/meta/sqlite"
)

// pgBackupAdvice is what `meta backup` says for a PostgreSQL store.
const pgBackupAdvice = `this cluster's metadata is in PostgreSQL, which poolfs does not copy itself:
back it up with PostgreSQL's tools, e.g.
  pg_dump --format=custom --file=poolfs-meta.dump DBNAME      (logical, consistent, online)
  pg_basebackup --pgdata=DIR --wal-method=stream              (physical, for point-in-time recovery)
and restore with pg_restore, or by starting a server on the base backup`

func metaBackupCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of the running cluster's metadata store (SQLite) to FILE",
		Long: `Write a consistent snapshot of the metadata store of the running cluster to FILE
(mode 0600), through the metadata service: writers go on meanwhile. FILE must not
exist. Keep it with a copy of the cluster's secret and cluster.json; restore with
'poolfs meta restore FILE' while the cluster is stopped. For a PostgreSQL store
use pg_dump or pg_basebackup.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dst := args[0]
			return g.withConn(cmd, func(conn *cluster.Conn) error {
				f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
				if err != nil {
					return err
				}
				n, err := conn.Meta.Backup(cmd.Context(), f)
				if err == nil {
					err = f.Sync()
				}
				err = errors.Join(err, f.Close())
				if err == nil {
					err = sqlite.Verify(cmd.Context(), dst)
				}
				if err != nil {
					os.Remove(dst)
					if errors.Is(err, meta.ErrNoBackup) {
						return fmt.Errorf("%w\n%s", err, pgBackupAdvice)
					}
					return fmt.Errorf("meta backup: %w", err)
				}
				fmt.Printf("meta backup: %s (%s), verified\n", dst, human(n))
				return nil
			})
		},
	}
}

func metaRestoreCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "restore FILE",
		Short: "Put a backup made by 'meta backup' in place of the cluster's metadata store (cluster stopped)",
		Long: `Verify FILE (a complete SQLite integrity check) and put it in place of DIR/meta.db,
with the cluster stopped. The replaced store is kept as meta.db.replaced-<time>.
Fragments written after the backup are not named by it: run 'poolfs fsck
--rebuild-stripes' after the restore to bring back stripes committed since.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			old, err := sqlite.Restore(cmd.Context(), args[0], filepath.Join(g.dir, "meta.db"))
			if err != nil {
				return fmt.Errorf("meta restore (is the cluster stopped?): %w", err)
			}
			fmt.Printf("meta restore: %s is now the metadata store of %s\n", args[0], g.dir)
			if old != "" {
				fmt.Printf("meta restore: the replaced store is kept as %s\n", old)
			}
			fmt.Printf("next: poolfs -c %s fsck --rebuild-stripes   (brings back stripes rewritten since the backup; run it before any gc --orphans)\n", g.dir)
			return nil
		},
	}
}

// storeAdvice adds the way out to an error that says the metadata store of
// the cluster in dir is corrupt.
func storeAdvice(err error, dir string) error {
	if !errors.Is(err, meta.ErrStoreCorrupt) {
		return err
	}
	return fmt.Errorf(`%w

The metadata store failed its integrity check; poolfs will not serve it or delete
any fragment on its word. Nothing on the drives has been changed. Ways out:
  1. restore the last backup (cluster stopped):
       poolfs -c %[2]s meta restore BACKUP.db
     then bring back stripes written since the backup:
       poolfs -c %[2]s fsck --rebuild-stripes
  2. without a backup, rebuild the store from what is still readable and the
     fragment headers on the drives (the damaged file is kept):
       poolfs -c %[2]s fsck --salvage --rebuild-stripes --repair
See docs/fsck-and-backup.md`, err, dir)
}
