package postgres_test

import (
	"context"
	"testing"

	"poolfs/internal/meta"
	"poolfs/internal/meta/metatest"
	"poolfs/internal/meta/pgtest"
	"poolfs/internal/meta/postgres"
)

func open(t *testing.T) meta.Engine {
	e, err := postgres.Open(context.Background(), pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestConformance(t *testing.T) { metatest.Run(t, open) }
