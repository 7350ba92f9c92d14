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
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"
)

// Person is a person's NATS user: an individual (never a shared role
// user), a name and the one role (account) it is in.
type Person struct {
	// Name is the user name the person authenticates with and the name
	// recorded as the actor of what it does (ValidPersonName; a
	// publisher's, ValidPublisherName). It is never reused: a person who
	// leaves is disabled, not removed.
	Name string `json:"name"`
	// PersonID is the individual this user is (PersonOf(Name)): the
	// person's first user name. A person holds roles, never several
	// identities: a further role is a role login of the same person
	// (RoleLogin, Secrets.Grant), and two users of one PersonID are one
	// person wherever a requester and a decider are compared
	// (SamePerson). A file written before has none: each user gets its
	// own on load (a legacy role user too).
	PersonID string `json:"person_id,omitempty"`
	// DisplayName is the person's name as written (any Unicode), for
	// listings; the recorded actor is Name.
	DisplayName string `json:"display_name,omitempty"`
	// Role is the person's role.
	Role Role `json:"role"`
	// Parties are, for a publisher, the parties it may publish events
	// for (nil: none); other roles have none.
	Parties Parties `json:"parties,omitempty"`
	// Disabled people keep their entry (their name stays in every record
	// they made); in the server configuration their user is in
	// DisabledAccount, where it can do nothing but learn it is disabled.
	Disabled bool `json:"disabled,omitempty"`
	// History lists what was done to the person's account (PersonEvent),
	// oldest first.
	History []PersonEvent `json:"history,omitempty"`
	// Keys are the person's registered decision keys (public keys only,
	// AddKey), on the person's first user; revoked keys stay, with the
	// time of their revocation.
	Keys []api.DecisionKey `json:"keys,omitempty"`
}

// DefaultPeople are the people of `make run` and of a new kit: named
// individuals, each with one role (two operators and two approvers, so
// that a two-person approval is tried by two different people), the
// all-parties publisher "publisher" and the example publishers of one
// party each (examplePublishers). Publishers are services of a party,
// named after it.
func DefaultPeople() []Person {
	out := make([]Person, 0, len(examplePeople)+len(examplePublishers))
	for _, p := range examplePeople {
		p.Parties, p.PersonID = clonedParties(p.Parties), p.Name
		out = append(out, p)
	}
	for _, p := range examplePublishers {
		p.Parties, p.PersonID = clonedParties(p.Parties), p.Name
		out = append(out, p)
	}
	return out
}

// examplePeople are the named people of DefaultPeople besides the
// per-party publishers, in the order of Roles.
var examplePeople = []Person{
	{Name: "publisher", Role: RolePublisher, Parties: Parties{AllParties: {AllParties}}},
	{Name: "priya.raman", DisplayName: "Priya Raman", Role: RoleViewer},
	{Name: "amara.okafor", DisplayName: "Amara Okafor", Role: RoleOperator},
	{Name: "jonas.mueller", DisplayName: "Jonas Müller", Role: RoleOperator},
	{Name: "elif.yilmaz", DisplayName: "Elif Yılmaz", Role: RoleInspector},
	{Name: "chen.wei", DisplayName: "Chen Wei (陈伟)", Role: RoleApprover},
	{Name: "lucia.ferreira", DisplayName: "Lúcia Ferreira", Role: RoleApprover},
	{Name: "soren.dahl", DisplayName: "Søren Dahl", Role: RolePolicy},
}

// DefaultPerson returns the name of the first person of role r among
// DefaultPeople ("publisher" for RolePublisher): who examples, the demo
// and tests act as.
func DefaultPerson(r Role) string {
	for _, p := range examplePeople {
		if p.Role == r {
			return p.Name
		}
	}
	return ""
}

// DefaultPersonsOf returns the names of every person of role r among
// DefaultPeople's examplePeople, in order (e.g. both approvers).
func DefaultPersonsOf(r Role) []string {
	var out []string
	for _, p := range examplePeople {
		if p.Role == r {
			out = append(out, p.Name)
		}
	}
	return out
}

func clonedParties(p Parties) Parties {
	out := make(Parties, len(p))
	for d, ids := range p {
		out[d] = slices.Clone(ids)
	}
	return out
}

// Secret is one user's secret. Services authenticate with an nkey (an
// ed25519 key pair: the server configuration holds only the public key,
// and no password is ever sent); the admin and people authenticate with a
// password (something a person can type into the console or keep in a
// natscli context), of which the server configuration holds only the
// bcrypt hash.
type Secret struct {
	// Seed is a service's nkey seed ("SU...").
	Seed string `json:"seed,omitempty"`
	// Password is a person's or the admin's password (hex).
	Password string `json:"password,omitempty"`
	// Bcrypt is the bcrypt hash of Password, kept so that rendering the
	// server configuration costs no hashing.
	Bcrypt string `json:"bcrypt,omitempty"`
}

// Secrets holds every user's secret: the services' account users and the
// people. Its JSON form is the file of LoadOrCreate (mode 0600).
type Secrets struct {
	// Users maps each user name to its secret.
	Users map[string]Secret `json:"users"`
	// People are the person users and their roles.
	People []Person `json:"people"`
	// ReplaySecret keys the redriver's replay message ids (hex, 256 bits):
	// every redriver instance of a deployment shares it.
	ReplaySecret string `json:"replay_secret"`
}

// legacySecrets is what an earlier version's secrets file held that this
// one no longer reads: approval_seed, the redriver's shared approval key
// (issue #28), which no one reads since decisions are signed by their
// people's own keys (issue #38, ADR 0022). A file that still holds it
// loads, and is rewritten without it: a key that once signed decisions is
// not left lying beside the credentials.
type legacySecrets struct {
	ApprovalSeed *string `json:"approval_seed"`
}

// passwordBytes is the entropy of a generated password (192 bits).
const passwordBytes = 24

// MinBcryptCost is the lowest bcrypt cost WithBcryptCost takes.
const MinBcryptCost = bcrypt.MinCost

// Option adjusts how secrets are generated.
type Option func(*genOptions)

type genOptions struct {
	cost     int
	distinct bool
}

// DistinctPerson lets AddPerson add a person whose name is another
// person's (ErrSecondIdentity): the administrator says it is someone
// else (two people called Chen Wei).
func DistinctPerson() Option { return func(o *genOptions) { o.distinct = true } }

// PasswordHashCost is the bcrypt cost of the hash of a generated password
// (the people's and the admin's). The server checks a password at that
// cost on every connection, a failed one included: at bcrypt's default
// cost (10) 300 connects with a wrong password from 4 threads took the
// server 74 s of work and slowed a person's command from 0.16 s to 1.1 s
// (issue #38, E11). A cost stretches a password a person chose, which an
// attacker holding the hash could guess; these are 192 random bits that no
// one chooses (passwordBytes), beyond any guessing, stretched or not: the
// lowest cost keeps the hash one-way and salted and makes a wrong password
// cost the server about a millisecond (TestWrongPasswordFloodCostsLittle).
const PasswordHashCost = bcrypt.MinCost

// WithBcryptCost sets the bcrypt cost of new password hashes (default
// PasswordHashCost; at least bcrypt.MinCost).
func WithBcryptCost(cost int) Option {
	return func(o *genOptions) { o.cost = max(cost, bcrypt.MinCost) }
}

// Rehash hashes again, at the cost of opts (default PasswordHashCost),
// every password whose hash was made at a higher cost (by an earlier
// version, at bcrypt's default), keeping the password itself: nobody's
// password or context changes, only what the server checks it with. It
// reports whether it changed anything.
func (s *Secrets) Rehash(opts ...Option) (changed bool, err error) {
	o := options(opts)
	for name, sec := range s.Users {
		if sec.Password == "" || sec.Bcrypt == "" {
			continue
		}
		if c, err := bcrypt.Cost([]byte(sec.Bcrypt)); err != nil || c <= o.cost {
			continue
		}
		if bcrypt.CompareHashAndPassword([]byte(sec.Bcrypt), []byte(sec.Password)) != nil {
			continue // fill gives it a new password
		}
		h, err := bcrypt.GenerateFromPassword([]byte(sec.Password), o.cost)
		if err != nil {
			return changed, fmt.Errorf("access: hash password: %w", err)
		}
		sec.Bcrypt = string(h)
		s.Users[name], changed = sec, true
	}
	return changed, nil
}

func options(opts []Option) genOptions {
	o := genOptions{cost: PasswordHashCost}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// NewSecrets generates a secret for every service user, the admin and each
// of people (crypto/rand).
func NewSecrets(people []Person, opts ...Option) (*Secrets, error) {
	s := &Secrets{Users: map[string]Secret{}, People: slices.Clone(people)}
	if _, err := s.fill(options(opts)); err != nil {
		return nil, err
	}
	return s, nil
}

// isService reports whether user is a service (nkey) user.
func isService(user string) bool { return (user != Admin && Lookupable(user)) || user == BackupUser }

// Lookupable reports whether user is a user of the services' account.
func Lookupable(user string) bool {
	for _, s := range table {
		if s.Name == user {
			return true
		}
	}
	return false
}

// fill generates a secret for every user that has none (or one of the
// wrong kind, e.g. from an earlier version's file).
func (s *Secrets) fill(o genOptions) (changed bool, err error) {
	if s.Users == nil {
		s.Users = map[string]Secret{}
	}
	for i, p := range s.People {
		if p.PersonID == "" {
			s.People[i].PersonID, changed = PersonOf(p.Name), true
		}
	}
	if len(s.ReplaySecret) != 2*32 {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return changed, fmt.Errorf("access: generate replay secret: %w", err)
		}
		s.ReplaySecret, changed = hex.EncodeToString(b), true
	}
	names := append(ServiceNames(), BackupUser, BackupAdmin)
	for _, p := range s.People {
		names = append(names, p.Name)
	}
	for _, name := range names {
		cur := s.Users[name]
		if isService(name) {
			if strings.HasPrefix(cur.Seed, "SU") {
				continue
			}
			kp, err := nkeys.CreateUser()
			if err != nil {
				return changed, fmt.Errorf("access: nkey for %s: %w", name, err)
			}
			seed, err := kp.Seed()
			if err != nil {
				return changed, fmt.Errorf("access: nkey for %s: %w", name, err)
			}
			s.Users[name], changed = Secret{Seed: string(seed)}, true
			continue
		}
		if cur.Password != "" && bcrypt.CompareHashAndPassword([]byte(cur.Bcrypt), []byte(cur.Password)) == nil {
			continue
		}
		sec, err := newPassword(o.cost)
		if err != nil {
			return changed, err
		}
		s.Users[name], changed = sec, true
	}
	return changed, nil
}

// newPassword generates a password (crypto/rand) and its bcrypt hash at
// cost.
func newPassword(cost int) (Secret, error) {
	b := make([]byte, passwordBytes)
	if _, err := rand.Read(b); err != nil {
		return Secret{}, fmt.Errorf("access: generate password: %w", err)
	}
	// Hex, so a password never starts with '-' (which command-line
	// tools such as the nats CLI would read as a flag).
	pw := hex.EncodeToString(b)
	h, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
	if err != nil {
		return Secret{}, fmt.Errorf("access: hash password: %w", err)
	}
	return Secret{Password: pw, Bcrypt: string(h)}, nil
}

// Person returns the person named name.
func (s *Secrets) Person(name string) (Person, bool) {
	for _, p := range s.People {
		if p.Name == name {
			return p, true
		}
	}
	return Person{}, false
}

// PublicKey returns a service user's nkey public key.
func (s *Secrets) PublicKey(user string) (string, error) {
	kp, err := nkeys.FromSeed([]byte(s.Users[user].Seed))
	if err != nil {
		return "", fmt.Errorf("access: %s: %w", user, err)
	}
	return kp.PublicKey()
}

// LoadOrCreate reads the secrets file at path (JSON, see Secrets), or
// creates it with new secrets for people, mode 0600, so that a data
// directory keeps stable credentials across restarts. A file that lacks a
// user (one added to the table since) gets a secret for it and is
// rewritten, and so is one that holds an earlier version's approval_seed
// (legacySecrets), without it. A file readable by group or others is
// refused.
func LoadOrCreate(path string, people []Person, opts ...Option) (*Secrets, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s, err := NewSecrets(people, opts...)
		if err != nil {
			return nil, err
		}
		return s, s.save(path)
	case err != nil:
		return nil, fmt.Errorf("access: read secrets: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("access: stat secrets: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("access: secrets file %s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	s := &Secrets{}
	if err := json.Unmarshal(b, s); err != nil || s.Users == nil {
		// An earlier version's file (a flat map of passwords): start anew.
		s = &Secrets{}
	}
	if len(s.People) == 0 {
		s.People = slices.Clone(people)
	}
	var legacy legacySecrets
	dropped := json.Unmarshal(b, &legacy) == nil && legacy.ApprovalSeed != nil
	// A file written before publishers named their parties: a default
	// publisher gets its default parties (another publisher stays
	// without, and may publish for none until given some).
	partiesAdded := false
	for i, p := range s.People {
		if p.Role == RolePublisher && p.Parties == nil {
			if d := defaultParties(p.Name); d != nil {
				s.People[i].Parties, partiesAdded = clonedParties(d), true
			}
		}
	}
	changed, err := s.fill(options(opts))
	changed = changed || partiesAdded || dropped
	if err != nil {
		return nil, err
	}
	if changed {
		return s, s.save(path)
	}
	return s, nil
}

// save writes s to path atomically (temporary file, then rename), mode 0600.
func (s *Secrets) save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("access: encode secrets: %w", err)
	}
	return WriteFile(path, append(b, '\n'))
}

// WriteFile writes a secret file atomically (temporary file, fsync,
// rename), mode 0600, creating its directory (mode 0700).
func WriteFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("access: %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".secret-*")
	if err != nil {
		return fmt.Errorf("access: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("access: write %s: %w", path, err)
	}
	return nil
}

// NATSOptions returns the connect options of user: its credentials and its
// private inbox prefix. For a user without a secret the options make
// nats.Connect fail.
func (s *Secrets) NATSOptions(user string) []nats.Option {
	sec, ok := s.Users[user]
	switch {
	case ok && sec.Seed != "":
		kp, err := nkeys.FromSeed([]byte(sec.Seed))
		if err != nil {
			return []nats.Option{failOption(fmt.Errorf("access: %s: %w", user, err))}
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return []nats.Option{failOption(fmt.Errorf("access: %s: %w", user, err))}
		}
		return []nats.Option{nats.Nkey(pub, kp.Sign), nats.CustomInboxPrefix(InboxPrefix(user))}
	case ok && sec.Password != "":
		return []nats.Option{nats.UserInfo(user, sec.Password), nats.CustomInboxPrefix(InboxPrefix(user))}
	}
	return []nats.Option{failOption(fmt.Errorf("access: no secret for user %q", user))}
}

func failOption(err error) nats.Option {
	return func(*nats.Options) error { return err }
}
