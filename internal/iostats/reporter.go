package iostats

import (
	"context"
	"log/slog"
	"time"
)

// Sender delivers a report to the management service.
type Sender func(ctx context.Context, r *Report) error

// Reporter sends a Recorder's counts every interval.
type Reporter struct {
	rec   *Recorder
	host  string
	mount string
	send  Sender
	log   *slog.Logger
}

// NewReporter returns a reporter of rec's counts for the client host:mount.
func NewReporter(rec *Recorder, host, mount string, send Sender, log *slog.Logger) *Reporter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reporter{rec: rec, host: host, mount: mount, send: send, log: log}
}

// Flush sends what was counted since the last delivered report (an empty
// report if nothing was: the client stays listed). If the report cannot
// be delivered its counts go back to the recorder for the next one.
func (p *Reporter) Flush(ctx context.Context) error {
	jobs := p.rec.Take()
	r := &Report{Host: p.host, Mount: p.mount, Jobs: jobs, Sent: time.Now().UnixNano()}
	if err := p.send(ctx, r); err != nil {
		p.rec.Restore(jobs)
		return err
	}
	return nil
}

// Run flushes every interval until ctx is done, then once more (bounded
// by a few seconds), so that a mount that stops reports its last
// operations.
func (p *Reporter) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
			_ = p.Flush(fctx)
			cancel()
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, every)
		err := p.Flush(cctx)
		cancel()
		switch {
		case err != nil && !failing:
			p.log.Warn("iostats: cannot report I/O statistics to the management service; kept for the next report", "err", err)
			failing = true
		case err == nil && failing:
			p.log.Info("iostats: reporting I/O statistics again")
			failing = false
		}
	}
}
