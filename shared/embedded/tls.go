package embedded

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/deadletter/deadletter/shared/config"
)

// Environment variables read by Security.LoadEnv.
const (
	// EnvTLSCert names the server certificate file (PEM).
	EnvTLSCert = "DEADLETTER_TLS_CERT"
	// EnvTLSKey names the server private key file (PEM).
	EnvTLSKey = "DEADLETTER_TLS_KEY"
	// EnvStoreKeyFile names the file holding the JetStream encryption key.
	EnvStoreKeyFile = "DEADLETTER_STORE_KEY_FILE"
	// EnvStoreKey holds the JetStream encryption key itself. A key file,
	// when one is named, takes precedence.
	EnvStoreKey = "DEADLETTER_STORE_KEY"
	// EnvStoreCipher names the at-rest cipher: "chacha" (default) or "aes".
	EnvStoreCipher = "DEADLETTER_STORE_CIPHER"
)

// Store ciphers accepted in Security.Cipher.
const (
	// CipherChaCha is ChaCha20-Poly1305, the default.
	CipherChaCha = "chacha"
	// CipherAES is AES-256-GCM.
	CipherAES = "aes"
)

// MinStoreKeyLen is the shortest store key accepted, in bytes of the key
// text (NewStoreKey writes 64 hex digits, 256 bits).
const MinStoreKeyLen = 32

var (
	// ErrTLSRequired is returned by Security.Apply when the server would
	// listen on a host other than loopback without TLS (or with TLS made
	// optional by allow_non_tls).
	ErrTLSRequired = errors.New("embedded: a non-loopback host requires TLS (--tls-cert and --tls-key)")
	// ErrTLSIncomplete is returned when only one of the certificate and the
	// key is given.
	ErrTLSIncomplete = errors.New("embedded: TLS needs both a certificate and a key")
	// ErrTLSConfig is returned when the certificate or key cannot be loaded.
	ErrTLSConfig = errors.New("embedded: TLS configuration")
	// ErrStoreKeyPermissions is returned when a store key file can be read
	// or written by its group or by others (it must be mode 0600 or 0400).
	ErrStoreKeyPermissions = errors.New("embedded: store key file must not be accessible by group or others (chmod 600)")
	// ErrStoreKeyInvalid is returned for an empty, too short or unreadable
	// store key.
	ErrStoreKeyInvalid = errors.New("embedded: invalid store key")
	// ErrStoreKeyExists is returned by NewStoreKey when the file exists: a
	// store key is never overwritten (the store it encrypts would be lost).
	ErrStoreKeyExists = errors.New("embedded: store key file already exists")
	// ErrUnknownCipher is returned for a cipher other than "chacha" or "aes".
	ErrUnknownCipher = errors.New("embedded: unknown store cipher (want chacha or aes)")
	// ErrCipherWithoutKey is returned when a cipher is chosen but no store
	// key is given: the store would silently stay unencrypted.
	ErrCipherWithoutKey = errors.New("embedded: a store cipher is set but no store key")
)

// Security holds the transport and at-rest protection of an embedded server:
// TLS for client connections, and JetStream encryption of the file store.
// The zero value changes nothing (plain text, unencrypted store), which
// Apply accepts only on a loopback host.
type Security struct {
	// TLSCert and TLSKey are the server certificate and private key files
	// (PEM). Both or neither. Clients must trust the certificate (its CA,
	// or the certificate itself when self-signed) and dial a name or
	// address in its SANs. In-process connections (nats.InProcessServer)
	// need no TLS.
	TLSCert string
	TLSKey  string
	// CipherKeyFile is a file holding the JetStream store key (mode 0600 or
	// stricter; surrounding white space is ignored). It takes precedence
	// over CipherKey.
	CipherKeyFile string
	// CipherKey is the JetStream store key itself (e.g. from
	// DEADLETTER_STORE_KEY), used when CipherKeyFile is empty. Prefer a
	// file: the environment of a process is readable by its user's other
	// processes and inherited by its children.
	CipherKey string
	// Cipher is the store cipher, "chacha" (default) or "aes". It applies
	// to newly written data; the server recovers existing data written with
	// either cipher under the same key.
	Cipher string
}

// LoadEnv overrides s from DEADLETTER_TLS_CERT, DEADLETTER_TLS_KEY,
// DEADLETTER_STORE_KEY_FILE, DEADLETTER_STORE_KEY and
// DEADLETTER_STORE_CIPHER. Flags registered afterwards with these values as
// defaults take precedence over the environment.
func (s *Security) LoadEnv(env *config.Env) {
	env.String(EnvTLSCert, &s.TLSCert)
	env.String(EnvTLSKey, &s.TLSKey)
	env.String(EnvStoreKeyFile, &s.CipherKeyFile)
	env.String(EnvStoreKey, &s.CipherKey)
	env.String(EnvStoreCipher, &s.Cipher)
}

// TLS reports whether s configures TLS.
func (s Security) TLS() bool { return s.TLSCert != "" || s.TLSKey != "" }

// Encrypted reports whether s configures an encrypted store.
func (s Security) Encrypted() bool { return s.CipherKeyFile != "" || s.CipherKey != "" }

// Apply sets TLS and store encryption on opts, for a server listening on
// host (normally opts.Host, after defaults). Call it after every other
// option is set (in particular after Options.ProcessConfigString) and
// before server.NewServer. It refuses (ErrTLSRequired) a host other than
// 127.0.0.0/8, ::1 or localhost unless TLS is configured, here or already
// in opts.TLSConfig, and not made optional by AllowNonTLS; an empty host
// means every interface. TLS set here replaces any TLS in opts, with TLS
// 1.2 at least and the Go defaults for ciphers and curves.
func (s Security) Apply(opts *server.Options, host string) error {
	if s.TLS() {
		if s.TLSCert == "" || s.TLSKey == "" {
			return ErrTLSIncomplete
		}
		tc := &server.TLSConfigOpts{
			CertFile:   s.TLSCert,
			KeyFile:    s.TLSKey,
			MinVersion: tls.VersionTLS12,
			Timeout:    float64(server.TLS_TIMEOUT) / float64(time.Second),
		}
		cfg, err := server.GenTLSConfig(tc)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrTLSConfig, err)
		}
		// What the config loader does for a top-level tls block.
		opts.TLS = true
		opts.TLSCert, opts.TLSKey = s.TLSCert, s.TLSKey
		opts.TLSConfig = cfg
		opts.TLSTimeout = tc.Timeout
		opts.TLSMap = tc.Map
		opts.TLSPinnedCerts = tc.PinnedCerts
		opts.TLSRateLimit = tc.RateLimit
		opts.TLSHandshakeFirst = tc.HandshakeFirst
		opts.TLSHandshakeFirstFallback = tc.FallbackDelay
	}
	if !Loopback(host) && (opts.TLSConfig == nil || opts.AllowNonTLS) {
		return fmt.Errorf("%w: host %q", ErrTLSRequired, host)
	}
	if !s.Encrypted() {
		if s.Cipher != "" {
			return ErrCipherWithoutKey
		}
		return nil
	}
	cipher, err := parseCipher(s.Cipher)
	if err != nil {
		return err
	}
	key, err := s.storeKey()
	if err != nil {
		return err
	}
	opts.JetStreamKey = key
	opts.JetStreamCipher = cipher
	return nil
}

// Loopback reports whether host names only this machine: an address in
// 127.0.0.0/8, ::1 (brackets allowed) or "localhost". The empty host and
// 0.0.0.0 / :: (every interface) are not loopback.
func Loopback(host string) bool {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func parseCipher(name string) (server.StoreCipher, error) {
	switch strings.ToLower(name) {
	case "", CipherChaCha, "chachapoly":
		return server.ChaCha, nil
	case CipherAES:
		return server.AES, nil
	}
	return server.NoCipher, fmt.Errorf("%w: %q", ErrUnknownCipher, name)
}

// storeKey returns the key from CipherKeyFile, else CipherKey.
func (s Security) storeKey() (string, error) {
	key := s.CipherKey
	src := EnvStoreKey
	if s.CipherKeyFile != "" {
		var err error
		if key, err = ReadStoreKey(s.CipherKeyFile); err != nil {
			return "", err
		}
		src = s.CipherKeyFile
	}
	key = strings.TrimSpace(key)
	if len(key) < MinStoreKeyLen {
		return "", fmt.Errorf("%w: %s: shorter than %d bytes", ErrStoreKeyInvalid, src, MinStoreKeyLen)
	}
	return key, nil
}

// ReadStoreKey reads a store key file, refusing one that its group or others
// may access (ErrStoreKeyPermissions) and one that is not a regular file.
// White space around the key is removed.
func ReadStoreKey(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrStoreKeyInvalid, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrStoreKeyInvalid, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s: not a regular file", ErrStoreKeyInvalid, path)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%w: %s has mode %#o", ErrStoreKeyPermissions, path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrStoreKeyInvalid, path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// NewStoreKey creates path, mode 0600, holding a new random store key (256
// bits as 64 hex digits and a newline), and syncs it and its directory. It
// never replaces an existing file (ErrStoreKeyExists). Keep a copy of the
// key outside the store's machine: without it the store cannot be read.
func NewStoreKey(path string) (err error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("embedded: store key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: %s", ErrStoreKeyExists, path)
	}
	if err != nil {
		return fmt.Errorf("embedded: store key: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("embedded: store key: %w", cerr)
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	if _, err := f.WriteString(hex.EncodeToString(raw) + "\n"); err != nil {
		return fmt.Errorf("embedded: store key: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("embedded: store key: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
