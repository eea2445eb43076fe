package mgmt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"poolfs/internal/alerts"
	"poolfs/internal/meta"
)

// Alerts (alerts.go): the management service evaluates the alert rules
// (package alerts) every alert interval on its own status (Status: pool
// usage and recovery, drive states, slow drives) and on the storage
// servers' clocks as its probes saw them (alerts_clock.go). The alerts are
// kept in the metadata store (blob "alerts"), so they survive a restart
// and follow the metadata store, not the machine.

// Blob names of the alert record and of a record that did not decode.
const (
	alertsBlob    = "alerts"
	alertsBadBlob = "alerts.bad"
)

// alerting is the service's alert engine, made on first use.
type alerting struct {
	once sync.Once
	mu   sync.Mutex // guards eng
	eng  *alerts.Engine
}

// Alerts returns the alert engine: open alerts, history, acknowledgment.
// Until ConfigureAlerts it has the default thresholds, no delivery
// channel and no saved alerts.
func (s *Service) Alerts() *alerts.Engine {
	s.al.once.Do(func() {
		e, err := alerts.NewEngine(alerts.Options{Logger: s.log})
		if err != nil {
			panic(err) // the defaults are valid: TestDefaultThresholdsValid
		}
		s.al.mu.Lock()
		if s.al.eng == nil {
			s.al.eng = e
		}
		s.al.mu.Unlock()
	})
	s.al.mu.Lock()
	defer s.al.mu.Unlock()
	return s.al.eng
}

// ConfigureAlerts makes the alert engine of opts, keeping its alerts in
// the metadata store, and loads the saved ones. Call it before the
// service serves (Alerts returns the engine made here from then on).
func (s *Service) ConfigureAlerts(ctx context.Context, opts alerts.Options) error {
	opts.Store = &blobStore{store: s.store}
	if opts.Logger == nil {
		opts.Logger = s.log
	}
	e, err := alerts.NewEngine(opts)
	if err != nil {
		return fmt.Errorf("mgmt: alerts: %w", err)
	}
	if err := e.Load(ctx); err != nil {
		return fmt.Errorf("mgmt: %w", err)
	}
	s.al.once.Do(func() {}) // Alerts no longer makes a default engine
	s.al.mu.Lock()
	s.al.eng = e
	s.al.mu.Unlock()
	return nil
}

// EvaluateAlerts runs the alert rules once on the current status.
func (s *Service) EvaluateAlerts(ctx context.Context) error {
	st, err := s.status(ctx, false)
	if err != nil {
		return fmt.Errorf("mgmt: alerts: status: %w", err)
	}
	return s.Alerts().Evaluate(ctx, s.alertState(st, time.Now()))
}

// RunAlerts evaluates the alert rules every interval and delivers the
// notifications, until ctx ends.
func (s *Service) RunAlerts(ctx context.Context, interval time.Duration) {
	e := s.Alerts()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx)
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.EvaluateAlerts(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("alert evaluation", "err", err)
		}
		select {
		case <-ctx.Done():
			<-done
			return
		case <-t.C:
		}
	}
}

// blobStore keeps the alert record in the metadata store.
type blobStore struct {
	store *meta.Store
	mu    sync.Mutex // guards ver
	ver   uint64     // version of the blob last read or written
}

func (b *blobStore) Load(ctx context.Context) ([]byte, error) {
	data, ver, err := b.store.GetBlob(ctx, alertsBlob)
	if errors.Is(err, meta.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.ver = ver
	b.mu.Unlock()
	return data, nil
}

// Save writes the record. The management service is its only writer; a
// version conflict (a restored metadata store, say) is resolved by
// writing over the stored record.
func (b *blobStore) Save(ctx context.Context, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range 3 {
		nv, err := b.store.PutBlob(ctx, alertsBlob, data, b.ver)
		if err == nil {
			b.ver = nv
			return nil
		}
		if !errors.Is(err, meta.ErrConflict) {
			return err
		}
		_, ver, gerr := b.store.GetBlob(ctx, alertsBlob)
		if errors.Is(gerr, meta.ErrNotFound) {
			ver, gerr = 0, nil
		}
		if gerr != nil {
			return gerr
		}
		b.ver = ver
	}
	return fmt.Errorf("save alerts: %w", meta.ErrConflict)
}

func (b *blobStore) SaveAside(ctx context.Context, data []byte) error {
	_, ver, err := b.store.GetBlob(ctx, alertsBadBlob)
	if errors.Is(err, meta.ErrNotFound) {
		ver, err = 0, nil
	}
	if err != nil {
		return err
	}
	_, err = b.store.PutBlob(ctx, alertsBadBlob, data, ver)
	return err
}
