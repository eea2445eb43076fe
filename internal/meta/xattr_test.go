package meta_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"poolfs/internal/meta"
)

func TestXattr(t *testing.T) {
	_, s, f := oneFile(t)
	ctx := context.Background()
	ino := f.Ino
	steps := []struct {
		name string
		do   func() error
		want error
	}{
		{"get missing", func() error { _, err := s.GetXattr(ctx, ino, "user.a"); return err }, meta.ErrNoXattr},
		{"remove missing", func() error { return s.RemoveXattr(ctx, ino, "user.a") }, meta.ErrNoXattr},
		{"replace missing", func() error { return s.SetXattr(ctx, ino, "user.a", []byte("x"), meta.XattrReplace) }, meta.ErrNoXattr},
		{"create", func() error { return s.SetXattr(ctx, ino, "user.a", []byte("one"), meta.XattrCreate) }, nil},
		{"create again", func() error { return s.SetXattr(ctx, ino, "user.a", []byte("x"), meta.XattrCreate) }, meta.ErrExist},
		{"replace", func() error { return s.SetXattr(ctx, ino, "user.a", []byte("two"), meta.XattrReplace) }, nil},
		{"set other", func() error { return s.SetXattr(ctx, ino, "user.b", nil, 0) }, nil},
		{"both flags", func() error { return s.SetXattr(ctx, ino, "user.c", nil, 3) }, meta.ErrInvalid},
		{"empty name", func() error { return s.SetXattr(ctx, ino, "", nil, 0) }, meta.ErrInvalid},
		{"long name", func() error { return s.SetXattr(ctx, ino, strings.Repeat("n", 256), nil, 0) }, meta.ErrNameTooLong},
		{"big value", func() error { return s.SetXattr(ctx, ino, "user.big", make([]byte, meta.MaxXattrValue+1), 0) }, meta.ErrInvalid},
		{"max value", func() error { return s.SetXattr(ctx, ino, "user.max", make([]byte, meta.MaxXattrValue), 0) }, nil},
		{"no inode", func() error { return s.SetXattr(ctx, 999999, "user.a", nil, 0) }, meta.ErrNotFound},
	}
	for _, st := range steps {
		if err := st.do(); !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
			t.Fatalf("%s: got %v, want %v", st.name, err, st.want)
		}
	}
	v, err := s.GetXattr(ctx, ino, "user.a")
	if err != nil || !bytes.Equal(v, []byte("two")) {
		t.Fatalf("get user.a = %q, %v", v, err)
	}
	names, err := s.ListXattr(ctx, ino)
	if err != nil || strings.Join(names, ",") != "user.a,user.b,user.max" {
		t.Fatalf("list = %q, %v", names, err)
	}
	if err := s.RemoveXattr(ctx, ino, "user.a"); err != nil {
		t.Fatal(err)
	}
	if names, _ := s.ListXattr(ctx, ino); strings.Join(names, ",") != "user.b,user.max" {
		t.Fatalf("list after remove = %q", names)
	}
	// The names of one inode are bounded like Linux's listxattr buffer.
	for i := 0; ; i++ {
		err := s.SetXattr(ctx, ino, "user."+strings.Repeat("x", 240)+string(rune('A'+i%26))+string(rune('A'+i/26)), nil, 0)
		if errors.Is(err, meta.ErrInvalid) {
			break
		}
		if err != nil || i > 1000 {
			t.Fatalf("name %d: %v", i, err)
		}
	}
}
