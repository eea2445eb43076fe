package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"poolfs/internal/dashboard"
)

// userCmd manages the dashboard's users (the user file in the cluster
// directory; a running dashboard sees changes at once).
func userCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Dashboard users: add, passwd, del, list (passwords from the terminal or stdin)"}
	open := func() (*dashboard.Users, error) {
		if _, err := os.Stat(g.dir); err != nil {
			return nil, fmt.Errorf("cluster directory %s: %w", g.dir, err)
		}
		return dashboard.OpenUsers(filepath.Join(g.dir, dashboard.UsersFile), 0)
	}
	var role string
	add := &cobra.Command{
		Use:   "add NAME --role admin|read-only",
		Short: "Add a dashboard user; the password is read from the terminal (twice) or one line of stdin",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := dashboard.ParseRole(role)
			if err != nil {
				return err
			}
			u, err := open()
			if err != nil {
				return err
			}
			pw, err := readPassword(os.Stdin, "password for "+args[0])
			if err != nil {
				return err
			}
			if err := u.Add(args[0], r, pw); err != nil {
				return err
			}
			fmt.Printf("user %s added (%s)\n", args[0], r)
			return nil
		},
	}
	add.Flags().StringVar(&role, "role", "read-only", "admin (sees and acts) or read-only (sees)")
	var newRole string
	passwd := &cobra.Command{
		Use:   "passwd NAME",
		Short: "Change a dashboard user's password (and role with --role); the user's sessions end",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r dashboard.Role
			if newRole != "" {
				var err error
				if r, err = dashboard.ParseRole(newRole); err != nil {
					return err
				}
			}
			u, err := open()
			if err != nil {
				return err
			}
			if _, err := u.List(); err != nil {
				return err
			}
			pw, err := readPassword(os.Stdin, "new password for "+args[0])
			if err != nil {
				return err
			}
			if err := u.SetPassword(args[0], r, pw); err != nil {
				return err
			}
			if args[0] == "admin" {
				// The generated first password is no longer the admin's.
				if err := os.Remove(filepath.Join(g.dir, FirstPasswordFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			fmt.Printf("user %s: password changed\n", args[0])
			return nil
		},
	}
	passwd.Flags().StringVar(&newRole, "role", "", "also change the role: admin or read-only")
	del := &cobra.Command{
		Use:   "del NAME",
		Short: "Remove a dashboard user (not the last admin); its sessions end",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := open()
			if err != nil {
				return err
			}
			if err := u.Delete(args[0]); err != nil {
				return err
			}
			fmt.Printf("user %s removed\n", args[0])
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the dashboard users and their roles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := open()
			if err != nil {
				return err
			}
			users, err := u.List()
			if err != nil {
				return err
			}
			names := make([]string, 0, len(users))
			for n := range users {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Printf("%s\t%s\n", n, users[n])
			}
			return nil
		},
	}
	cmd.AddCommand(add, passwd, del, list)
	return cmd
}

// readPassword reads a password: from a terminal without echo, asked
// twice; otherwise the first line of in. Never from the command line.
func readPassword(in *os.File, what string) (string, error) {
	if term.IsTerminal(int(in.Fd())) {
		fmt.Fprintf(os.Stderr, "%s: ", what)
		a, err := term.ReadPassword(int(in.Fd()))
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(os.Stderr, "again: ")
		b, err := term.ReadPassword(int(in.Fd()))
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return "", err
		}
		if string(a) != string(b) {
			return "", errors.New("the passwords differ")
		}
		return string(a), nil
	}
	return readPasswordLine(in)
}

// readPasswordLine reads the first line of r (without its line ending).
func readPasswordLine(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("no password on stdin")
	}
	return line, nil
}
