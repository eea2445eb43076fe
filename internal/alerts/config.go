package alerts

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ConfigFile is the name of the alert configuration in a cluster
// directory, and WebhookSecretFile the default name of the webhook's
// HMAC key there (made, 0600, when the webhook is configured without one).
const (
	ConfigFile        = "alerts.json"
	WebhookSecretFile = "alerts-webhook-secret"
)

// Config is the alert configuration file (JSON, 0600 in the cluster
// directory). Every field is optional; a threshold left out keeps its
// default.
type Config struct {
	// Interval is how often the rules are evaluated (default 10s).
	Interval Duration `json:"interval"`
	// MaxHistory is how many resolved alerts are kept (default 1000).
	MaxHistory int            `json:"max_history"`
	Thresholds Thresholds     `json:"thresholds"`
	Delivery   DeliveryPolicy `json:"delivery"`
	Webhook    *WebhookConfig `json:"webhook,omitempty"`
	SMTP       *SMTPConfig    `json:"smtp,omitempty"`
}

// WebhookConfig configures delivery by webhook.
type WebhookConfig struct {
	URL string `json:"url"` // http:// or https://
	// SecretFile holds the HMAC key (0600; relative to the cluster
	// directory; default alerts-webhook-secret, made if missing).
	SecretFile string `json:"secret_file,omitempty"`
}

// SMTPConfig configures delivery by e-mail.
type SMTPConfig struct {
	Addr     string   `json:"addr"` // host:port
	From     string   `json:"from"`
	To       []string `json:"to"`
	Username string   `json:"username,omitempty"`
	// The password is read from PasswordFile (0600, relative to the
	// cluster directory) or else from the environment variable
	// PasswordEnv; never from this file or the command line.
	PasswordFile string `json:"password_file,omitempty"`
	PasswordEnv  string `json:"password_env,omitempty"`
	RequireTLS   bool   `json:"require_tls,omitempty"`
}

// DefaultInterval is the default evaluation interval.
const DefaultInterval = 10 * time.Second

// DefaultConfig returns the configuration used when there is no file.
func DefaultConfig() Config {
	return Config{Interval: Duration(DefaultInterval), MaxHistory: DefaultMaxHistory, Thresholds: DefaultThresholds(),
		Delivery: DeliveryPolicy{}.withDefaults()}
}

// maxConfig bounds the configuration file.
const maxConfig = 1 << 20

// ParseConfig reads a configuration over the defaults and validates it.
// Unknown fields are refused (a misspelled threshold would be silently
// ignored otherwise).
func ParseConfig(b []byte) (Config, error) {
	c := DefaultConfig()
	if len(b) > maxConfig {
		return c, fmt.Errorf("%w: alert configuration of %d bytes", ErrInvalid, len(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%w: alert configuration: %v", ErrInvalid, err)
	}
	if dec.More() {
		return c, fmt.Errorf("%w: alert configuration: data after the JSON object", ErrInvalid)
	}
	return c, c.Validate()
}

// Validate rejects a configuration that cannot work.
func (c Config) Validate() error {
	if c.Interval <= 0 {
		return fmt.Errorf("%w: interval %v: want a positive duration", ErrInvalid, time.Duration(c.Interval))
	}
	if c.MaxHistory < 1 {
		return fmt.Errorf("%w: max_history %d: want at least 1", ErrInvalid, c.MaxHistory)
	}
	if err := c.Thresholds.Validate(); err != nil {
		return err
	}
	if err := c.Delivery.Validate(); err != nil {
		return err
	}
	if w := c.Webhook; w != nil {
		u, err := url.Parse(w.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: webhook url: want an http:// or https:// URL", ErrInvalid)
		}
	}
	if s := c.SMTP; s != nil {
		if _, _, err := net.SplitHostPort(s.Addr); err != nil {
			return fmt.Errorf("%w: smtp addr %q: want host:port", ErrInvalid, s.Addr)
		}
		if len(s.To) == 0 {
			return fmt.Errorf("%w: smtp: no recipient (to)", ErrInvalid)
		}
		for _, a := range append([]string{s.From}, s.To...) {
			if _, err := mail.ParseAddress(a); err != nil || strings.ContainsAny(a, "\r\n") {
				return fmt.Errorf("%w: smtp address %q: %v", ErrInvalid, a, err)
			}
		}
		if s.Username != "" && s.PasswordFile == "" && s.PasswordEnv == "" {
			return fmt.Errorf("%w: smtp username set without password_file or password_env", ErrInvalid)
		}
	}
	return nil
}

// LoadConfig reads dir/alerts.json. A missing file gives the defaults; a
// file readable by group or others is refused.
func LoadConfig(dir string) (Config, error) {
	p := filepath.Join(dir, ConfigFile)
	b, err := readPrivate(p)
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultConfig(), nil
	}
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(b)
	if err != nil {
		return c, fmt.Errorf("%s: %w", p, err)
	}
	return c, nil
}

// readPrivate reads a file that must be its owner's only (no group or
// other permission bits).
func readPrivate(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("alerts: %s has mode %v: it must be its owner's only (chmod 600 %s)", p, fi.Mode().Perm(), p)
	}
	if fi.Size() > maxConfig {
		return nil, fmt.Errorf("alerts: %s: %d bytes is too large", p, fi.Size())
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if n == len(b) {
		err = nil
	}
	return b[:n], err
}

// Notifiers makes the configured channels, reading their secrets: files
// relative to dir (the cluster directory), the environment through
// getenv. A missing webhook secret file is made with a random key.
func (c Config) Notifiers(dir string, getenv func(string) string) ([]Notifier, error) {
	var out []Notifier
	if w := c.Webhook; w != nil {
		p := w.SecretFile
		if p == "" {
			p = WebhookSecretFile
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		secret, err := readPrivate(p)
		if errors.Is(err, fs.ErrNotExist) && w.SecretFile == "" {
			secret, err = makeSecret(p)
		}
		if err != nil {
			return nil, fmt.Errorf("alerts: webhook secret: %w", err)
		}
		if secret = bytes.TrimSpace(secret); len(secret) < 16 {
			return nil, fmt.Errorf("alerts: webhook secret %s: %d bytes, want at least 16", p, len(secret))
		}
		out = append(out, &Webhook{URL: w.URL, Secret: secret})
	}
	if s := c.SMTP; s != nil {
		m := &Email{Addr: s.Addr, From: s.From, To: s.To, Username: s.Username, RequireTLS: s.RequireTLS}
		if h, err := os.Hostname(); err == nil {
			m.Hello = h
		}
		switch {
		case s.PasswordFile != "":
			p := s.PasswordFile
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			b, err := readPrivate(p)
			if err != nil {
				return nil, fmt.Errorf("alerts: smtp password: %w", err)
			}
			m.Password = strings.TrimRight(string(b), "\r\n")
		case s.PasswordEnv != "":
			if m.Password = getenv(s.PasswordEnv); m.Password == "" {
				return nil, fmt.Errorf("alerts: smtp password: environment variable %s is empty or not set", s.PasswordEnv)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// makeSecret writes a new random key to p (0600, never over an existing
// file) and returns it.
func makeSecret(p string) ([]byte, error) {
	var k [32]byte
	rand.Read(k[:])
	s := []byte(hex.EncodeToString(k[:]) + "\n")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(s); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return s, f.Close()
}
