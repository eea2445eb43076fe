package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// Store keeps the engine's alerts across restarts (mgmt keeps them in the
// metadata store).
type Store interface {
	// Load returns the last saved record, or nil and no error if there
	// is none.
	Load(ctx context.Context) ([]byte, error)
	// Save replaces the record.
	Save(ctx context.Context, b []byte) error
	// SaveAside keeps a record that does not decode where an operator can
	// find it, before Save replaces it.
	SaveAside(ctx context.Context, b []byte) error
}

// recordVersion is the version of the saved record's format.
const recordVersion = 1

// Bounds of a saved record: a record past them is refused as corrupt.
const (
	maxDeliveries   = 16      // per alert, the latest kept
	maxRecordAlerts = 1 << 20 // alerts in one record
	maxText         = 4096    // bytes of a rule, subject, message or user
)

// record is the saved form of an engine: JSON, for an operator to read.
type record struct {
	Version int                 `json:"version"`
	NextID  uint64              `json:"next_id"`
	Alerts  []Alert             `json:"alerts"` // by ID, oldest first
	Trend   map[string][]Sample `json:"trend,omitempty"`
}

// decodeRecord parses a saved record and checks what the engine relies on:
// known version, IDs that are unique numbers below NextID in ascending
// order, known severities, at most one open alert per rule and subject,
// bounded sizes.
func decodeRecord(b []byte) (*record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: alert record: %v", ErrInvalid, err)
	}
	if r.Version != recordVersion {
		return nil, fmt.Errorf("%w: alert record version %d, want %d", ErrInvalid, r.Version, recordVersion)
	}
	if len(r.Alerts) > maxRecordAlerts {
		return nil, fmt.Errorf("%w: alert record holds %d alerts", ErrInvalid, len(r.Alerts))
	}
	open := map[string]bool{}
	var last uint64
	for i := range r.Alerts {
		a := &r.Alerts[i]
		id, err := strconv.ParseUint(a.ID, 10, 64)
		if err != nil || id == 0 || id <= last || id >= r.NextID || strconv.FormatUint(id, 10) != a.ID {
			return nil, fmt.Errorf("%w: alert record: alert %d has ID %q (next ID %d)", ErrInvalid, i, a.ID, r.NextID)
		}
		last = id
		if a.Rule == "" || len(a.Rule) > maxText || len(a.Subject) > maxText || len(a.Message) > maxText || len(a.AckedBy) > maxText {
			return nil, fmt.Errorf("%w: alert record: alert %s: empty rule or text too long", ErrInvalid, a.ID)
		}
		if a.Severity != Warning && a.Severity != Critical {
			return nil, fmt.Errorf("%w: alert record: alert %s: severity %q", ErrInvalid, a.ID, a.Severity)
		}
		if len(a.Deliveries) > maxDeliveries {
			return nil, fmt.Errorf("%w: alert record: alert %s: %d deliveries", ErrInvalid, a.ID, len(a.Deliveries))
		}
		if a.Open() {
			if open[a.key()] {
				return nil, fmt.Errorf("%w: alert record: two open alerts for %s %s", ErrInvalid, a.Rule, a.Subject)
			}
			open[a.key()] = true
		}
	}
	for name, tr := range r.Trend {
		if len(tr) > trendSamples+1 {
			return nil, fmt.Errorf("%w: alert record: trend of pool %s has %d samples", ErrInvalid, name, len(tr))
		}
	}
	return &r, nil
}

// Load restores the saved alerts and fill trends, and queues again the
// deliveries that were neither sent nor given up. A record that does not
// decode is kept aside (Store.SaveAside) and the engine starts empty; if
// it cannot be kept aside, Load fails and the engine saves nothing, so
// that no record is lost.
func (e *Engine) Load(ctx context.Context) error {
	if e.opts.Store == nil {
		return nil
	}
	b, err := e.opts.Store.Load(ctx)
	if err != nil {
		return fmt.Errorf("alerts: load: %w", err)
	}
	if b == nil {
		return nil
	}
	r, err := decodeRecord(b)
	if err != nil {
		if aerr := e.opts.Store.SaveAside(ctx, b); aerr != nil {
			return fmt.Errorf("alerts: load: %w; keeping the bad record aside failed: %v", err, aerr)
		}
		e.log.Error("alert record does not decode: kept aside, starting with no alerts", "err", err)
		return nil
	}
	var pending []Notification
	e.mu.Lock()
	e.mu.open, e.mu.byID, e.mu.all, e.mu.nextID = map[string]*Alert{}, map[string]*Alert{}, nil, max(r.NextID, 1)
	for i := range r.Alerts {
		a := &r.Alerts[i]
		e.mu.all = append(e.mu.all, a)
		e.mu.byID[a.ID] = a
		if a.Open() {
			e.mu.open[a.key()] = a
		}
		for _, d := range a.Deliveries {
			if d.Sent.IsZero() && !d.GaveUp {
				n := Notification{Event: d.Event, Cluster: e.opts.Cluster, Alert: *a}
				n.Alert.Deliveries = nil
				n.channel = d.Channel
				pending = append(pending, n)
			}
		}
	}
	for name, tr := range r.Trend {
		e.mu.mem.trend[name] = tr
	}
	e.mu.Unlock()
	for _, n := range pending {
		e.enqueue(n)
	}
	return nil
}

// save writes the current alerts to the store if they changed since the
// last save.
func (e *Engine) save(ctx context.Context) error {
	if e.opts.Store == nil {
		return nil
	}
	e.saveMu.Lock()
	defer e.saveMu.Unlock()
	e.mu.Lock()
	r := record{Version: recordVersion, NextID: e.mu.nextID, Trend: map[string][]Sample{}}
	for _, a := range e.mu.all {
		r.Alerts = append(r.Alerts, copyAlert(a))
	}
	for name, tr := range e.mu.mem.trend {
		r.Trend[name] = append([]Sample(nil), tr...)
	}
	e.mu.Unlock()
	for i := range r.Alerts {
		clip(&r.Alerts[i])
	}
	b, err := json.Marshal(&r)
	if err != nil {
		return fmt.Errorf("alerts: save: %w", err)
	}
	if err := e.opts.Store.Save(ctx, b); err != nil {
		return fmt.Errorf("alerts: save: %w", err)
	}
	return nil
}

// clip bounds the texts of a saved alert (a record over the bounds would
// not load).
func clip(a *Alert) {
	for _, s := range []*string{&a.Rule, &a.Subject, &a.Message, &a.AckedBy} {
		if len(*s) > maxText {
			*s = (*s)[:maxText]
		}
	}
	for i := range a.Deliveries {
		if len(a.Deliveries[i].Error) > maxText {
			a.Deliveries[i].Error = a.Deliveries[i].Error[:maxText]
		}
	}
}
