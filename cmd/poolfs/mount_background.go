package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// readyFDEnv marks the child process of `poolfs mount --background`. The
// child inherits the write end of a pipe as file descriptor readyFD and
// writes one line to it: "ready" once the mount answers, or the error that
// stopped it. The parent waits for that line, reports it and exits, so a
// script can use the mount on the next line.
const (
	readyFDEnv = "POOLFS_MOUNT_READY_FD"
	readyFD    = 3 // the first of exec.Cmd.ExtraFiles
)

// mountStartTimeout bounds how long `mount --background` waits for the
// child to mount.
const mountStartTimeout = 2 * time.Minute

// mountInBackground starts this command again as a detached child (new
// session, standard input from /dev/null, output to logPath or discarded)
// and returns once the child has mounted dir, or with the child's error.
func mountInBackground(dir, logPath string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if logPath != "" {
		out, err = os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	}
	if err != nil {
		w.Close()
		return err
	}
	defer out.Close()
	child := exec.Command(exe, os.Args[1:]...)
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%d", readyFDEnv, readyFD))
	child.ExtraFiles = []*os.File{w}
	child.Stdout, child.Stderr = out, out
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		w.Close()
		return err
	}
	w.Close()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		if s == "ready" {
			fmt.Printf("poolfs mounted on %s in the background (pid %d; umount %s to stop)\n", dir, child.Process.Pid, dir)
			return child.Process.Release()
		}
		child.Wait()
		if s == "" {
			s = "the mount process exited before mounting"
			if logPath == "" {
				s += " (run without --background, or with --log FILE, to see why)"
			}
		}
		return errors.New(s)
	case <-time.After(mountStartTimeout):
		child.Process.Kill()
		child.Wait()
		return fmt.Errorf("mount of %s did not come up within %v", dir, mountStartTimeout)
	}
}

// isMountChild reports whether this process is the child of `mount
// --background`.
func isMountChild() bool { return os.Getenv(readyFDEnv) != "" }

var notifyOnce sync.Once

// notifyMountStarted tells the waiting parent of `mount --background` that
// the mount is up (err == nil) or why it is not. It does nothing in a
// process that is not such a child, and only the first call counts.
func notifyMountStarted(err error) {
	if !isMountChild() {
		return
	}
	notifyOnce.Do(func() {
		f := os.NewFile(readyFD, "ready")
		msg := "ready"
		if err != nil {
			msg = strings.ReplaceAll(err.Error(), "\n", "; ")
		}
		io.WriteString(f, msg+"\n")
		f.Close()
	})
}
