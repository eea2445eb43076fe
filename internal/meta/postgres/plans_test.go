package postgres_test

import (
	"context"
	"strings"
	"testing"

	"poolfs/internal/meta/pgtest"
	"poolfs/internal/meta/postgres"
)

// TestConnectionsPlanOnce: the engine's connections plan each prepared
// statement once and never scan the whole table (plan_cache_mode,
// enable_seqscan), unless the connection string sets them otherwise.
func TestConnectionsPlanOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Start(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for _, c := range []struct {
		name, dsn         string
		planMode, seqscan string
	}{
		{"default", url, "force_generic_plan", "off"},
		{"from the connection string", url + sep + "plan_cache_mode=auto&enable_seqscan=on", "auto", "on"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := postgres.Open(ctx, c.dsn, testOwner)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			for name, want := range map[string]string{"plan_cache_mode": c.planMode, "enable_seqscan": c.seqscan} {
				if got, err := e.Setting(ctx, name); err != nil || got != want {
					t.Errorf("%s = %q, %v; want %q", name, got, err, want)
				}
			}
		})
	}
}
