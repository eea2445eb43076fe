package iostats

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultJobVars is the default job variable with its fallbacks: the job
// id of Slurm, then PBS, then LSF.
const DefaultJobVars = "SLURM_JOB_ID,PBS_JOBID,LSB_JOBID"

// Special job variables, as Lustre's jobid_var: JobProcnameUID names the
// job after the caller's command and user ("dd.1000"), JobDisable counts
// everything under the job "".
const (
	JobProcnameUID = "procname_uid"
	JobDisable     = "disable"
)

// jobCacheTTL is how long the job of a process id is kept: a process's
// environment does not change, but its id may be reused after it exits.
const jobCacheTTL = 10 * time.Second

// maxJobCache bounds the cache; it is emptied when full.
const maxJobCache = 1 << 16

// lookupWait is how long Job waits for a process's environment. Reading
// /proc/PID/environ takes the process's memory map lock, which the process
// may hold while it waits for this very mount (a page fault on a file of
// the mount, an exec): the read then finishes only after the mount
// answered, so a request never waits for it longer than this.
const lookupWait = 50 * time.Millisecond

// JobResolver finds the job of a calling process from its environment.
// It is safe for concurrent use.
type JobResolver struct {
	vars []string
	proc string // the proc file system, "/proc"
	now  func() time.Time
	mu   struct {
		sync.Mutex
		cache    map[uint32]cachedJob
		inflight map[uint32]chan struct{} // closed when the lookup is cached
	}
}

type cachedJob struct {
	job string
	at  time.Time
}

// ParseJobVars parses a comma-separated list of environment variable
// names, tried in order (or one of JobProcnameUID, JobDisable).
func ParseJobVars(s string) ([]string, error) {
	var vars []string
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if v == "" || strings.ContainsAny(v, "= \x00") {
			return nil, fmt.Errorf("iostats: job variable %q in %q: want names like SLURM_JOB_ID,PBS_JOBID (or %s, %s)", v, s, JobProcnameUID, JobDisable)
		}
		vars = append(vars, v)
	}
	return vars, nil
}

// NewJobResolver returns a resolver that tries vars in order, reading
// processes under proc ("" means /proc).
func NewJobResolver(vars []string, proc string) *JobResolver {
	if proc == "" {
		proc = "/proc"
	}
	r := &JobResolver{vars: vars, proc: proc, now: time.Now}
	r.mu.cache = map[uint32]cachedJob{}
	r.mu.inflight = map[uint32]chan struct{}{}
	return r
}

// Job returns the job of process pid (the kernel's thread id, as FUSE
// gives it) running as uid: the value of the first of the variables set
// in its environment, cut to MaxNameLen bytes of printable UTF-8; "" for
// pid 0 (the kernel), a process that is gone or unreadable, or one
// without any of them. The environment is read on a goroutine of its own,
// waited for at most lookupWait (a process busy in exec or faulting on
// the mount counts under "" until it can be read), and cached.
func (r *JobResolver) Job(pid, uid uint32) string {
	if pid == 0 || len(r.vars) == 0 || r.vars[0] == JobDisable {
		return ""
	}
	now := r.now()
	r.mu.Lock()
	if c, ok := r.mu.cache[pid]; ok && now.Sub(c.at) < jobCacheTTL {
		r.mu.Unlock()
		return c.job
	}
	done, busy := r.mu.inflight[pid]
	if !busy {
		done = make(chan struct{})
		r.mu.inflight[pid] = done
		go r.fill(pid, uid, now, done)
	}
	r.mu.Unlock()
	t := time.NewTimer(lookupWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.cache[pid].job
}

// fill looks pid up and caches its job.
func (r *JobResolver) fill(pid, uid uint32, now time.Time, done chan struct{}) {
	job := r.lookup(pid, uid)
	r.mu.Lock()
	if len(r.mu.cache) >= maxJobCache {
		r.mu.cache = map[uint32]cachedJob{}
	}
	r.mu.cache[pid] = cachedJob{job: job, at: now}
	delete(r.mu.inflight, pid)
	r.mu.Unlock()
	close(done)
}

func (r *JobResolver) lookup(pid, uid uint32) string {
	dir := filepath.Join(r.proc, strconv.FormatUint(uint64(pid), 10))
	if r.vars[0] == JobProcnameUID {
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil {
			return ""
		}
		return clean(strings.TrimSpace(string(comm)) + "." + strconv.FormatUint(uint64(uid), 10))
	}
	env, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil {
		return ""
	}
	return clean(JobFromEnviron(env, r.vars))
}

// JobFromEnviron returns the value of the first of vars set (not empty) in
// env, NUL-separated NAME=value pairs as /proc/PID/environ holds them.
func JobFromEnviron(env []byte, vars []string) string {
	vals := map[string]string{}
	for _, kv := range bytes.Split(env, []byte{0}) {
		k, v, ok := bytes.Cut(kv, []byte{'='})
		if !ok {
			continue
		}
		for _, want := range vars {
			if string(k) == want {
				vals[want] = string(v)
			}
		}
	}
	for _, want := range vars {
		if v := vals[want]; v != "" {
			return v
		}
	}
	return ""
}

// clean makes s a valid job name: printable UTF-8 of at most MaxNameLen
// bytes.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(c rune) rune {
		if c < 0x20 || c == 0x7f {
			return '?'
		}
		return c
	}, s)
	for len(s) > MaxNameLen {
		s = strings.ToValidUTF8(s[:MaxNameLen], "")
	}
	return s
}
