package storage

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"poolfs/internal/chunkstore"
	"poolfs/internal/placement"
)

// FuzzReconstructArgs feeds arbitrary storage.Reconstruct arguments, as
// they come off the network, to a server: bad values must be rejected with
// an error, never a panic.
func FuzzReconstructArgs(f *testing.F) {
	f.Add([]byte(`{"ino":1,"stripe":0,"gen":5,"k":2,"m":1,"len":8192,"shard":4096,"sources":[{"index":0,"drive":0},{"index":1,"drive":1}],"targets":[{"index":2,"drive":2}]}`))
	f.Add([]byte(`{"k":1,"m":0,"len":1,"shard":1,"sources":[{"index":0,"drive":0}],"targets":[{"index":0,"drive":1}]}`))
	f.Add([]byte(`{"k":300,"m":-1,"targets":[{"index":-1}]}`))
	dir := f.TempDir()
	drives := map[placement.DriveID]chunkstore.Drive{}
	for i := 0; i < 3; i++ {
		d, err := chunkstore.Open(dir+"/"+placement.DriveID(i).String(), chunkstore.Options{Capacity: 1 << 30})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { d.Close() })
		drives[placement.DriveID(i)] = d
	}
	s := NewServer(drives, nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		var a ReconstructArgs
		if json.Unmarshal(b, &a) != nil {
			return
		}
		if a.ShardSize > 1<<20 {
			return // valid but slow to allocate; sizes are checked by validate
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = s.Reconstruct(ctx, &a)
	})
}
