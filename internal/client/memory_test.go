package client

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupMemoryLimit: the lowest limit of the process's cgroups and
// their parents, under cgroup v2 (memory.max, also at unified/) and v1
// (the memory controller's memory.limit_in_bytes); "max" and v1's "no
// limit" value are none.
func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cgroup string
		files  map[string]string
		want   int64
	}{
		{"v2, the container's limit", "0::/kubepods/pod1/c1\n", map[string]string{
			"kubepods/memory.max":         "max\n",
			"kubepods/pod1/memory.max":    "4294967296\n",
			"kubepods/pod1/c1/memory.max": "max\n",
		}, 4 << 30},
		{"v2, a parent lower than the child", "0::/a/b\n", map[string]string{
			"a/memory.max":   "1073741824\n",
			"a/b/memory.max": "2147483648\n",
		}, 1 << 30},
		{"v2 under unified/", "0::/job\n", map[string]string{
			"unified/job/memory.max": "536870912\n",
		}, 512 << 20},
		{"v1", "4:memory:/process_api/x\n0::/\n", map[string]string{
			"memory/memory.limit_in_bytes":               "9223372036854771712\n",
			"memory/process_api/memory.limit_in_bytes":   "8589934592\n",
			"memory/process_api/x/memory.limit_in_bytes": "9223372036854771712\n",
		}, 8 << 30},
		{"no limit anywhere", "4:memory:/x\n0::/y\n", map[string]string{
			"memory/x/memory.limit_in_bytes": "9223372036854771712\n",
			"y/memory.max":                   "max\n",
		}, 0},
		{"garbage", "nonsense\n1:memory:relative\n", map[string]string{
			"memory/memory.limit_in_bytes": "12345\n",
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, v := range tc.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := cgroupMemoryLimit([]byte(tc.cgroup), root); got != tc.want {
				t.Fatalf("limit %d, want %d", got, tc.want)
			}
		})
	}
	if d := DefaultLogCache(); d <= 0 {
		t.Fatalf("default log cache %d", d)
	}
}
