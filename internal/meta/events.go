package meta

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
)

// The event log is an append-only list ordered by Seq. Seq comes from one
// counter incremented in the appending transaction, so Seq order is commit
// order and a reader paging with Events(after) never misses an event.

// AppendEvent adds e to the log; e.Seq is ignored and e.Time 0 means now.
// Errors: ErrInvalid (a field longer than 64 KiB).
func (s *Store) AppendEvent(ctx context.Context, e Event) error {
	if len(e.Kind) > maxEventField || len(e.Subject) > maxEventField || len(e.Message) > maxEventField {
		return fmt.Errorf("append event: field too long: %w", ErrInvalid)
	}
	err := s.update(ctx, func(o *op) error {
		if e.Time == 0 {
			e.Time = o.now
		}
		k := counterKey(ctrEvent)
		v, ok, err := o.get(k)
		if err != nil {
			return err
		}
		var seq uint64
		if ok {
			if seq, err = decodeU64(v); err != nil {
				return err
			}
		}
		seq++
		if err := o.tx.Put(k, encodeU64(seq)); err != nil {
			return err
		}
		return o.tx.Put(eventKey(seq), encodeEvent(&e))
	})
	if err != nil {
		return fmt.Errorf("append event %s: %w", e.Kind, err)
	}
	return nil
}

// Events returns up to limit (<= 0: all) events with Seq > after, ascending.
func (s *Store) Events(ctx context.Context, after uint64, limit int) ([]Event, error) {
	if after == math.MaxUint64 {
		return nil, nil
	}
	var out []Event
	err := s.view(ctx, func(o *op) error {
		out = out[:0]
		var derr error
		err := o.tx.Scan(eventKey(after+1), prefixEnd([]byte{pEvent}), limit, func(k, v []byte) bool {
			ev, err := decodeEvent(binary.BigEndian.Uint64(k[1:]), v)
			if err != nil {
				derr = err
				return false
			}
			out = append(out, ev)
			return true
		})
		if err == nil {
			err = derr
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("events after %d: %w", after, err)
	}
	return out, nil
}
