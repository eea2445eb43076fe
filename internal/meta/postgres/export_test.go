package postgres

// Queued returns how many Update calls wait for a group transaction.
func (e *Engine) Queued() int {
	e.group.mu.Lock()
	defer e.group.mu.Unlock()
	return len(e.group.queue)
}
