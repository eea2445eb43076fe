package mgmt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"
)

// Calls that change state and would not be the same if run twice (add a
// drive, replace one, create a pool, start a scrub) carry a request id
// that the caller makes once per call (newRequestID), so that the retry of
// a call whose answer was lost (a dropped connection, a failover: Leaders
// retries) is not run again: the service remembers each id's answer for
// requestMemory, in the metadata store (blob mgmt.requests), so the
// leader that takes over remembers it too, and answers a repeated id with
// the first answer. A repeat that arrives while the first call still runs
// waits for it. Failed calls are not remembered (they changed nothing, or
// their caller sees the error and decides). A call without an id (an older
// client) runs every time.
const requestsBlob = "mgmt.requests"

// requestMemory is how long an answer is remembered.
const requestMemory = 10 * time.Minute

// requestRecord is a remembered answer.
type requestRecord struct {
	At     int64           `json:"at"` // unix ns
	Result json.RawMessage `json:"result"`
}

// requests are the calls with ids running on this service.
type requests struct {
	mu       sync.Mutex
	inflight map[string]chan struct{} // closed when the call ends
}

// newRequestID returns a fresh request id.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// once runs fn for the call method with request id, or returns the answer
// remembered for id.
func (s *Service) once(ctx context.Context, method, id string, fn func() (any, error)) (any, error) {
	if id == "" {
		return fn()
	}
	key := method + " " + id
	rq := &s.reqs
	for {
		rq.mu.Lock()
		if rq.inflight == nil {
			rq.inflight = map[string]chan struct{}{}
		}
		ch, busy := rq.inflight[key]
		if !busy {
			ch = make(chan struct{})
			rq.inflight[key] = ch
		}
		rq.mu.Unlock()
		if !busy {
			defer func() {
				rq.mu.Lock()
				delete(rq.inflight, key)
				rq.mu.Unlock()
				close(ch)
			}()
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	recs, _, err := loadBlobMap[requestRecord](ctx, s.store, requestsBlob)
	if err != nil {
		return nil, err
	}
	if r, ok := recs[key]; ok && time.Since(time.Unix(0, r.At)) < requestMemory {
		return r.Result, nil
	}
	res, err := fn()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	s.remember(context.WithoutCancel(ctx), key, requestRecord{At: time.Now().UnixNano(), Result: b})
	return res, nil
}

// remember stores the answer of key and forgets those older than
// requestMemory; a failure is logged: it costs only the protection of a
// retry.
func (s *Service) remember(ctx context.Context, key string, r requestRecord) {
	recs, _, err := loadBlobMap[requestRecord](ctx, s.store, requestsBlob)
	if err == nil {
		for k, old := range recs {
			if time.Since(time.Unix(0, old.At)) >= requestMemory {
				err = setBlobMapEntry(ctx, s.store, requestsBlob, k, requestRecord{}, true)
				if err != nil {
					break
				}
			}
		}
	}
	if err == nil {
		err = setBlobMapEntry(ctx, s.store, requestsBlob, key, r, false)
	}
	if err != nil {
		s.log.Warn("remember the answer of a request", "request", key, "err", err)
	}
}
