package alerts

import (
	"errors"
	"time"
)

// Severity of an alert.
type Severity string

// Severities, least urgent first.
const (
	Warning  Severity = "warning"
	Critical Severity = "critical"
)

// Rules: the names alerts carry in Alert.Rule.
const (
	RulePoolFull       = "pool.full"         // a pool's used share of its usable capacity
	RuleTimeToFull     = "pool.time-to-full" // a pool's fill trend reaches its capacity soon
	RuleDriveFailed    = "drive.failed"      // a drive failed and was not replaced yet
	RuleDriveDown      = "drive.down"        // a drive stopped answering for a while
	RuleDriveSlow      = "drive.slow"        // a drive far slower than its peers
	RuleRebuildStalled = "rebuild.stalled"   // a running rebuild made no progress for a while
	RuleRebuildBlocked = "rebuild.impossible"
	RuleDataLoss       = "data.loss"         // stripes lost more fragments than parity covers
	RulePreservation   = "pool.preservation" // the rebuild capacity a pool reserves is used up
	RuleHostSpace      = "host.space-low"    // a host file system has less left than its drives may take
	RuleServerDown     = "server.down"       // every drive of a server is down or failed
	RuleClockSkew      = "clock.skew"        // a peer's clock differs from the management service's
	RuleTest           = "test"              // a test notification (never stored)
)

// Alert is one alert: a rule's condition on one subject, from when it was
// first seen until it cleared. At most one alert per rule and subject is
// open (Resolved zero) at a time.
type Alert struct {
	ID       string   `json:"id"`
	Rule     string   `json:"rule"`
	Subject  string   `json:"subject"` // what the rule looks at: "pool default", "drive d03", "server s0"
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
	// Started is when the condition was first seen, Updated when its
	// severity or message last changed, Resolved when it cleared (zero
	// while the alert is open).
	Started  time.Time `json:"started"`
	Updated  time.Time `json:"updated"`
	Resolved time.Time `json:"resolved,omitzero"`
	// AckedBy and AckedAt say who acknowledged the alert and when (empty
	// until acknowledged). An acknowledged alert stays open until its
	// condition clears.
	AckedBy string    `json:"acked_by,omitempty"`
	AckedAt time.Time `json:"acked_at,omitzero"`
	// Deliveries is the fate of the notifications of this alert, the
	// latest last (at most maxDeliveries).
	Deliveries []Delivery `json:"deliveries,omitempty"`
}

// Open reports whether the alert's condition still holds.
func (a *Alert) Open() bool { return a.Resolved.IsZero() }

// Delivery is one notification of an alert to one channel.
type Delivery struct {
	Channel  string    `json:"channel"` // "webhook", "email"
	Event    string    `json:"event"`   // EventFiring or EventResolved
	Attempts int       `json:"attempts"`
	Sent     time.Time `json:"sent,omitzero"` // when it was delivered (zero: not yet)
	// Error is the last attempt's error; GaveUp is set once every attempt
	// failed.
	Error  string `json:"error,omitempty"`
	GaveUp bool   `json:"gave_up,omitempty"`
}

// Notification events.
const (
	EventFiring   = "firing"   // an alert opened, or its severity changed
	EventResolved = "resolved" // its condition cleared
	EventTest     = "test"     // `poolfs alerts test-delivery`
)

// Errors.
var (
	ErrNotFound = errors.New("alerts: no such alert")
	ErrResolved = errors.New("alerts: alert already resolved")
	ErrInvalid  = errors.New("alerts: invalid")
)

// Condition is what a rule found at one evaluation: the alert it opens or
// keeps open.
type Condition struct {
	Rule     string
	Subject  string
	Severity Severity
	Message  string
}

func (c Condition) key() string { return c.Rule + "\x00" + c.Subject }

func (a *Alert) key() string { return a.Rule + "\x00" + a.Subject }
