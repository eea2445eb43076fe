package iostats

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrBadReport is returned for a report that is malformed or over the
// limits.
var ErrBadReport = errors.New("iostats: bad report")

// Limits of a Report (DecodeReport refuses more).
const (
	MaxReportJobs = 4096 // jobs in one report
	MaxNameLen    = 256  // bytes of a job name, host or mount point
	MaxReportSize = 4 << 20
)

// JobStats are one job's operations.
type JobStats struct {
	Job   string `json:"job"` // "" for callers without a job
	Stats Stats  `json:"stats"`
}

// Report is what a client sends to the management service every
// interval: its identity and each job's operations since its last
// delivered report (deltas, never totals).
type Report struct {
	Host  string     `json:"host"`
	Mount string     `json:"mount"` // mount point, or a name for a client without one
	Jobs  []JobStats `json:"jobs"`
	// Sent is the client's clock (unix ns) when it sent the report: the
	// management service compares it with its own (0: not given).
	Sent int64 `json:"sent,omitempty"`
	// Boot names the reporter (random, chosen when it starts) and Seq
	// numbers its reports from 1. A report whose delivery seemed to fail
	// is sent again unchanged, and the management service counts a
	// (Boot, Seq) once: a reply lost after the report arrived does not
	// count its operations twice. Boot 0: not numbered (counted always).
	Boot uint64 `json:"boot,omitempty"`
	Seq  uint64 `json:"seq,omitempty"`
}

// Client returns the name of the reporting client: host:mount.
func (r *Report) Client() string { return r.Host + ":" + r.Mount }

// Encode returns the wire form of r.
func (r *Report) Encode() ([]byte, error) { return json.Marshal(r) }

// DecodeReport decodes and checks a report received from a client. It
// returns an error wrapping ErrBadReport (or a JSON error) for anything
// malformed: an unknown field, a latency bucket out of range or counts
// that do not add up to the operations, more than MaxReportJobs jobs, a
// job named twice, a name longer than MaxNameLen, not UTF-8 or holding a
// control character.
func DecodeReport(b []byte) (*Report, error) {
	if len(b) > MaxReportSize {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrBadReport, len(b), MaxReportSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Report
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadReport, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the report", ErrBadReport)
	}
	if err := checkName("host", r.Host); err != nil {
		return nil, err
	}
	if err := checkName("mount", r.Mount); err != nil {
		return nil, err
	}
	if r.Host == "" {
		return nil, fmt.Errorf("%w: no host", ErrBadReport)
	}
	if len(r.Jobs) > MaxReportJobs {
		return nil, fmt.Errorf("%w: %d jobs, at most %d", ErrBadReport, len(r.Jobs), MaxReportJobs)
	}
	seen := make(map[string]bool, len(r.Jobs))
	for _, j := range r.Jobs {
		if err := checkName("job", j.Job); err != nil {
			return nil, err
		}
		if seen[j.Job] {
			return nil, fmt.Errorf("%w: job %q given twice", ErrBadReport, j.Job)
		}
		seen[j.Job] = true
	}
	return &r, nil
}

func checkName(what, s string) error {
	if len(s) > MaxNameLen {
		return fmt.Errorf("%w: %s of %d bytes, at most %d", ErrBadReport, what, len(s), MaxNameLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s %q is not UTF-8", ErrBadReport, what, s)
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: %s %q holds a control character", ErrBadReport, what, s)
		}
	}
	return nil
}
