package alerts

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration written in JSON as a Go duration string
// ("90s", "10m", "168h").
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%w: duration %s: want a string such as \"10m\" or \"168h\"", ErrInvalid, b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%w: duration %q: %v", ErrInvalid, s, err)
	}
	*d = Duration(v)
	return nil
}
