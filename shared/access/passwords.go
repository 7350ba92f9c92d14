package access

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
)

// Passwords maps each user name to its password. Its JSON form is the
// credentials file of LoadOrCreate.
type Passwords map[string]string

// passwordBytes is the entropy of a generated password (192 bits).
const passwordBytes = 24

// NewPasswords generates a random password (crypto/rand) for every user.
func NewPasswords() (Passwords, error) {
	p := Passwords{}
	if err := p.fill(); err != nil {
		return nil, err
	}
	return p, nil
}

// fill generates a password for every user that has none.
func (p Passwords) fill() error {
	for _, name := range Names() {
		if p[name] != "" {
			continue
		}
		b := make([]byte, passwordBytes)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("access: generate password: %w", err)
		}
		// Hex, so a password never starts with '-' (which command-line
		// tools such as the nats CLI would read as a flag).
		p[name] = hex.EncodeToString(b)
	}
	return nil
}

// missing reports whether a user of the table has no password.
func (p Passwords) missing() bool {
	for _, name := range Names() {
		if p[name] == "" {
			return true
		}
	}
	return false
}

// LoadOrCreate reads the credentials file at path (JSON, see Passwords),
// or creates it with new passwords, mode 0600, so that a data directory
// keeps stable credentials across restarts. A file that lacks a user (one
// added to the table since) gets a password for it and is rewritten. A file
// readable by group or others is refused.
func LoadOrCreate(path string) (Passwords, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p, err := NewPasswords()
		if err != nil {
			return nil, err
		}
		return p, p.save(path)
	case err != nil:
		return nil, fmt.Errorf("access: read credentials: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("access: stat credentials: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("access: credentials file %s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	var p Passwords
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("access: parse credentials %s: %w", path, err)
	}
	if p == nil {
		p = Passwords{}
	}
	if p.missing() {
		if err := p.fill(); err != nil {
			return nil, err
		}
		return p, p.save(path)
	}
	return p, nil
}

// save writes p to path atomically (temporary file, then rename), mode 0600.
func (p Passwords) save(path string) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("access: encode credentials: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("access: credentials dir: %w", err)
	}
	f, err := os.CreateTemp(dir, ".credentials-*")
	if err != nil {
		return fmt.Errorf("access: write credentials: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("access: write credentials: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("access: write credentials: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("access: write credentials: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("access: write credentials: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("access: write credentials: %w", err)
	}
	return nil
}

// NATSOption returns the connect option that authenticates as user. For a
// user without a password in p, the option makes nats.Connect fail.
func (p Passwords) NATSOption(user string) nats.Option {
	pw, ok := p[user]
	if !ok || pw == "" {
		return func(*nats.Options) error {
			return fmt.Errorf("access: no password for user %q", user)
		}
	}
	return nats.UserInfo(user, pw)
}
