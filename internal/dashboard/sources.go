package dashboard

import (
	"context"

	"poolfs/internal/alerts"
	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
)

// Cluster is what the dashboard asks of the management service: the calls
// the CLI makes, so that a button does exactly what its command does.
// *mgmt.Client implements it.
type Cluster interface {
	// StatusOf is Status; rescan false does not ask for a fresh scan of
	// the stripes (the page's own refreshes, the sampler).
	StatusOf(ctx context.Context, rescan bool) (*mgmt.Status, error)
	Map(ctx context.Context) (*clustermap.Map, error)
	Events(ctx context.Context, after uint64, limit int) ([]meta.Event, error)
	DriveIO(ctx context.Context) ([]mgmt.DriveStatus, error)
	Scrub(ctx context.Context, op, pool string) (*mgmt.ScrubStatus, error)
	FailDrive(ctx context.Context, id placement.DriveID) error
	ReplaceDrive(ctx context.Context, id placement.DriveID) (placement.DriveID, error)
	AddDrive(ctx context.Context, pool string) (placement.DriveID, error)
	SetRebuildPriority(ctx context.Context, pool, prio string) error
	Striping(ctx context.Context, limit int) (*mgmt.StripingReport, error)
}

var _ Cluster = (*mgmt.Client)(nil)

// ClientStats is the source of per-client and per-job statistics: the
// mounts' reports gathered by the management service (*mgmt.Client).
// Optional: without it the tables and the metadata chart say so.
type ClientStats interface {
	// IOStats returns every client's and the top busiest jobs' recent I/O.
	IOStats(ctx context.Context, top int) (*mgmt.IOStatsSnapshot, error)
}

// Alerts is the source of alerts and their acknowledgement
// (*mgmt.Client). Optional: without it the alerts page says so.
type Alerts interface {
	// Alerts returns the open alerts, or with all the n newest of the
	// history.
	Alerts(ctx context.Context, all bool, n int) ([]alerts.Alert, error)
	// AckAlert acknowledges alert id in the name of user.
	AckAlert(ctx context.Context, id, user string) (*alerts.Alert, error)
}

var (
	_ ClientStats = (*mgmt.Client)(nil)
	_ Alerts      = (*mgmt.Client)(nil)
)
