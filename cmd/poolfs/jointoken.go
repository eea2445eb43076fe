package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"poolfs/internal/cluster"
)

// A join token holds the cluster secret and an enrolment credential, so no
// command takes one from its arguments: every local user reads those (ps,
// /proc/PID/cmdline) for the whole life of the process. readJoinToken is
// the one way in. It reads a token from a file that neither group nor
// others may access, as ssh refuses such a private key; from standard
// input (without echo on a terminal); or, for `cluster join` only, from
// the environment variable POOLFS_JOIN_TOKEN, which only the process's
// owner and root read. Daemons (meta, storage) never read the variable:
// a unit that sets it would otherwise join again at every start.

// tokenEnv is the environment variable `cluster join` reads a token from.
const tokenEnv = "POOLFS_JOIN_TOKEN"

// maxTokenLen bounds what is read for a token (one is about 300 bytes).
const maxTokenLen = 64 << 10

// tokenFileHelp describes FILE of --join-file and --token-file.
const tokenFileHelp = "FILE must not be readable or writable by group or others (chmod 600), as ssh refuses such a private key: the token holds the cluster secret"

// tokenArgError is the error for a token given as an argument. It never
// holds the argument.
func tokenArgError(where, ways string) error {
	return fmt.Errorf("%s takes no join token on the command line, where every local user reads it (ps, /proc/PID/cmdline): give it %s",
		where, ways)
}

// readJoinToken returns the token in file ("-": standard input). When
// file is "" it is the one in POOLFS_JOIN_TOKEN if env is true and the
// variable is set, else the one on standard input.
func readJoinToken(file string, env bool) (cluster.Token, error) {
	var b []byte
	var err error
	switch {
	case file != "" && file != "-":
		b, err = readTokenFile(file)
	case file == "" && env && os.Getenv(tokenEnv) != "":
		b = []byte(os.Getenv(tokenEnv))
	default:
		b, err = readStdinToken(os.Stdin)
	}
	if err != nil {
		return cluster.Token{}, err
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return cluster.Token{}, fmt.Errorf("%w: it is empty", cluster.ErrBadToken)
	}
	return cluster.ParseToken(string(b))
}

// readStdinToken reads a token from in: without echo after a prompt on
// standard error when in is a terminal, else all of it.
func readStdinToken(in *os.File) ([]byte, error) {
	if fd := int(in.Fd()); term.IsTerminal(fd) {
		fmt.Fprint(os.Stderr, "join token: ")
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(os.Stderr)
		return b, err
	}
	return readTokenBytes(in, "standard input")
}

// readTokenFile reads the token in file name (openPrivateFile).
func readTokenFile(name string) ([]byte, error) {
	f, err := openPrivateFile(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readTokenBytes(f, name)
}

// openPrivateFile opens file name, which holds a secret, for reading. It
// refuses a regular file that group or others may read or write, as ssh
// refuses such a private key (a pipe or terminal is taken as it is).
func openPrivateFile(name string) (*os.File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if perm := st.Mode().Perm(); st.Mode().IsRegular() && perm&0o077 != 0 {
		f.Close()
		return nil, fmt.Errorf("%s has mode %04o: group or others may read or change the secret in it; chmod 600 %s", name, perm, name)
	}
	return f, nil
}

// readTokenBytes reads all of r, at most maxTokenLen bytes.
func readTokenBytes(r io.Reader, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxTokenLen+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxTokenLen {
		return nil, fmt.Errorf("%w: %s holds more than %d bytes", cluster.ErrBadToken, what, maxTokenLen)
	}
	return b, nil
}

// joinFlags are the flags of a daemon that may join the cluster first:
// --join-file, and a hidden --join that only refuses a literal token.
type joinFlags struct {
	file    string
	literal string
	cmd     *cobra.Command
}

// add adds the flags to cmd; what names what the daemon does after joining.
func (j *joinFlags) add(cmd *cobra.Command, what string) {
	j.cmd = cmd
	f := cmd.Flags()
	f.StringVar(&j.file, "join-file", "", "join the cluster first with the join token in `FILE` (from `poolfs cluster token`; - : standard input)"+what+"; "+tokenFileHelp)
	f.StringVar(&j.literal, "join", "", "refused: a token on the command line is readable by every local user")
	_ = f.MarkHidden("join")
}

// join makes dir the machine's directory of the cluster of --join-file's
// token, if given.
func (j *joinFlags) join(dir string) error {
	if j.cmd.Flags().Changed("join") {
		return tokenArgError(j.cmd.Name(), "in a file of mode 0600 by --join-file FILE, or on standard input by --join-file -")
	}
	if j.file == "" {
		return nil
	}
	t, err := readJoinToken(j.file, false)
	if err != nil {
		return fmt.Errorf("--join-file: %w", err)
	}
	return cluster.Join(dir, t)
}
