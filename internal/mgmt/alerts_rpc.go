package mgmt

import (
	"context"
	"errors"

	"poolfs/internal/alerts"
)

// AlertArgs are the arguments of the alert RPCs: mgmt.Alerts lists the
// open alerts, or with All the history (the Limit newest, 0: all kept);
// mgmt.AlertAck acknowledges alert ID as User.
type AlertArgs struct {
	All   bool   `json:"all,omitempty"`
	Limit int    `json:"limit,omitempty"`
	ID    string `json:"id,omitempty"`
	User  string `json:"user,omitempty"`
}

// DeliveryResult is one channel's answer to mgmt.AlertTest.
type DeliveryResult struct {
	Channel string `json:"channel"`
	Error   string `json:"error,omitempty"` // "": delivered
}

// ErrNoChannels is the answer to a delivery test with no channel
// configured.
var ErrNoChannels = errors.New("mgmt: no alert delivery channel configured (webhook or smtp in the cluster's alerts.json)")

func (s *Service) registerAlerts(r Handler) {
	handleJSON(r, "mgmt.Alerts", func(ctx context.Context, a AlertArgs) (any, error) {
		if a.All {
			return s.Alerts().History(a.Limit), nil
		}
		return s.Alerts().Open(), nil
	})
	handleJSON(r, "mgmt.AlertAck", func(ctx context.Context, a AlertArgs) (any, error) {
		e := s.Alerts()
		if err := e.Ack(a.ID, a.User); err != nil {
			return nil, err
		}
		return e.Get(a.ID)
	})
	handleJSON(r, "mgmt.AlertTest", func(ctx context.Context, a AlertArgs) (any, error) {
		res := s.Alerts().TestDelivery(ctx)
		if len(res) == 0 {
			return nil, ErrNoChannels
		}
		var out []DeliveryResult
		for _, r := range res {
			dr := DeliveryResult{Channel: r.Channel}
			if r.Err != nil {
				dr.Error = r.Err.Error()
			}
			out = append(out, dr)
		}
		return out, nil
	})
}

// Alerts returns the open alerts, or with all the n newest of the
// history (n 0: all kept).
func (c *Client) Alerts(ctx context.Context, all bool, n int) ([]alerts.Alert, error) {
	var out []alerts.Alert
	err := c.rc.Call(ctx, "mgmt.Alerts", AlertArgs{All: all, Limit: n}, nil, &out)
	return out, err
}

// AckAlert acknowledges alert id as user and returns it.
func (c *Client) AckAlert(ctx context.Context, id, user string) (*alerts.Alert, error) {
	var out alerts.Alert
	if err := c.rc.Call(ctx, "mgmt.AlertAck", AlertArgs{ID: id, User: user}, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TestAlertDelivery sends a test notification on every channel and
// returns each one's result.
func (c *Client) TestAlertDelivery(ctx context.Context) ([]DeliveryResult, error) {
	var out []DeliveryResult
	err := c.rc.Call(ctx, "mgmt.AlertTest", AlertArgs{}, nil, &out)
	return out, err
}
