package dashboard

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"poolfs/internal/dashboard/history"
)

//go:embed templates/*.html static/*
var assets embed.FS

// HistoryFile is the name of the saved time series in the cluster
// directory.
const HistoryFile = "dashboard-history"

// Config configures a dashboard. Cluster and Users are required.
type Config struct {
	Cluster Cluster
	Users   *Users
	// Dir is where the history is kept (HistoryFile, 0600); "" keeps it
	// in memory only.
	Dir string
	// Clients and Alerts are optional sources; the pages say when one is
	// missing.
	Clients ClientStats
	Alerts  Alerts
	Logger  *slog.Logger
	// SessionTTL bounds a session (default 12h) and IdleTimeout ends one
	// not used for that long (default 1h).
	SessionTTL, IdleTimeout time.Duration
	// Throttle limits login attempts (default NewThrottle()).
	Throttle *Throttle
	// SampleEvery is the sampling period of the charts (default 1s).
	SampleEvery time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Validate reports a missing required field or a bad duration.
func (c *Config) Validate() error {
	switch {
	case c.Cluster == nil:
		return fmt.Errorf("%w: no cluster", ErrInvalid)
	case c.Users == nil:
		return fmt.Errorf("%w: no user file", ErrInvalid)
	case c.SessionTTL < 0 || c.IdleTimeout < 0 || c.SampleEvery < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalid)
	}
	return nil
}

// Server is the dashboard: an http.Handler and the sampler of its charts.
type Server struct {
	cfg   Config
	log   *slog.Logger
	hist  *history.Store
	sess  *sessions
	pages map[string]*template.Template
	mux   *http.ServeMux

	striping stripingCache // analytics.go

	// ctx ends at Close; stop ends it. wg counts the goroutines to wait for.
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// New returns a dashboard; Start begins sampling.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = time.Hour
	}
	if cfg.Throttle == nil {
		cfg.Throttle = NewThrottle()
	}
	if cfg.SampleEvery == 0 {
		cfg.SampleEvery = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, sess: newSessions(cfg.SessionTTL, cfg.IdleTimeout)}
	s.ctx, s.stop = context.WithCancel(context.Background())
	var err error
	if cfg.Dir != "" {
		if s.hist, err = history.Load(filepath.Join(cfg.Dir, HistoryFile)); err != nil {
			// A damaged history loses charts, not the cluster: start again.
			s.log.Warn("dashboard: history unreadable, starting a new one", "err", err)
		}
	}
	if s.hist == nil {
		s.hist = history.NewStore()
	}
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		base := filepath.Base(n)
		if base == "layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", n, err)
		}
		out[base] = t
	}
	return out, nil
}

// Start starts sampling the cluster for the charts until Close.
func (s *Server) Start() {
	ctx := s.ctx
	path := ""
	if s.cfg.Dir != "" {
		path = filepath.Join(s.cfg.Dir, HistoryFile)
	}
	sm := &sampler{cl: s.cfg.Cluster, clients: s.cfg.Clients, hist: s.hist, path: path, log: s.log}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		sm.run(ctx, s.cfg.SampleEvery)
	}()
}

// Close stops sampling and saves the history.
func (s *Server) Close() {
	s.stop()
	s.wg.Wait()
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

// Serve serves the dashboard on ln until ctx ends; with a certificate it
// serves HTTPS (and its cookies are Secure).
func (s *Server) Serve(ctx context.Context, ln net.Listener, cert *tls.Certificate) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	if cert != nil {
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, hs.TLSConfig)
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Server) routes() {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.authed(s.logout))
	mux.HandleFunc("GET /{$}", s.authed(s.overview))
	mux.HandleFunc("GET /charts", s.authed(s.charts))
	mux.HandleFunc("GET /events", s.authed(s.events))
	mux.HandleFunc("GET /analytics", s.authed(s.analytics))
	mux.HandleFunc("GET /alerts", s.authed(s.alerts))
	mux.HandleFunc("GET /confirm", s.authed(s.adminOnly(s.confirm)))
	mux.HandleFunc("POST /action", s.authed(s.adminOnly(s.action)))
	s.mux = mux
}

// view is what every page template gets.
type view struct {
	Title   string
	User    string
	Admin   bool
	CSRF    string
	Flash   string
	Error   string
	Page    string // which tab is current
	Refresh bool   // the page refreshes its live part
	Data    any
}

var funcs = template.FuncMap{
	"human":   func(n int64) string { return human(float64(n)) },
	"i64":     func(n uint64) int64 { return int64(n) },
	"humanf":  human,
	"pct":     func(a, b int64) float64 { return pct(float64(a), float64(b)) },
	"seconds": func(s float64) string { return (time.Duration(s) * time.Second).Round(time.Second).String() },
	"when":    func(t time.Time) string { return t.Format("2006-01-02 15:04:05") },
	"whenNS":  func(ns int64) string { return time.Unix(0, ns).Format("2006-01-02 15:04:05") },
	"dur":     func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"lat":     latency,
	"ms":      func(sec float64) string { return strconv.FormatFloat(sec*1000, 'f', 1, 64) + " ms" },
}

// latency formats a probe's duration to three significant digits or so.
func latency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < 100*time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func pct(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return 100 * a / b
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	t := s.pages[page]
	if t == nil {
		http.Error(w, "no such page", http.StatusInternalServerError)
		return
	}
	if u := userOf(r); u != nil {
		v.User, v.Admin, v.CSRF = u.user, u.role == RoleAdmin, u.csrf
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := t.Execute(w, v); err != nil {
		s.log.Warn("dashboard: render", "page", page, "err", err)
	}
}

// fail shows an error page with status.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, r, status, "error.html", view{Title: http.StatusText(status), Error: msg})
}
