package client

import (
	"sync"

	"poolfs/internal/placement"
)

// orderOf is the stripe order of one PG map, computed once by the first
// writer that needs it.
type orderOf struct {
	pm   *placement.PGMap
	once sync.Once
	o    *placement.StripeOrder
}

// stripeOrder returns the order in which a file's consecutive stripes take
// the PGs of pm (placement.StripeOrder): the last pool's map's order is
// kept, so it is computed once per epoch (and once per placement around
// avoided servers).
func (c *Client) stripeOrder(pool uint32, pm *placement.PGMap) *placement.StripeOrder {
	c.mu.Lock()
	e := c.mu.orders[pool]
	if e == nil || e.pm != pm {
		e = &orderOf{pm: pm}
		c.mu.orders[pool] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.o = placement.NewStripeOrder(pm) })
	return e.o
}
