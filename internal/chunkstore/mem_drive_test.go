package chunkstore

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestMemDriveContract: the in-memory drive passes the checks every
// LocalDrive passes, and names itself and the key in its errors.
func TestMemDriveContract(t *testing.T) {
	t.Run("round trip", func(t *testing.T) { testRoundTrip(t, NewMemDrive("m", 1<<30)) })
	t.Run("invalid", func(t *testing.T) { testInvalid(t, NewMemDrive("m", 1<<30)) })
	t.Run("delete list usage", func(t *testing.T) { testDeleteListUsage(t, NewMemDrive("m", 10*Align)) })
	t.Run("concurrent", func(t *testing.T) { testConcurrentOn(t, NewMemDrive("m", 1<<30)) })
	d := NewMemDrive("mem7", 1<<30)
	if _, err := d.ReadFragment(ctx, key(9), 0, -1, nil); !errors.Is(err, ErrNotFound) ||
		!strings.Contains(err.Error(), "mem7") || !strings.Contains(err.Error(), key(9).String()) {
		t.Fatalf("want ErrNotFound naming drive and key, got %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.WriteFragment(cctx, key(3), make([]byte, Align)); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled ctx: %v", err)
	}
	if u, _ := d.Stat(ctx); u.Fragments != 0 {
		t.Fatalf("a canceled write stored its fragment: %+v", u)
	}
}
