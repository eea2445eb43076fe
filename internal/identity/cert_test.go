package identity

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func issue(t testing.TB, ca *CA, name string, role Role, notAfter time.Time) *Identity {
	t.Helper()
	pub, priv, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ca.Issue(name, role, 42, notAfter, pub)
	if err != nil {
		t.Fatal(err)
	}
	return &Identity{Cert: c, Key: priv}
}

func TestVerify(t *testing.T) {
	ca, _ := NewCA()
	other, _ := NewCA()
	now := time.Unix(1_800_000_000, 0)
	good := issue(t, ca, "srv1", RoleServer, now.Add(time.Hour)).Cert
	flipped := append([]byte(nil), good.Encoded()...)
	flipped[len(flipped)-70] ^= 1 // a bit of the node key
	altered, err := Decode(flipped)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		cert  *Cert
		trust Trust
		want  error
	}{
		{"good", good, Trust{CA: ca.Public()}, nil},
		{"good, role accepted", good, Trust{CA: ca.Public(), Roles: []Role{RoleMgmt, RoleServer}}, nil},
		{"another CA", issue(t, other, "srv1", RoleServer, now.Add(time.Hour)).Cert, Trust{CA: ca.Public()}, ErrUntrusted},
		{"altered", altered, Trust{CA: ca.Public()}, ErrUntrusted},
		{"expired", issue(t, ca, "srv1", RoleServer, now).Cert, Trust{CA: ca.Public()}, ErrExpired},
		{"wrong role", issue(t, ca, "host", RoleClient, now.Add(time.Hour)).Cert, Trust{CA: ca.Public(), Roles: []Role{RoleServer}}, ErrRole},
		{"revoked", good, Trust{CA: ca.Public(), Revoked: func(c *Cert) bool { return c.Serial == 42 }}, ErrRevoked},
		{"no CA", good, Trust{}, ErrUntrusted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.trust.Now = func() time.Time { return now }
			if err := tc.trust.Verify(tc.cert); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// Recheck, run on the certificate of an open connection, refuses it once
// it has expired or been revoked, and checks nothing else.
func TestRecheck(t *testing.T) {
	ca, _ := NewCA()
	now := time.Unix(1_800_000_000, 0)
	c := issue(t, ca, "srv1", RoleServer, now.Add(time.Hour)).Cert
	var revoked bool
	trust := Trust{CA: ca.Public(), Roles: []Role{RoleServer}, Revoked: func(*Cert) bool { return revoked }, Now: func() time.Time { return now }}
	if err := trust.Recheck(c); err != nil {
		t.Fatalf("fresh certificate: %v", err)
	}
	now = now.Add(time.Hour)
	if err := trust.Recheck(c); !errors.Is(err, ErrExpired) {
		t.Fatalf("at its expiry: %v, want ErrExpired", err)
	}
	now, revoked = now.Add(-time.Minute), true
	if err := trust.Recheck(c); !errors.Is(err, ErrRevoked) || !strings.Contains(err.Error(), "srv1") {
		t.Fatalf("revoked: %v, want ErrRevoked naming srv1", err)
	}
}

// Keys and certificates are written 0600, read back whole, and their
// bytes appear in no error or String output.
func TestFilesPrivate(t *testing.T) {
	dir := t.TempDir()
	ca, _ := NewCA()
	if err := ca.Save(dir); err != nil {
		t.Fatal(err)
	}
	id := issue(t, ca, "srv1", RoleServer, time.Now().Add(time.Hour))
	if err := id.Save(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{CAKeyFile, CAPubFile, NodeKeyFile, NodeCertFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, %v; want 0600", f, st.Mode().Perm(), err)
		}
	}
	ca2, err := LoadCA(dir)
	if err != nil || !ca2.Public().Equal(ca.Public()) {
		t.Fatalf("LoadCA: %v", err)
	}
	id2, err := Load(dir)
	if err != nil || !bytes.Equal(id2.Cert.Encoded(), id.Cert.Encoded()) || !id2.Key.Equal(id.Key) {
		t.Fatalf("Load: %v", err)
	}
	// A key that is not the certificate's is refused, without printing it.
	_, other, _ := NewKey()
	if err := os.WriteFile(filepath.Join(dir, NodeKeyFile), []byte(hex.EncodeToString(other.Seed())), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir)
	if err == nil {
		t.Fatal("loaded a key that is not the certificate's")
	}
	os.WriteFile(filepath.Join(dir, CAKeyFile), []byte("zz"+hex.EncodeToString(ca.key.Seed())), 0o600)
	_, err2 := LoadCA(dir)
	for _, s := range []string{err.Error(), err2.Error(), id.Cert.String()} {
		for _, secret := range [][]byte{other.Seed(), ca.key.Seed(), id.Key.Seed()} {
			if strings.Contains(s, hex.EncodeToString(secret)) || strings.Contains(s, string(secret)) {
				t.Fatalf("%q holds a private key", s)
			}
		}
	}
}

// FuzzDecode feeds arbitrary bytes to Decode: it must not panic, and what
// it accepts is exactly its canonical encoding, which the CA's signature
// covers entirely (any bit changed fails verification).
func FuzzDecode(f *testing.F) {
	ca, _ := NewCA()
	good := issue(f, ca, "srv1", RoleServer, time.Unix(1<<40, 0)).Cert
	f.Add(good.Encoded())
	f.Add(issue(f, ca, strings.Repeat("n", 255), RoleClient, time.Unix(0, 0)).Cert.Encoded())
	f.Add([]byte("PFC1"))
	f.Add(append([]byte(nil), good.Encoded()[:40]...))
	trust := Trust{CA: ca.Public(), Now: func() time.Time { return time.Unix(0, 0) }}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrBadCert) {
				t.Fatalf("error %v is not ErrBadCert", err)
			}
			return
		}
		if !bytes.Equal(c.Encoded(), b) || len(c.Key) != 32 || c.Name == "" {
			t.Fatalf("decoded %s from %x", c, b)
		}
		if err := trust.Verify(c); (err == nil) != bytes.Equal(b, good.Encoded()) {
			t.Fatalf("verify %s: %v", c, err)
		}
	})
}
