package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"poolfs/internal/chunkstore/drivetest"
	"poolfs/internal/clustermap"
)

// changingMap is a map source whose map the test replaces, or makes fail.
type changingMap struct {
	mu  sync.Mutex
	m   *clustermap.Map
	err error
}

func (s *changingMap) Map(context.Context) (*clustermap.Map, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m, s.err
}

func (s *changingMap) set(m *clustermap.Map, err error) {
	s.mu.Lock()
	s.m, s.err = m, err
	s.mu.Unlock()
}

// TestMapRefreshedWhenOld: a client that meets no error still sees a new
// map epoch (a drive marked down) once its map is older than MapMaxAge,
// and goes on with the old map while the service cannot be reached.
func TestMapRefreshedWhenOld(t *testing.T) {
	ctx := context.Background()
	src := &changingMap{m: &clustermap.Map{Epoch: 1}}
	c := New(nil, src, drivetest.Drives{}, Options{MapMaxAge: 10 * time.Millisecond})
	if m, err := c.Map(ctx); err != nil || m.Epoch != 1 {
		t.Fatalf("first map: %v %v", m, err)
	}
	src.set(nil, errors.New("management service unreachable"))
	time.Sleep(20 * time.Millisecond)
	if m, err := c.Map(ctx); err != nil || m.Epoch != 1 {
		t.Fatalf("map while the service is unreachable: %v %v, want the old one", m, err)
	}
	src.set(&clustermap.Map{Epoch: 2, Drives: []clustermap.Drive{{ID: 3, State: clustermap.StateDown}}}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := c.Map(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Epoch == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client never fetched the new map epoch")
		}
		time.Sleep(time.Millisecond)
	}
}
