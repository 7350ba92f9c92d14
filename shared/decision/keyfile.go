package decision

import (
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/scrypt"

	"github.com/deadletter/deadletter/shared/api"
)

// A person's personal signing key at rest (dlqctl): an ed25519 seed
// sealed with XChaCha20-Poly1305 under a key derived from the person's
// passphrase by scrypt (golang.org/x/crypto). The file names the person
// and the public key, both bound to the sealed seed as associated data:
// a file edited to name another person or key does not open.

// Key derivation functions of a KeyFile.
const (
	// KDFScrypt: the seed is sealed under scrypt(passphrase).
	KDFScrypt = "scrypt"
	// KDFNone: the seed is kept in clear. Only `make run`'s example
	// people get such a key, beside their context file that holds their
	// password in clear too; dlqctl says so when it uses one.
	KDFNone = "none"
)

// scrypt parameters of new key files (N 2^15, r 8, p 1: the
// recommendation for interactive logins; ~50-100 ms here).
const (
	scryptN, scryptR, scryptP = 1 << 15, 8, 1
	// scryptMaxN bounds what a file may ask for (a file is input too).
	scryptMaxN = 1 << 20
)

// keyFileVersion is the format of new key files.
const keyFileVersion = 1

// Errors of a key file.
var (
	// ErrPassphrase: the passphrase does not open the key (or the file was
	// altered).
	ErrPassphrase = errors.New("decision: the passphrase does not open the key")
	// ErrKeyFile: not a key file of this format.
	ErrKeyFile = errors.New("decision: not a personal key file")
)

// KeyFile is a person's personal signing key at rest.
type KeyFile struct {
	Version int    `json:"version"`
	Person  string `json:"person"`
	Scheme  string `json:"scheme"`
	// KeyID is the public key (KeyID), what `deadletter people key add
	// --ed25519` registers.
	KeyID   string    `json:"key_id"`
	Created time.Time `json:"created"`
	KDF     string    `json:"kdf"`
	N       int       `json:"n,omitempty"`
	R       int       `json:"r,omitempty"`
	P       int       `json:"p,omitempty"`
	Salt    []byte    `json:"salt,omitempty"`
	Nonce   []byte    `json:"nonce,omitempty"`
	// Sealed is the sealed seed (KDFNone: the seed).
	Sealed []byte `json:"sealed"`
}

func (k KeyFile) ad() []byte {
	return []byte("deadletter personal key v1\n" + k.Person + "\n" + k.Scheme + "\n" + k.KeyID)
}

// NewKeyFile makes a new ed25519 key for person, sealed under passphrase
// (KDFNone when passphrase is nil: make run's example people only).
func NewKeyFile(person string, passphrase []byte) (KeyFile, ed25519.PrivateKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return KeyFile{}, nil, err
	}
	k := KeyFile{Version: keyFileVersion, Person: person, Scheme: api.SchemeEd25519, KeyID: KeyID(pub),
		Created: time.Now().UTC().Truncate(time.Second), KDF: KDFNone}
	seed := priv.Seed()
	if passphrase == nil {
		k.Sealed = seed
		return k, priv, nil
	}
	k.KDF, k.N, k.R, k.P = KDFScrypt, scryptN, scryptR, scryptP
	k.Salt = make([]byte, 16)
	k.Nonce = make([]byte, chacha20poly1305.NonceSizeX)
	if _, err := rand.Read(k.Salt); err != nil {
		return KeyFile{}, nil, err
	}
	if _, err := rand.Read(k.Nonce); err != nil {
		return KeyFile{}, nil, err
	}
	aead, err := k.aead(passphrase)
	if err != nil {
		return KeyFile{}, nil, err
	}
	k.Sealed = aead.Seal(nil, k.Nonce, seed, k.ad())
	return k, priv, nil
}

func (k KeyFile) aead(passphrase []byte) (cipher.AEAD, error) {
	if k.N < 2 || k.N > scryptMaxN || k.N&(k.N-1) != 0 || k.R < 1 || k.R > 32 || k.P < 1 || k.P > 16 || len(k.Salt) < 16 {
		return nil, fmt.Errorf("%w: scrypt parameters out of bounds", ErrKeyFile)
	}
	key, err := scrypt.Key(passphrase, k.Salt, k.N, k.R, k.P, chacha20poly1305.KeySize)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	return chacha20poly1305.NewX(key)
}

// Open returns the private key, opened with passphrase (ignored for
// KDFNone). The key must be the file's public key.
func (k KeyFile) Open(passphrase []byte) (ed25519.PrivateKey, error) {
	if k.Version != keyFileVersion || k.Scheme != api.SchemeEd25519 {
		return nil, fmt.Errorf("%w: version %d, scheme %q", ErrKeyFile, k.Version, k.Scheme)
	}
	var seed []byte
	switch k.KDF {
	case KDFNone:
		seed = k.Sealed
	case KDFScrypt:
		if len(k.Nonce) != chacha20poly1305.NonceSizeX {
			return nil, fmt.Errorf("%w: a nonce of %d bytes", ErrKeyFile, len(k.Nonce))
		}
		aead, err := k.aead(passphrase)
		if err != nil {
			return nil, err
		}
		if seed, err = aead.Open(nil, k.Nonce, k.Sealed, k.ad()); err != nil {
			return nil, ErrPassphrase
		}
	default:
		return nil, fmt.Errorf("%w: key derivation %q", ErrKeyFile, k.KDF)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: a seed of %d bytes", ErrKeyFile, len(seed))
	}
	priv := ed25519.NewKeyFromSeed(seed)
	if KeyID(priv.Public().(ed25519.PublicKey)) != k.KeyID {
		return nil, fmt.Errorf("%w: the key is not the file's public key", ErrKeyFile)
	}
	return priv, nil
}

// Key is the file's public key as a DecisionKey (what the administrator
// registers).
func (k KeyFile) Key() (api.DecisionKey, error) { return Ed25519Key(k.KeyID, "") }

// WriteKeyFile writes k to path (mode 0600, its directory 0700), never
// over an existing file.
func WriteKeyFile(path string, k KeyFile) error {
	b, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return err
	}
	return f.Close()
}

// ReadKeyFile reads a key file (an error wrapping fs.ErrNotExist when
// there is none).
func ReadKeyFile(path string) (KeyFile, error) {
	var k KeyFile
	b, err := os.ReadFile(path)
	if err != nil {
		return k, err
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return k, fmt.Errorf("%w: %s: %v", ErrKeyFile, path, err)
	}
	return k, nil
}
