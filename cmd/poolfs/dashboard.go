package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"poolfs/internal/cluster"
	"poolfs/internal/dashboard"
	"poolfs/internal/privfile"
)

// dashFlags are the dashboard options of `poolfs up`.
type dashFlags struct {
	addr, cert, key string
	adminPassword   string // file holding the first admin's password, "-": stdin
	changed         bool   // --dashboard was given
}

func (f *dashFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "dashboard", "127.0.0.1:9480", "web dashboard address (empty: none); an address other than loopback needs --dashboard-cert")
	fl.StringVar(&f.cert, "dashboard-cert", "", "TLS certificate file (PEM) of the dashboard: serve HTTPS")
	fl.StringVar(&f.key, "dashboard-key", "", "TLS private key file (PEM) of --dashboard-cert")
	fl.StringVar(&f.adminPassword, "admin-password-file", "", "at the first start, read the dashboard admin's password from this file (- : stdin; refused if group or others may read or write it); "+
		"without it a password is generated and shown once on a terminal, or written to the owner-only file "+FirstPasswordFile+" in the cluster directory")
}

// checkDashFlags refuses options that would expose passwords.
func (f *dashFlags) check(cmd *cobra.Command) error {
	f.changed = cmd.Flags().Changed("dashboard")
	if (f.cert == "") != (f.key == "") {
		return errors.New("--dashboard-cert and --dashboard-key go together")
	}
	if f.addr == "" || f.cert != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return fmt.Errorf("--dashboard %q: %w", f.addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--dashboard %s is not a loopback address: passwords and session cookies would cross the network in clear; "+
			"give --dashboard-cert and --dashboard-key, or reach a loopback dashboard through an SSH tunnel", f.addr)
	}
	return nil
}

// FirstPasswordFile, in the cluster directory, holds a generated first
// admin password when it could not be shown on a terminal (a service's
// output goes to a journal that other users may read). It is mode 0600 and
// `poolfs user passwd admin` removes it.
const FirstPasswordFile = "dashboard-admin-password"

// firstAdmin creates the user file with its admin at the cluster's first
// start in dir: the password comes from --admin-password-file (or stdin), or
// is generated. A generated password is printed only to a terminal;
// otherwise it is written to FirstPasswordFile and only that file's name is
// printed, so that no log keeps it.
func firstAdmin(dir string, users *dashboard.Users, f dashFlags) error {
	if users.Exists() {
		return nil
	}
	var pw string
	switch f.adminPassword {
	case "":
		pw = dashboard.GeneratePassword()
		if term.IsTerminal(int(os.Stdout.Fd())) {
			defer fmt.Printf("dashboard: user admin, password %s (shown only now; change it with poolfs user passwd admin)\n", pw)
			break
		}
		path := filepath.Join(dir, FirstPasswordFile)
		if err := privfile.Write(path, []byte(pw+"\n")); err != nil {
			return fmt.Errorf("dashboard admin password: %w", err)
		}
		defer fmt.Printf("dashboard: user admin, password in %s (owner only; change it with poolfs user passwd admin, which removes the file)\n", path)
	case "-":
		var err error
		if pw, err = readPassword(os.Stdin, "dashboard admin password"); err != nil {
			return err
		}
	default:
		fh, err := openPrivateFile(f.adminPassword)
		if err != nil {
			return fmt.Errorf("--admin-password-file: %w", err)
		}
		defer fh.Close()
		if pw, err = readPasswordLine(fh); err != nil {
			return fmt.Errorf("--admin-password-file %s: %w", f.adminPassword, err)
		}
	}
	return users.Add("admin", dashboard.RoleAdmin, pw)
}

// startDashboard serves the dashboard of the running cluster in dir (its
// management service: `poolfs up` or `poolfs mgmt`, reached with secret,
// the one the service started with, not the file's, which may have
// changed since) until ctx ends; the returned function stops it (and
// saves its history). A
// default address already in use is a warning, not an error: another
// cluster's dashboard may hold it.
func startDashboard(ctx context.Context, dir string, secret []byte, f dashFlags, log *slog.Logger) (func(), error) {
	if f.addr == "" {
		return func() {}, nil
	}
	users, err := dashboard.OpenUsers(filepath.Join(dir, dashboard.UsersFile), 0)
	if err != nil {
		return nil, err
	}
	if err := firstAdmin(dir, users, f); err != nil {
		return nil, err
	}
	var cert *tls.Certificate
	if f.cert != "" {
		c, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("dashboard certificate: %w", err)
		}
		cert = &c
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		if f.changed {
			return nil, fmt.Errorf("dashboard: %w", err)
		}
		fmt.Fprintf(os.Stderr, "poolfs: no dashboard: %v (choose another address with --dashboard)\n", err)
		return func() {}, nil
	}
	// The dashboard is a client of the management service only (not of
	// the metadata service, which may start later on another machine).
	info, _, err := cluster.ReadInfo(dir)
	if err != nil {
		ln.Close()
		return nil, err
	}
	mc, mclose, err := cluster.DialMgmt(info, secret)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("dashboard: connect to the management service %s: %w", info.Mgmt, err)
	}
	srv, err := dashboard.New(dashboard.Config{Cluster: mc, Clients: mc, Alerts: mc, Users: users, Dir: dir, Logger: log})
	if err != nil {
		ln.Close()
		mclose()
		return nil, err
	}
	srv.Start()
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(sctx, ln, cert); err != nil {
			log.Error("dashboard stopped", "err", err)
		}
	}()
	scheme := "http"
	if cert != nil {
		scheme = "https"
	}
	fmt.Printf("dashboard: %s://%s/\n", scheme, ln.Addr())
	return func() {
		cancel()
		<-done
		srv.Close()
		mclose()
	}, nil
}
