package main

import (
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// bar is a progress bar on a terminal, and nothing otherwise.
type bar struct{ pb *progressbar.ProgressBar }

func newBar(size int64, desc string, quiet bool) *bar {
	if quiet || !term.IsTerminal(int(os.Stderr.Fd())) {
		return &bar{}
	}
	return &bar{pb: progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100e6),
		progressbar.OptionClearOnFinish(),
	)}
}

func (b *bar) set(done int64) {
	if b.pb != nil {
		_ = b.pb.Set64(done)
	}
}

func (b *bar) finish() {
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}
