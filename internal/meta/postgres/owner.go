package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Owner is the cluster a database belongs to. A database holds the
// namespace and stripe map of one cluster: a second cluster on it would
// read the first one's stripes as its own and report their fragments,
// missing from its drives, as data loss (and collect its own as garbage).
// Open binds a new database to its caller's cluster, in the transaction
// that creates the schema, and refuses any other cluster afterwards.
type Owner struct {
	ID    string    // the cluster's id; required
	Where string    // where the cluster lives, for people (host:directory)
	Since time.Time // when the database was bound (set by Open)
}

// ErrOtherCluster is wrapped by the *OwnerError that Open returns when the
// database belongs to another cluster.
var ErrOtherCluster = errors.New("postgres: the database belongs to another cluster")

// OwnerError reports a database bound to another cluster.
type OwnerError struct {
	Owner  Owner // the cluster the database belongs to
	Opener Owner // the cluster that tried to open it
}

func (e *OwnerError) Error() string {
	return fmt.Sprintf("postgres: the database belongs to cluster %s (%s, bound %s), not to cluster %s (%s)",
		e.Owner.ID, e.Owner.Where, e.Owner.Since.UTC().Format(time.RFC3339), e.Opener.ID, e.Opener.Where)
}

func (e *OwnerError) Unwrap() error { return ErrOtherCluster }

// ownerTable has at most one row (one = true).
const ownerTable = `CREATE TABLE IF NOT EXISTS poolfs_cluster (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	id text NOT NULL,
	location text NOT NULL,
	bound timestamptz NOT NULL DEFAULT now())`

// binding is the outcome of initSchema.
type binding struct {
	owner   Owner
	bound   bool // this call bound the database
	adopted bool // ... and it held metadata already (from before bindings)
}

// initSchema creates the tables if they are missing and binds the database
// to want unless it is bound already, in one transaction, retried when a
// server doing the same at the same moment makes it fail. It returns the
// database's owner, which the caller compares with want.
func initSchema(ctx context.Context, c *pgx.Conn, want Owner) (binding, error) {
	var (
		b   binding
		err error
	)
	for attempt := 0; attempt < 10; attempt++ {
		b, err = initOnce(ctx, c, want)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || (pe.Code != "23505" && pe.Code != "42P07" && pe.Code != "40001" && pe.Code != "40P01") {
			break
		}
	}
	return b, err
}

func initOnce(ctx context.Context, c *pgx.Conn, want Owner) (binding, error) {
	var b binding
	err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, ownerTable); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, leaseSchema); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO poolfs_cluster (id, location) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			want.ID, want.Where)
		if err != nil {
			return err
		}
		if b.bound = tag.RowsAffected() == 1; b.bound {
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM kv)`).Scan(&b.adopted); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, `SELECT id, location, bound FROM poolfs_cluster`).Scan(&b.owner.ID, &b.owner.Where, &b.owner.Since)
	})
	return b, err
}

// Owner returns the cluster the database belongs to (the caller's: Open
// refuses any other).
func (e *Engine) Owner() Owner { return e.owner.owner }

// Bound reports whether Open bound the database to its caller, and
// whether the database held metadata already (a database used before
// bindings existed, adopted by the first cluster that opened it).
func (e *Engine) Bound() (bound, adopted bool) { return e.owner.bound, e.owner.adopted }
