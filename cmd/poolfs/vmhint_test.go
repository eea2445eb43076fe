package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIdleHaltHint(t *testing.T) {
	cases := []struct {
		name         string
		driver, poll string // "" means the file is absent
		hint         bool
	}{
		{"vm halting at once", "haltpoll\n", "0\n", true},
		{"vm polling", "haltpoll\n", "200000\n", false},
		{"bare metal", "intel_idle\n", "", false},
		{"no cpuidle", "", "", false},
		{"haltpoll without the parameter", "haltpoll\n", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			write := func(p, v string) {
				if v == "" {
					return
				}
				p = filepath.Join(root, p)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("sys/devices/system/cpu/cpuidle/current_driver", c.driver)
			write(haltPollParam, c.poll)
			got := idleHaltHint(root)
			if (got != "") != c.hint || (c.hint && !strings.Contains(got, haltPollParam)) {
				t.Fatalf("hint %q, want one: %v", got, c.hint)
			}
		})
	}
}
