package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
)

// connTx is the lingering transaction's hold on the write connection:
// BEGIN and COMMIT run as statements on a sql.Conn, with statements
// prepared on that connection, rather than through a sql.Tx. database/sql
// starts a goroutine for every query of a sql.Tx (to close its rows when
// the transaction's context ends), and waking it costs more than a point
// read from SQLite's page cache; a query on a sql.Conn with a context that
// is never cancelled starts none. The lingering transaction's statements
// run with such a context anyway (linger.go), so nothing is lost.
//
// The statements every update runs without arguments (SAVEPOINT, RELEASE)
// are prepared once per transaction too (execFixed): SQLite compiles a
// statement run from its text on every call, which cost as much as the
// puts of a create.
type connTx struct {
	conn     *sql.Conn
	stmts    []*sql.Stmt          // prepared on conn, closed at the end
	fixed    map[string]*sql.Stmt // execFixed's, among stmts
	compiled *atomic.Uint64       // counts statements compiled: prepared or run from text
}

// beginConn takes the write connection of db and begins a transaction on
// it (BEGIN IMMEDIATE, as the driver's _txlock=immediate would).
// Statements compiled are counted in compiled.
func beginConn(db *sql.DB, compiled *atomic.Uint64) (*connTx, error) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	c := &connTx{conn: conn, compiled: compiled}
	if err := c.exec(`BEGIN IMMEDIATE`); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// exec runs a statement without arguments from its text (BEGIN, COMMIT,
// ROLLBACK: once per transaction).
func (c *connTx) exec(q string) error {
	c.compiled.Add(1)
	_, err := c.conn.ExecContext(context.Background(), q)
	return err
}

// execFixed runs a statement without arguments that the transaction runs
// for each update (SAVEPOINT u, RELEASE u, ROLLBACK TO u), prepared on first use.
func (c *connTx) execFixed(q string) error {
	s := c.fixed[q]
	if s == nil {
		var err error
		if s, err = c.prepare(q); err != nil {
			return err
		}
		if c.fixed == nil {
			c.fixed = map[string]*sql.Stmt{}
		}
		c.fixed[q] = s
	}
	_, err := s.ExecContext(context.Background())
	return err
}

// prepare prepares q on the transaction's connection.
func (c *connTx) prepare(q string) (*sql.Stmt, error) {
	c.compiled.Add(1)
	s, err := c.conn.PrepareContext(context.Background(), q)
	if err == nil {
		c.stmts = append(c.stmts, s)
	}
	return s, err
}

// commit commits the transaction and gives the connection back; a COMMIT
// that fails is rolled back so that the pooled connection holds no open
// transaction.
func (c *connTx) commit() error {
	err := c.exec(`COMMIT`)
	if err != nil {
		c.exec(`ROLLBACK`) //nolint:errcheck // the COMMIT's error is the one to report
	}
	return errors.Join(err, c.close())
}

// rollback rolls the transaction back and gives the connection back.
func (c *connTx) rollback() error {
	return errors.Join(c.exec(`ROLLBACK`), c.close())
}

func (c *connTx) close() error {
	var errs []error
	for _, s := range c.stmts {
		errs = append(errs, s.Close())
	}
	c.stmts, c.fixed = nil, nil
	return errors.Join(append(errs, c.conn.Close())...)
}
