package access

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// People management: a person is added once, may be disabled and enabled
// again, and gets a new password by rotation; nobody is ever removed, so a
// name in a record always names the one person who did it. Each change
// touches that person's entry and secret only: every other user's secret,
// and so every other line of the server configuration, stays as it was.

// Errors of people management.
var (
	// ErrPersonName: a name that cannot name a person (ValidPersonName).
	ErrPersonName = errors.New("access: a person's name must be 1 to 64 lower-case ASCII letters, digits, '.', '-' or '_', starting with a letter or digit")
	// ErrPersonExists: the name is taken, by a person (of any role,
	// disabled or not: a name is never reused) or a service user.
	ErrPersonExists = errors.New("access: the name is taken")
	// ErrNoPerson: no person has the name.
	ErrNoPerson = errors.New("access: no such person")
	// ErrRole: not a role of Roles.
	ErrRole = errors.New("access: unknown role")
	// ErrDisplayName: a display name with control characters or longer
	// than 128 characters.
	ErrDisplayName = errors.New("access: a display name must be at most 128 characters, none of them control characters")
	// ErrInboxClash: two users would share an inbox prefix (InboxPrefix).
	ErrInboxClash = errors.New("access: two users have the same inbox prefix")
	// ErrSecondIdentity: the person to add is, by their name, a person
	// who has a user already (the same display name, or a user name that
	// extends theirs: "amara.okafor.approver" for amara.okafor). A person
	// holds roles (Secrets.Grant), never a second identity.
	ErrSecondIdentity = errors.New("access: the person has a user already: grant them the role instead of adding a second identity")
	// ErrPersonID: a user's person id is not the one its name gives
	// (PersonOf), or a role login names no person.
	ErrPersonID = errors.New("access: a user's person id does not match its name")
	// ErrHasRole: the person holds the role already.
	ErrHasRole = errors.New("access: the person holds the role already")
)

// roleLoginSep separates a person from the role of a role login
// ("amara.okafor+approver"). ValidPersonName never holds it, so a person
// added by name is never a role login.
const roleLoginSep = "+"

// RoleLogin is the user name of person's login in role r, a role the
// person holds besides the one of their first user: "<person>+<role>"
// ("amara.okafor+approver"). The server authenticates it as any user, and
// the name itself says whose it is (PersonOf): no service needs a
// directory to tell that the two users are one person.
func RoleLogin(person string, r Role) string { return person + roleLoginSep + string(r) }

// PersonOf returns the person a user is: the person of a role login
// ("amara.okafor+approver" → "amara.okafor"), else the user itself (a
// user name is never reused, so it names one person). Only a suffix that
// is a person role makes a role login: an earlier file's user
// "a+ops@example.com" is its own person.
func PersonOf(user string) string {
	i := strings.LastIndex(user, roleLoginSep)
	if i <= 0 {
		return user
	}
	if r := Role(user[i+len(roleLoginSep):]); r != RolePublisher && slices.Contains(Roles, r) {
		return user[:i]
	}
	return user
}

// SamePerson reports whether users a and b are one person (PersonOf):
// how a requester and a decider are compared, wherever they are.
func SamePerson(a, b string) bool { return a != "" && PersonOf(a) == PersonOf(b) }

// sameName reports whether two display names name one person as written:
// equal ignoring case, and spaces at the ends or doubled inside.
func sameName(a, b string) bool {
	norm := func(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }
	return a != "" && b != "" && norm(a) == norm(b)
}

// SecondIdentityOf returns the person p (not added yet, or one of s) is a
// second identity of, if any: another person whose display name is p's,
// or whose user name p's extends by a dot ("amara.okafor.approver" of
// "amara.okafor"). Publishers are a party's services, never checked.
func (s *Secrets) SecondIdentityOf(p Person) (string, bool) {
	if p.Role == RolePublisher {
		return "", false
	}
	for _, q := range s.People {
		if q.Role == RolePublisher || PersonOf(q.Name) == PersonOf(p.Name) {
			continue
		}
		if sameName(p.DisplayName, q.DisplayName) || strings.HasPrefix(p.Name, PersonOf(q.Name)+".") {
			return PersonOf(q.Name), true
		}
	}
	return "", false
}

// PersonEvent is one change to a person's account, kept in Person.History.
type PersonEvent struct {
	// At is when it was done (UTC).
	At time.Time `json:"at"`
	// Event is "added", "granted", "disabled", "enabled", "rotated" or
	// "migrated".
	Event string `json:"event"`
	// By is who did it (the operating-system user that ran the command),
	// as given.
	By string `json:"by,omitempty"`
}

// Person events.
const (
	EventAdded    = "added"
	EventDisabled = "disabled"
	EventEnabled  = "enabled"
	EventRotated  = "rotated"
	// EventGranted: a role login of a person was added (Secrets.Grant).
	EventGranted = "granted"
	// EventMigrated marks a default person added to the credentials of an
	// earlier version, whose people were one user per role.
	EventMigrated = "migrated"
)

// ValidPersonName reports whether name can name a person who is not a
// publisher (publishers: ValidPublisherName): 1 to 64 bytes of lower-case
// ASCII letters, digits, '.', '-' and '_', starting with a letter or a
// digit, without two dots in a row or a dot at the end ("amara.okafor").
// A person's display name carries any other spelling (Person.DisplayName).
func ValidPersonName(name string) bool {
	if name == "" || len(name) > 64 || strings.Contains(name, "..") || strings.HasSuffix(name, ".") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '-' || c == '_'):
		default:
			return false
		}
	}
	return true
}

// inboxToken is user as one subject token: every byte other than an ASCII
// letter, digit, '-' or '_' becomes '_' ("amara.okafor" → "amara_okafor"),
// so that a user's inbox is never inside another's ("_INBOX.amara.>" would
// cover "_INBOX.amara.okafor.>"). checkPeople refuses two users with one
// token.
func inboxToken(user string) string {
	b := []byte(user)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// usableName reports whether name can be a user of the server
// configuration at all: 1 to 128 bytes of valid UTF-8 without spaces or
// control characters.
func usableName(name string) bool {
	return name != "" && len(name) <= 128 && utf8.ValidString(name) &&
		strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) < 0
}

// checkPeople refuses people the server configuration cannot hold safely:
// an unknown role, a name that is unusable (usableName) or, for a
// publisher, not a subject token (ValidPublisherName), a name used twice
// (one person, one role) or by a service or cluster user, and two users
// whose inboxes would clash.
func checkPeople(people []Person) error {
	if err := checkPublishers(people); err != nil {
		return err
	}
	inbox := map[string]string{}
	for _, name := range append(ServiceNames(), Monitor, RouteUser) {
		inbox[inboxToken(name)] = name
	}
	seen := map[string]bool{}
	roles := map[string]Role{} // person+role → taken
	for _, p := range people {
		if p.Role != RolePublisher {
			if p.PersonID != "" && p.PersonID != PersonOf(p.Name) {
				return fmt.Errorf("%w: %q has person id %q, its name says %q", ErrPersonID, p.Name, p.PersonID, PersonOf(p.Name))
			}
			key := PersonOf(p.Name) + "\x00" + string(p.Role)
			if _, ok := roles[key]; ok {
				return fmt.Errorf("%w: %s has two users of role %s", ErrHasRole, PersonOf(p.Name), p.Role)
			}
			roles[key] = p.Role
			if person := PersonOf(p.Name); person != p.Name && !slices.ContainsFunc(people, func(q Person) bool { return q.Name == person }) {
				return fmt.Errorf("%w: role login %q names no person %q", ErrPersonID, p.Name, person)
			}
		}
		if !slices.Contains(Roles, p.Role) {
			return fmt.Errorf("%w: %s has role %q", ErrRole, p.Name, p.Role)
		}
		// New people get ValidPersonName (AddPerson); a file written
		// before may hold other names (an e-mail address): any that is
		// one word of printable characters still works.
		if p.Role != RolePublisher && !usableName(p.Name) {
			return fmt.Errorf("%w: %q", ErrPersonName, p.Name)
		}
		if seen[p.Name] || Lookupable(p.Name) || p.Name == Monitor || p.Name == RouteUser {
			return fmt.Errorf("%w: %q", ErrPersonExists, p.Name)
		}
		seen[p.Name] = true
		tok := inboxToken(p.Name)
		if other, ok := inbox[tok]; ok {
			return fmt.Errorf("%w: %q and %q", ErrInboxClash, other, p.Name)
		}
		inbox[tok] = p.Name
	}
	return nil
}

// legacyRoleUser reports whether p is one of the shared role users of an
// earlier version (a user named after its role, e.g. "operator"): kept
// working, as found in an existing credentials file or kit, until it is
// disabled.
func legacyRoleUser(p Person) bool { return p.Role != RolePublisher && p.Name == string(p.Role) }

// Active reports whether p may connect (is not disabled).
func (p Person) Active() bool { return !p.Disabled }

func (s *Secrets) index(name string) int {
	return slices.IndexFunc(s.People, func(p Person) bool { return p.Name == name })
}

// AddPerson adds p, active, with a new password (a publisher's parties as
// given), recording who added it. The name must be free: no person of any
// role, disabled or not, nor a service, has it.
func (s *Secrets) AddPerson(p Person, by string, opts ...Option) error {
	if !slices.Contains(Roles, p.Role) {
		return fmt.Errorf("%w: %q (one of %s)", ErrRole, p.Role, roleList())
	}
	if p.Role == RolePublisher && !ValidPublisherName(p.Name) {
		return fmt.Errorf("%w: %q", ErrPublisherName, p.Name)
	}
	if p.Role != RolePublisher && !ValidPersonName(p.Name) {
		return fmt.Errorf("%w: %q", ErrPersonName, p.Name)
	}
	if utf8.RuneCountInString(p.DisplayName) > 128 || !utf8.ValidString(p.DisplayName) || strings.IndexFunc(p.DisplayName, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: %q", ErrDisplayName, p.DisplayName)
	}
	if s.index(p.Name) >= 0 {
		return fmt.Errorf("%w: %q is a person already", ErrPersonExists, p.Name)
	}
	if other, ok := s.SecondIdentityOf(p); ok && !options(opts).distinct {
		return fmt.Errorf("%w: %q looks like %s (`deadletter people grant %s --role %s`; a different person of the same name: --new-person)",
			ErrSecondIdentity, p.Name, other, other, p.Role)
	}
	if p.Role != RolePublisher {
		p.Parties = nil
	}
	p.PersonID = PersonOf(p.Name)
	p.Disabled = false
	p.History = []PersonEvent{{At: time.Now().UTC(), Event: EventAdded, By: by}}
	people := append(slices.Clone(s.People), p)
	if err := checkPeople(people); err != nil {
		return err
	}
	sec, err := newPassword(options(opts).cost)
	if err != nil {
		return err
	}
	if s.Users == nil {
		s.Users = map[string]Secret{}
	}
	s.People, s.Users[p.Name] = people, sec
	return nil
}

// SetDisabled disables (or enables again) the person name, recording who
// did it. A disabled person's user leaves its role's account for
// DisabledAccount, where it can only ask who it is (and so be told it is
// disabled); its password is kept (enabling it again restores it:
// rotate it too if it may have leaked). Setting the state it has is a
// no-op that reports false.
//
// Disabling a person (their first user) disables every role login of
// theirs too: a person leaves with all their roles. Enabling names one
// user: each role login is enabled on its own.
func (s *Secrets) SetDisabled(name string, disabled bool, by string) (changed bool, err error) {
	i := s.index(name)
	if i < 0 {
		return false, fmt.Errorf("%w: %q", ErrNoPerson, name)
	}
	ev := EventEnabled
	if disabled {
		ev = EventDisabled
	}
	now := time.Now().UTC()
	for j, p := range s.People {
		if p.Disabled == disabled || !(j == i || disabled && p.Role != RolePublisher && PersonOf(name) == name && PersonOf(p.Name) == name) {
			continue
		}
		s.People[j].Disabled = disabled
		s.People[j].History = append(s.People[j].History, PersonEvent{At: now, Event: ev, By: by})
		changed = true
	}
	return changed, nil
}

// Grant gives person (the name of their first user) role r as a role
// login of theirs (RoleLogin: "amara.okafor+approver"), with a new
// password, recording who did it, and returns the login's user name.
// The person must exist, be active and not be a publisher, and must not
// hold r already. The login is the same person: a request it makes and a
// decision the person's other users make are one person's (SamePerson).
func (s *Secrets) Grant(person string, r Role, by string, opts ...Option) (string, error) {
	i := s.index(person)
	switch {
	case i < 0 || PersonOf(person) != person:
		return "", fmt.Errorf("%w: %q (grant names a person's first user)", ErrNoPerson, person)
	case !slices.Contains(Roles, r) || r == RolePublisher:
		return "", fmt.Errorf("%w: %q (one of %s but publisher)", ErrRole, r, roleList())
	case s.People[i].Role == RolePublisher:
		return "", fmt.Errorf("%w: %q is a publisher, a party's service, not a person", ErrRole, person)
	case s.People[i].Disabled:
		return "", fmt.Errorf("%w: %q is disabled", ErrNoPerson, person)
	}
	for _, p := range s.People {
		if PersonOf(p.Name) == person && p.Role == r {
			return "", fmt.Errorf("%w: %s is %s as %s", ErrHasRole, person, r, p.Name)
		}
	}
	login := RoleLogin(person, r)
	p := Person{Name: login, PersonID: person, DisplayName: s.People[i].DisplayName, Role: r,
		History: []PersonEvent{{At: time.Now().UTC(), Event: EventGranted, By: by}}}
	people := append(slices.Clone(s.People), p)
	if err := checkPeople(people); err != nil {
		return "", err
	}
	sec, err := newPassword(options(opts).cost)
	if err != nil {
		return "", err
	}
	s.People, s.Users[login] = people, sec
	return login, nil
}

// Rotate gives the person name a new password (and its hash), recording
// who did it; the old password stops working once the servers run the
// regenerated configuration. No other user's secret changes.
func (s *Secrets) Rotate(name, by string, opts ...Option) error {
	i := s.index(name)
	if i < 0 {
		return fmt.Errorf("%w: %q", ErrNoPerson, name)
	}
	sec, err := newPassword(options(opts).cost)
	if err != nil {
		return err
	}
	s.Users[name] = sec
	s.People[i].History = append(s.People[i].History, PersonEvent{At: time.Now().UTC(), Event: EventRotated, By: by})
	return nil
}

// MigrateLegacy brings the credentials of an earlier version, whose people
// were one shared user per role ("operator (operator)"), to named people:
// when s holds such role users and none of DefaultPeople's named people,
// it adds every default person it lacks (with a new password), recording
// the migration, and
// reports whether it changed s. The role users stay, and keep working,
// until disabled (`deadletter people disable operator`): their names are
// in the records they made.
func (s *Secrets) MigrateLegacy(opts ...Option) (changed bool, err error) {
	legacy := false
	for _, p := range s.People {
		legacy = legacy || legacyRoleUser(p)
	}
	if !legacy {
		return false, nil
	}
	for _, p := range examplePeople {
		if p.Role != RolePublisher && s.index(p.Name) >= 0 {
			return false, nil
		}
	}
	o := options(opts)
	now := time.Now().UTC()
	for _, p := range DefaultPeople() {
		if s.index(p.Name) >= 0 {
			continue
		}
		sec, err := newPassword(o.cost)
		if err != nil {
			return changed, err
		}
		p.Parties = clonedParties(p.Parties)
		p.History = []PersonEvent{{At: now, Event: EventMigrated}}
		s.People, s.Users[p.Name] = append(s.People, p), sec
		changed = true
	}
	return changed, nil
}

func roleList() string {
	out := make([]string, len(Roles))
	for i, r := range Roles {
		out[i] = string(r)
	}
	return strings.Join(out, ", ")
}

// Applied is what a running server enforces of the people: the users it
// admits and a fingerprint of each one's password hash, as its last
// (re)load of the credentials applied them. A server writes it after each
// reload; `deadletter people ls` compares it with the credentials, so
// that a change not applied yet is shown as such (Applied.Pending).
type Applied struct {
	// Digest is the SHA-256 (hex) of the credentials file as loaded.
	Digest string `json:"digest"`
	// At is when the server applied it.
	At time.Time `json:"at"`
	// Users are the people's users the server was given, by name.
	Users map[string]AppliedUser `json:"users"`
}

// AppliedUser is one user as a server enforces it.
type AppliedUser struct {
	// Active: the server admits the user.
	Active bool `json:"active"`
	// Secret is a fingerprint of the password hash the server checks
	// (the first 16 hex digits of its SHA-256): never the hash itself.
	Secret string `json:"secret"`
}

// AppliedOf is what a server given sec enforces, loaded from a file of
// digest at.
func AppliedOf(sec *Secrets, digest string, at time.Time) Applied {
	a := Applied{Digest: digest, At: at.UTC(), Users: map[string]AppliedUser{}}
	for _, p := range sec.People {
		a.Users[p.Name] = AppliedUser{Active: p.Active(), Secret: fingerprint(sec.Users[p.Name].Bcrypt)}
	}
	return a
}

func fingerprint(s string) string {
	if s == "" {
		return ""
	}
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// Pending says what of person p, as sec holds it, the server does not
// enforce yet ("" when it does).
func (a Applied) Pending(sec *Secrets, p Person) string {
	u, ok := a.Users[p.Name]
	switch {
	case !ok && p.Disabled:
		return ""
	case !ok || (!u.Active && p.Active()):
		return "not applied yet: cannot connect yet"
	case u.Active && p.Disabled:
		return "NOT APPLIED YET: still connects"
	case p.Active() && u.Secret != fingerprint(sec.Users[p.Name].Bcrypt):
		return "NOT APPLIED YET: the previous password still works"
	}
	return ""
}

// WriteApplied writes a to path (WriteFile: atomic, mode 0600).
func WriteApplied(path string, a Applied) error {
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return fmt.Errorf("access: encode applied people: %w", err)
	}
	return WriteFile(path, append(b, '\n'))
}

// LoadApplied reads a file of WriteApplied (an error wrapping
// fs.ErrNotExist when no server wrote one).
func LoadApplied(path string) (Applied, error) {
	var a Applied
	b, err := os.ReadFile(path)
	if err != nil {
		return a, fmt.Errorf("access: applied people: %w", err)
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("access: applied people %s: %w", path, err)
	}
	return a, nil
}

// FileDigest is the SHA-256 (hex) of b, a credentials file's content, as
// Applied.Digest holds it.
func FileDigest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
