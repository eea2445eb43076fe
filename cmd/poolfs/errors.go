package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"poolfs/internal/fusefs"
)

// pathErr is a failed operation on one or two paths, as the user gave
// them. formatError prints it as coreutils does:
//
//	cannot stat '/nope.tar': No such file or directory
type pathErr struct {
	op    string   // "stat", "remove", "create directory", "move", ...
	paths []string // one path; two for a move ("'A' to 'B'")
	err   error
	hint  string // a next step, printed on a line of its own; "" for the default of hints
}

func (e *pathErr) Error() string {
	return fmt.Sprintf("cannot %s '%s': %v", e.op, strings.Join(e.paths, "' to '"), e.err)
}

func (e *pathErr) Unwrap() error { return e.err }

// failed wraps err, if any, as op on paths.
func failed(op string, err error, paths ...string) error {
	if err == nil {
		return nil
	}
	var pe *pathErr
	if errors.As(err, &pe) {
		return err // said once, by the innermost
	}
	return &pathErr{op: op, paths: paths, err: err}
}

// plainErrnos are the errors whose errno says all: their message is the
// C library's text for it, without the layers' detail.
var plainErrnos = map[syscall.Errno]bool{
	syscall.ENOENT: true, syscall.EEXIST: true, syscall.ENOTDIR: true, syscall.EISDIR: true,
	syscall.ENOTEMPTY: true, syscall.ENAMETOOLONG: true, syscall.EPERM: true, syscall.EACCES: true,
}

// formatError is the one way the command line words an error (main prints
// it after "poolfs: "): a failed operation on a path as coreutils words it,
// with a hint on the next line where one helps; other errors as they are.
func formatError(err error) string {
	var pe *pathErr
	if errors.As(err, &pe) {
		msg := fmt.Sprintf("cannot %s '%s': %s", pe.op, strings.Join(pe.paths, "' to '"), reason(pe.err))
		if h := pe.hint; h != "" || defaultHint(pe) != "" {
			if h == "" {
				h = defaultHint(pe)
			}
			msg += "\n" + h
		}
		return msg
	}
	var ope *fs.PathError // a local file
	if errors.As(err, &ope) {
		return fmt.Sprintf("cannot %s '%s': %s", ope.Op, ope.Path, reason(ope.Err))
	}
	return err.Error()
}

// reason words the cause of a failed operation: strerror(3)'s text for the
// errors plainErrnos lists, the error itself otherwise.
func reason(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		errno = fusefs.Errno(err)
	}
	if !plainErrnos[errno] {
		var ope *fs.PathError
		if errors.As(err, &ope) {
			return reason(ope.Err)
		}
		return err.Error()
	}
	s := errno.Error()
	return strings.ToUpper(s[:1]) + s[1:]
}

// defaultHint is the next step for common failures.
func defaultHint(pe *pathErr) string {
	var errno syscall.Errno
	if !errors.As(pe.err, &errno) {
		errno = fusefs.Errno(pe.err)
	}
	p := pe.paths[0]
	switch {
	case pe.op == "remove" && (errno == syscall.ENOTEMPTY || errno == syscall.EISDIR):
		return fmt.Sprintf("Try 'poolfs rm -r %s' to remove the directory and its contents.", p)
	case pe.op == "create directory" && errno == syscall.ENOENT:
		return fmt.Sprintf("Try 'poolfs mkdir -p %s' to create the missing parents too.", p)
	}
	return ""
}
