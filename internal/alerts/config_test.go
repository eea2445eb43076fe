package alerts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`{"interval":"30s","thresholds":{"pool_full_warning_pct":70,"down_for":"5m"},
		"delivery":{"attempts":3},"webhook":{"url":"https://hooks.example.org/poolfs"},
		"smtp":{"addr":"mail.example.org:587","from":"poolfs@example.org","to":["ops@example.org"],"username":"u","password_env":"SMTP_PASS"}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultThresholds()
	if c.Interval != Duration(30*time.Second) || c.Thresholds.PoolFullWarning != 70 || c.Thresholds.DownFor != Duration(5*time.Minute) ||
		c.Thresholds.PoolFullCritical != d.PoolFullCritical || c.Thresholds.RebuildStall != d.RebuildStall ||
		c.Delivery.Attempts != 3 || c.Delivery.Backoff != Duration(2*time.Second) || c.MaxHistory != DefaultMaxHistory {
		t.Fatalf("config %+v: want the given fields over the defaults", c)
	}
	for name, s := range map[string]string{
		"unknown field":        `{"thresholds":{"pool_ful_warning_pct":70}}`,
		"bad duration":         `{"interval":"soon"}`,
		"number duration":      `{"interval":10}`,
		"zero interval":        `{"interval":"0s"}`,
		"warning over crit":    `{"thresholds":{"pool_full_warning_pct":95}}`,
		"webhook scheme":       `{"webhook":{"url":"ftp://x/"}}`,
		"smtp no port":         `{"smtp":{"addr":"mail","from":"a@b.c","to":["d@e.f"]}}`,
		"smtp no recipient":    `{"smtp":{"addr":"mail:25","from":"a@b.c"}}`,
		"smtp header inject":   `{"smtp":{"addr":"mail:25","from":"a@b.c","to":["d@e.f\r\nBcc: x@y.z"]}}`,
		"smtp user, no pass":   `{"smtp":{"addr":"mail:25","from":"a@b.c","to":["d@e.f"],"username":"u"}}`,
		"password in the file": `{"smtp":{"addr":"mail:25","from":"a@b.c","to":["d@e.f"],"password":"x"}}`,
		"trailing data":        `{} {}`,
		"zero attempts":        `{"delivery":{"attempts":-1}}`,
	} {
		if _, err := ParseConfig([]byte(s)); err == nil {
			t.Errorf("%s: ParseConfig accepted %s", name, s)
		}
	}
}

// TestConfigFilesPrivate checks that the configuration and secret files
// must be 0600, that a missing webhook secret is made 0600, and that the
// SMTP password comes from its file or the environment.
func TestConfigFilesPrivate(t *testing.T) {
	dir := t.TempDir()
	if c, err := LoadConfig(dir); err != nil || c.Webhook != nil || c.Interval != Duration(DefaultInterval) {
		t.Fatalf("no file: %+v, %v; want the defaults", c, err)
	}
	p := filepath.Join(dir, ConfigFile)
	cfg := `{"webhook":{"url":"http://127.0.0.1:9/h"},"smtp":{"addr":"127.0.0.1:25","from":"a@b.c","to":["d@e.f"],"username":"u","password_file":"smtp-pass"}}`
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("0644 config: %v, want refused", err)
	}
	os.Chmod(p, 0o600)
	c, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "smtp-pass"), []byte("pw-from-file\n"), 0o640)
	if _, err := c.Notifiers(dir, os.Getenv); err == nil || !strings.Contains(err.Error(), "smtp password") {
		t.Fatalf("0640 password file: %v, want refused", err)
	}
	os.Chmod(filepath.Join(dir, "smtp-pass"), 0o600)
	ns, err := c.Notifiers(dir, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, WebhookSecretFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("webhook secret made: %v, %v; want 0600", fi, err)
	}
	wh, em := ns[0].(*Webhook), ns[1].(*Email)
	again, _ := c.Notifiers(dir, os.Getenv)
	if len(wh.Secret) != 64 || string(again[0].(*Webhook).Secret) != string(wh.Secret) || em.Password != "pw-from-file" {
		t.Fatalf("secret %q (again %q), password %q", wh.Secret, again[0].(*Webhook).Secret, em.Password)
	}
	c.SMTP.PasswordFile, c.SMTP.PasswordEnv = "", "POOLFS_TEST_SMTP"
	ns, err = c.Notifiers(dir, func(k string) string { return map[string]string{"POOLFS_TEST_SMTP": "pw-from-env"}[k] })
	if err != nil || ns[1].(*Email).Password != "pw-from-env" {
		t.Fatalf("password from env: %v", err)
	}
	if _, err := c.Notifiers(dir, func(string) string { return "" }); err == nil {
		t.Fatal("an unset password variable was accepted")
	}
}

// FuzzParseConfig checks that any bytes give an error or a valid
// configuration.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"interval":"30s","thresholds":{"pool_full_warning_pct":70}}`))
	f.Add([]byte(`{"smtp":{"addr":"m:25","from":"a@b.c","to":["d@e.f"]},"webhook":{"url":"http://h/"}}`))
	f.Add([]byte(`{"delivery":{"attempts":3,"backoff":"1s","max_backoff":"1m","timeout":"5s"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseConfig returned an invalid configuration: %v", err)
		}
		if _, err := NewEngine(Options{Thresholds: &c.Thresholds, MaxHistory: c.MaxHistory, Delivery: c.Delivery}); err != nil {
			t.Fatalf("a parsed configuration makes no engine: %v", err)
		}
	})
}
