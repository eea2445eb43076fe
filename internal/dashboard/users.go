package dashboard

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"sync"
	"syscall"

	"golang.org/x/crypto/bcrypt"

	"poolfs/internal/privfile"
)

// Role is what a user may do: RoleAdmin sees and acts, RoleReadOnly only
// sees.
type Role string

// The roles.
const (
	RoleAdmin    Role = "admin"
	RoleReadOnly Role = "read-only"
)

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleAdmin, RoleReadOnly:
		return r, nil
	}
	return "", fmt.Errorf("%w: role %q: want admin or read-only", ErrInvalid, s)
}

// Errors of the user file.
var (
	ErrInvalid   = errors.New("dashboard: invalid argument")
	ErrNoUser    = errors.New("dashboard: no such user")
	ErrUserTaken = errors.New("dashboard: user already exists")
	ErrBadLogin  = errors.New("dashboard: wrong user name or password")
)

// MinPasswordLen is the shortest password accepted.
const MinPasswordLen = 10

// UsersFile is the name of the dashboard's user file in the cluster
// directory.
const UsersFile = "dashboard-users"

var userName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

type user struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	Hash string `json:"bcrypt"` // bcrypt of the password
}

// Users is the dashboard's user file: names, roles and bcrypt hashes of
// the passwords, readable and writable by its owner only (0600). Every
// change rewrites it atomically. It is safe for concurrent use; another
// process's changes (poolfs user add while the dashboard runs) are seen at
// the next login, as the file is read again when it changed.
type Users struct {
	path string
	cost int
	// dummyHash (made once, dummyOnce) is what an unknown name is
	// checked against.
	dummyOnce sync.Once
	dummyHash []byte
	mu        struct {
		sync.Mutex
		users map[string]user
		stamp string // fileStamp of the file read
	}
}

// OpenUsers opens the user file at path; a missing file is an empty one
// (Exists reports it). cost is the bcrypt cost (0: bcrypt.DefaultCost).
func OpenUsers(path string, cost int) (*Users, error) {
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	u := &Users{path: path, cost: cost}
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.reloadLocked(); err != nil {
		return nil, err
	}
	return u, nil
}

// Exists reports whether the user file exists.
func (u *Users) Exists() bool {
	_, err := os.Stat(u.path)
	return err == nil
}

func (u *Users) reloadLocked() error {
	fi, err := os.Stat(u.path)
	if errors.Is(err, os.ErrNotExist) {
		u.mu.users, u.mu.stamp = map[string]user{}, ""
		return nil
	}
	if err != nil {
		return fmt.Errorf("dashboard: users: %w", err)
	}
	if fileStamp(fi) == u.mu.stamp && u.mu.users != nil {
		return nil
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("dashboard: user file %s is readable by others (mode %v): chmod 600 it", u.path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(u.path)
	if err != nil {
		return fmt.Errorf("dashboard: users: %w", err)
	}
	var list []user
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("dashboard: user file %s is corrupt: %w", u.path, err)
	}
	users := map[string]user{}
	for _, x := range list {
		if _, err := ParseRole(string(x.Role)); err != nil || !userName.MatchString(x.Name) {
			return fmt.Errorf("dashboard: user file %s: bad entry %q", u.path, x.Name)
		}
		users[x.Name] = x
	}
	u.mu.users, u.mu.stamp = users, fileStamp(fi)
	return nil
}

func (u *Users) saveLocked() error {
	list := make([]user, 0, len(u.mu.users))
	for _, x := range u.mu.users {
		list = append(list, x)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := privfile.Write(u.path, b); err != nil {
		return fmt.Errorf("dashboard: save users: %w", err)
	}
	if fi, err := os.Stat(u.path); err == nil {
		u.mu.stamp = fileStamp(fi)
	}
	return nil
}

// fileStamp identifies a version of the user file: every save renames a
// new file over it, so its inode changes even within one mtime tick.
func fileStamp(fi os.FileInfo) string {
	ino := uint64(0)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprintf("%d/%d/%d", ino, fi.ModTime().UnixNano(), fi.Size())
}

// Add adds a user. It returns ErrUserTaken if the name exists.
func (u *Users) Add(name string, role Role, password string) error {
	if !userName.MatchString(name) {
		return fmt.Errorf("%w: user name %q: letters, digits and . _ @ -, up to 64", ErrInvalid, name)
	}
	if _, err := ParseRole(string(role)); err != nil {
		return err
	}
	h, err := u.hash(password)
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.reloadLocked(); err != nil {
		return err
	}
	if _, ok := u.mu.users[name]; ok {
		return fmt.Errorf("%w: %s", ErrUserTaken, name)
	}
	u.mu.users[name] = user{Name: name, Role: role, Hash: h}
	return u.saveLocked()
}

// SetPassword changes a user's password, and its role unless role is "".
func (u *Users) SetPassword(name string, role Role, password string) error {
	h, err := u.hash(password)
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.reloadLocked(); err != nil {
		return err
	}
	x, ok := u.mu.users[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoUser, name)
	}
	x.Hash = h
	if role != "" {
		x.Role = role
	}
	u.mu.users[name] = x
	return u.saveLocked()
}

// Delete removes a user. The last admin cannot be removed.
func (u *Users) Delete(name string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.reloadLocked(); err != nil {
		return err
	}
	x, ok := u.mu.users[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoUser, name)
	}
	if x.Role == RoleAdmin {
		admins := 0
		for _, y := range u.mu.users {
			if y.Role == RoleAdmin {
				admins++
			}
		}
		if admins == 1 {
			return fmt.Errorf("%w: %s is the last admin", ErrInvalid, name)
		}
	}
	delete(u.mu.users, name)
	return u.saveLocked()
}

// List returns the users' names and roles, sorted by name.
func (u *Users) List() (map[string]Role, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.reloadLocked(); err != nil {
		return nil, err
	}
	out := map[string]Role{}
	for n, x := range u.mu.users {
		out[n] = x.Role
	}
	return out, nil
}

// dummy returns a hash at the file's cost, compared against when the
// user does not exist, so that a wrong name takes as long as a wrong
// password.
func (u *Users) dummy() []byte {
	u.dummyOnce.Do(func() {
		u.dummyHash, _ = bcrypt.GenerateFromPassword([]byte(GeneratePassword()), u.cost)
	})
	return u.dummyHash
}

// Verify checks a user's password and returns the user's role. It returns
// ErrBadLogin for an unknown user or a wrong password alike.
func (u *Users) Verify(name, password string) (Role, error) {
	r, _, err := u.verify(name, password)
	return r, err
}

// verify is Verify, also returning the hash the password matched.
func (u *Users) verify(name, password string) (Role, string, error) {
	u.mu.Lock()
	err := u.reloadLocked()
	x, ok := u.mu.users[name]
	u.mu.Unlock()
	if err != nil {
		return "", "", err
	}
	if !ok {
		_ = bcrypt.CompareHashAndPassword(u.dummy(), []byte(password))
		return "", "", ErrBadLogin
	}
	if bcrypt.CompareHashAndPassword([]byte(x.Hash), []byte(password)) != nil {
		return "", "", ErrBadLogin
	}
	return x.Role, x.Hash, nil
}

// current returns a user's role and password hash as the file says now
// ("" if the user was removed or the file is unreadable).
func (u *Users) current(name string) (Role, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.reloadLocked() != nil {
		return "", ""
	}
	x := u.mu.users[name]
	return x.Role, x.Hash
}

func (u *Users) hash(password string) (string, error) {
	if len(password) < MinPasswordLen {
		return "", fmt.Errorf("%w: password shorter than %d characters", ErrInvalid, MinPasswordLen)
	}
	if len(password) > 72 {
		return "", fmt.Errorf("%w: password longer than 72 bytes (bcrypt's limit)", ErrInvalid)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), u.cost)
	if err != nil {
		return "", fmt.Errorf("dashboard: hash password: %w", err)
	}
	return string(h), nil
}

// GeneratePassword returns a random password of 20 characters (about 120
// bits), for the first admin when none was given.
func GeneratePassword() string {
	var b [15]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}
