package postgres_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"poolfs/internal/meta/pgtest"
	"poolfs/internal/meta/postgres"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://h:5432/db?sslmode=disable", "postgres://h:5432/db?sslmode=disable"},
		{"postgres://u:s3cret@h:5432/db", "postgres://u:xxxxx@h:5432/db"},
		{"postgresql://u:p@ss@h/db", "postgresql://u:xxxxx@h/db"},
		{"postgres://u:p w@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://:s3cret@h/db", "postgres://:xxxxx@h/db"},
		{"postgres://u@h/db?password=s3cret&sslmode=disable", "postgres://u@h/db?password=xxxxx"},
		{"postgres://u@h/db?sslpassword=s3cret", "postgres://u@h/db?sslpassword=xxxxx"},
		{"host=h user=u password=s3cret dbname=db", "host=h user=u password=xxxxx dbname=db"},
		{"host=h password = 's3 cr\\'et' dbname=db", "host=h password = xxxxx dbname=db"},
		{"host=h PASSWORD=s3cret", "host=h PASSWORD=xxxxx"},
		{"service=poolfs", "service=poolfs"},
		{`open "postgres://u:s3cret@h/db": failed`, `open "postgres://u:xxxxx@h/db": failed`},
	} {
		if got := postgres.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(postgres.Redact(tc.in), "s3") || strings.Contains(postgres.Redact(tc.in), "cret") {
			t.Errorf("Redact(%q) shows the password", tc.in)
		}
		if has := postgres.HasPassword(tc.in); has != (tc.in != tc.want) {
			t.Errorf("HasPassword(%q) = %v", tc.in, has)
		}
	}
}

func FuzzRedact(f *testing.F) {
	f.Add("postgres://u:pw@h/db?password=pw2", "pw")
	f.Add("host=h password='a b' x=y", "a b")
	f.Fuzz(func(t *testing.T, prefix, password string) {
		if len(password) < 3 || strings.ContainsAny(password, "@'\\ \t\n\r\f\v") {
			return
		}
		for _, s := range []string{
			"postgres://user:" + password + "@" + prefix + "/db",
			prefix + " password=" + password + " host=h",
			prefix + "?password=" + password,
		} {
			if strings.Contains(prefix, password) {
				continue
			}
			if got := postgres.Redact(s); strings.Contains(got, password) {
				t.Fatalf("Redact(%q) = %q shows the password", s, got)
			}
		}
	})
}

// TestPasswordSources: a role that logs in with a password connects with
// the password from PGPASSWORD, from a password file (PGPASSFILE and
// passfile=) and from a service file; with a wrong password, neither the
// error nor anything else names the password.
func TestPasswordSources(t *testing.T) {
	ctx := context.Background()
	url, user, pw := pgtest.StartRole(t)
	dir := t.TempDir()
	host, port, db := hostPortDB(t, url)
	passfile := filepath.Join(dir, "pgpass")
	if err := os.WriteFile(passfile, []byte(fmt.Sprintf("%s:%s:%s:%s:%s\n", host, port, db, user, pw)), 0o600); err != nil {
		t.Fatal(err)
	}
	servicefile := filepath.Join(dir, "pg_service.conf")
	svc := fmt.Sprintf("[poolfs]\nhost=%s\nport=%s\ndbname=%s\nuser=%s\nsslmode=disable\npassfile=%s\n", host, port, db, user, passfile)
	if err := os.WriteFile(servicefile, []byte(svc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		dsn  string
	}{
		{"PGPASSWORD", map[string]string{"PGPASSWORD": pw}, url},
		{"PGPASSFILE", map[string]string{"PGPASSFILE": passfile}, url},
		{"passfile=", nil, url + "&passfile=" + passfile},
		{"PGSERVICE", map[string]string{"PGSERVICEFILE": servicefile, "PGSERVICE": "poolfs"}, "service=poolfs"},
		{"service=", map[string]string{"PGSERVICEFILE": servicefile}, "service=poolfs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"PGPASSWORD", "PGPASSFILE", "PGSERVICE", "PGSERVICEFILE"} {
				t.Setenv(k, tc.env[k])
			}
			e, err := postgres.Open(ctx, tc.dsn, testOwner)
			if err != nil {
				t.Fatal(err)
			}
			e.Close()
		})
	}
	t.Run("no password", func(t *testing.T) {
		t.Setenv("PGPASSFILE", filepath.Join(dir, "none"))
		if e, err := postgres.Open(ctx, url, testOwner); err == nil {
			e.Close()
			t.Fatal("the role logged in without a password: the server does not check passwords")
		}
	})
	wrong := "wrong-" + pw
	for _, tc := range []struct {
		name, dsn string
		env       map[string]string
	}{
		{"in URL", strings.Replace(url, user+"@", user+":"+wrong+"@", 1), nil},
		{"in query", url + "&password=" + wrong, nil},
		{"keyword", fmt.Sprintf("host=%s port=%s dbname=%s user=%s password=%s sslmode=disable", host, port, db, user, wrong), nil},
		{"PGPASSWORD", url, map[string]string{"PGPASSWORD": wrong}},
		{"unparsable URL", strings.Replace(url, user+"@", user+":"+wrong+"@", 1) + "%zz", nil},
	} {
		t.Run("wrong password "+tc.name, func(t *testing.T) {
			t.Setenv("PGPASSWORD", tc.env["PGPASSWORD"])
			e, err := postgres.Open(ctx, tc.dsn, testOwner)
			if err == nil {
				e.Close()
				t.Fatal("a wrong password was accepted")
			}
			if strings.Contains(err.Error(), wrong) || strings.Contains(fmt.Sprintf("%+v", err), pw) {
				t.Fatalf("the error shows the password: %v", err)
			}
			t.Log(err)
		})
	}
}

// hostPortDB splits a pgtest URL.
func hostPortDB(t *testing.T, url string) (host, port, db string) {
	rest := url[strings.Index(url, "@")+1:]
	hp, rest, _ := strings.Cut(rest, "/")
	db, _, _ = strings.Cut(rest, "?")
	host, port, _ = strings.Cut(hp, ":")
	return host, port, db
}
