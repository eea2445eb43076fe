package dashboard

import (
	"context"
	"time"

	"poolfs/internal/clustermap"
	"poolfs/internal/meta"
	"poolfs/internal/mgmt"
	"poolfs/internal/placement"
)

// Cluster is what the dashboard asks of the management service: the calls
// the CLI makes, so that a button does exactly what its command does.
// *mgmt.Client implements it.
type Cluster interface {
	Status(ctx context.Context) (*mgmt.Status, error)
	Map(ctx context.Context) (*clustermap.Map, error)
	Events(ctx context.Context, after uint64, limit int) ([]meta.Event, error)
	DriveIO(ctx context.Context) ([]mgmt.DriveStatus, error)
	Scrub(ctx context.Context, op, pool string) (*mgmt.ScrubStatus, error)
	FailDrive(ctx context.Context, id placement.DriveID) error
	ReplaceDrive(ctx context.Context, id placement.DriveID) (placement.DriveID, error)
	AddDrive(ctx context.Context, pool string) (placement.DriveID, error)
	SetRebuildPriority(ctx context.Context, pool, prio string) error
}

var _ Cluster = (*mgmt.Client)(nil)

// ClientIO is one client's or job's I/O over the last window, as the
// per-client statistics report it.
type ClientIO struct {
	Client, Job           string
	ReadBytes, WriteBytes float64 // per second
	ReadOps, WriteOps     float64 // per second
	MetaOps               float64 // per second
	P99                   time.Duration
}

// ClientStats is the source of per-client and per-job statistics (the
// mounts' reports gathered by the management service); nil until the
// cluster has one, and the tables say so.
type ClientStats interface {
	// Busiest returns up to n clients (byJob false) or jobs (true), the
	// busiest first.
	Busiest(ctx context.Context, byJob bool, n int) ([]ClientIO, error)
}

// Alert is one alert as the dashboard lists it.
type Alert struct {
	ID       string
	Rule     string
	Severity string
	Subject  string
	Message  string
	Since    time.Time
	Acked    bool
	AckedBy  string
}

// Alerts is the source of alerts and their acknowledgement; nil until
// the cluster has one.
type Alerts interface {
	Active(ctx context.Context) ([]Alert, error)
	Acknowledge(ctx context.Context, id, by string) error
}
