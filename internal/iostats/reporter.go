package iostats

import (
	"context"
	"crypto/rand"
	"encoding/binary"
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
	boot  uint64  // this reporter's name in its reports (Report.Boot)
	seq   uint64  // the last report's number
	held  *Report // a report not known to be delivered: sent again as is
}

// NewReporter returns a reporter of rec's counts for the client host:mount.
func NewReporter(rec *Recorder, host, mount string, send Sender, log *slog.Logger) *Reporter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	boot := binary.LittleEndian.Uint64(b[:]) | 1
	return &Reporter{rec: rec, host: host, mount: mount, send: send, log: log, boot: boot}
}

// Flush sends what was counted since the last delivered report (an empty
// report if nothing was: the client stays listed). A report whose
// delivery fails may still have arrived (only the reply was lost), so it
// is kept and sent again unchanged, under the same number, before
// anything newer: the management service counts each number once.
// Flush is not safe for concurrent use.
func (p *Reporter) Flush(ctx context.Context) error {
	if p.held != nil {
		p.held.Sent = time.Now().UnixNano()
		if err := p.send(ctx, p.held); err != nil {
			return err
		}
		p.held = nil
	}
	p.seq++
	r := &Report{Host: p.host, Mount: p.mount, Jobs: p.rec.Take(), Sent: time.Now().UnixNano(),
		Boot: p.boot, Seq: p.seq}
	if err := p.send(ctx, r); err != nil {
		p.held = r
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
		// A delivery may take longer than a short interval on a busy
		// machine; ticks missed meanwhile are dropped, not queued.
		cctx, cancel := context.WithTimeout(ctx, max(every, 2*time.Second))
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
