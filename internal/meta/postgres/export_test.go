package postgres

import "context"

// Queued returns how many Update calls wait for a group transaction.
func (e *Engine) Queued() int {
	e.group.mu.Lock()
	defer e.group.mu.Unlock()
	return len(e.group.queue)
}

// Setting returns the value of a server setting on one of e's
// connections.
func (e *Engine) Setting(ctx context.Context, name string) (string, error) {
	c, err := e.acquire(ctx)
	if err != nil {
		return "", err
	}
	defer e.release(c)
	var v string
	err = c.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}
