package cluster

import (
	"errors"
	"strings"
	"testing"
)

func TestTokenRoundTripAndJoin(t *testing.T) {
	first := t.TempDir() + "/first"
	tok, err := Create(first, "lab", "198.18.0.1:9401")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(first, "lab", "198.18.0.1:9401"); err == nil {
		t.Fatal("Create made a second cluster in one directory")
	}
	got, err := ParseToken(tok.String())
	if err != nil {
		t.Fatal(err)
	}
	if got.Mgmt != tok.Mgmt || got.ID != tok.ID || string(got.Secret) != string(tok.Secret) {
		t.Fatalf("token round trip: %+v, want %+v", got, tok)
	}
	other := t.TempDir() + "/other"
	if err := Join(other, got); err != nil {
		t.Fatal(err)
	}
	info, secret, err := ReadInfo(other)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mgmt != tok.Mgmt || string(secret) != string(tok.Secret) {
		t.Fatalf("joined directory has %+v", info)
	}
	if back, err := ReadToken(other, classServer); err != nil || back.String() != tok.String() {
		t.Fatalf("ReadToken of a joined directory: %v", err)
	}
	// A directory of another cluster is refused.
	stranger, err := Create(t.TempDir()+"/stranger", "", "198.18.0.9:9401")
	if err != nil {
		t.Fatal(err)
	}
	if err := Join(other, stranger); err == nil {
		t.Fatal("joined a directory of one cluster to another")
	}
}

// testToken is a valid token of class server for mgmt.
func testToken(mgmt string) Token {
	return Token{Mgmt: mgmt, ID: strings.Repeat("ab", 16), Secret: make([]byte, 32), CA: make([]byte, 32), Class: classServer, Enroll: make([]byte, enrollLen)}
}

// with returns the encoding of t changed by f.
func with(t Token, f func(*Token)) string {
	f(&t)
	return t.String()
}

func TestParseTokenRejects(t *testing.T) {
	good := testToken("10.0.0.1:9401")
	for name, s := range map[string]string{
		"empty":       "",
		"no prefix":   "abc",
		"not b64":     tokenPrefix + "!!!",
		"not json":    tokenPrefix + "YWJj",
		"no port":     with(good, func(t *Token) { t.Mgmt = "10.0.0.1" }),
		"2nd bad":     with(good, func(t *Token) { t.Mgmt = "10.0.0.1:9401,10.0.0.2" }),
		"no addr":     with(good, func(t *Token) { t.Mgmt = "," }),
		"short id":    with(good, func(t *Token) { t.ID = "ab" }),
		"short key":   with(good, func(t *Token) { t.Secret = []byte("x") }),
		"no CA":       with(good, func(t *Token) { t.CA = nil }),
		"bad class":   with(good, func(t *Token) { t.Class = "admin" }),
		"short cred":  with(good, func(t *Token) { t.Enroll = t.Enroll[:8] }),
		"old version": "poolfs-join-1:" + strings.TrimPrefix(good.String(), tokenPrefix),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseToken(s); !errors.Is(err, ErrBadToken) {
				t.Fatalf("ParseToken(%q) = %v, want ErrBadToken", s, err)
			}
		})
	}
}

// TestTokenWithSeveralMgmt: a token names every management service, and a
// machine that joins with it reaches them all.
func TestTokenWithSeveralMgmt(t *testing.T) {
	dir := t.TempDir() + "/c"
	tok, err := Create(dir, "", "10.0.0.1:9401, 10.0.0.2:9401")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseToken(tok.String())
	if err != nil {
		t.Fatal(err)
	}
	joined := t.TempDir() + "/j"
	if err := Join(joined, got); err != nil {
		t.Fatal(err)
	}
	info, _, err := ReadInfo(joined)
	if err != nil {
		t.Fatal(err)
	}
	if a := MgmtAddrs(info.Mgmt); len(a) != 2 || a[0] != "10.0.0.1:9401" || a[1] != "10.0.0.2:9401" {
		t.Fatalf("management addresses of the joined machine: %q", a)
	}
}

func FuzzParseToken(f *testing.F) {
	f.Add(testToken("10.0.0.1:9401").String())
	f.Add(testToken("10.0.0.1:9401,[::1]:9401").String())
	f.Add(tokenPrefix + "e30")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			return
		}
		if len(MgmtAddrs(tok.Mgmt)) == 0 {
			t.Fatalf("token %q accepted without a management address", tok.Mgmt)
		}
		again, err := ParseToken(tok.String())
		if err != nil || again.String() != tok.String() {
			t.Fatalf("a parsed token does not round trip: %v", err)
		}
	})
}
