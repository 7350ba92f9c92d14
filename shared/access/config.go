package access

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/deadletter/deadletter/shared/subjects"
)

// The configuration is rendered as JSON, which the nats-server
// configuration parser reads as it reads its own format; encoding/json
// quotes every subject and hash safely.

type permissions struct {
	Publish   Rule `json:"publish"`
	Subscribe Rule `json:"subscribe"`
}

type confUser struct {
	User        string       `json:"user,omitempty"`
	Password    string       `json:"password,omitempty"`
	NKey        string       `json:"nkey,omitempty"`
	Permissions *permissions `json:"permissions,omitempty"`
}

type confExport struct {
	Service      string   `json:"service,omitempty"`
	Stream       string   `json:"stream,omitempty"`
	Accounts     []string `json:"accounts,omitempty"`
	ResponseType string   `json:"response_type,omitempty"`
}

type confImportService struct {
	Account string `json:"account"`
	Subject string `json:"subject"`
}

type confImport struct {
	Service *confImportService `json:"service,omitempty"`
	Stream  *confImportService `json:"stream,omitempty"`
	// To is the subject the importing account publishes on, when it is
	// not the service's subject (a publisher's events.> mapped to its own
	// events.<name>.>).
	To    string `json:"to,omitempty"`
	Share bool   `json:"share,omitempty"`
}

type confAccount struct {
	JetStream string       `json:"jetstream,omitempty"`
	Users     []confUser   `json:"users"`
	Exports   []confExport `json:"exports,omitempty"`
	Imports   []confImport `json:"imports,omitempty"`
}

// Account is one account of the generated configuration, as plain data
// (for documentation and tests).
type Account struct {
	// Name is the account name.
	Name string
	// JetStream is true for the services' account only.
	JetStream bool
	// Users are its user names.
	Users []string
	// Imports are the subjects it imports from the services' account.
	Imports []string
}

// roleAccounts returns the accounts of a role: one per publisher of
// people for RolePublisher (PublisherAccount), the role's account for
// another.
func roleAccounts(r Role, people []Person) []string {
	if r != RolePublisher {
		return []string{RoleAccount(r)}
	}
	var out []string
	for _, name := range publishers(people) {
		out = append(out, PublisherAccount(name))
	}
	return out
}

// allRoleAccounts returns every person account of people.
func allRoleAccounts(people []Person) []string {
	var out []string
	for _, r := range Roles {
		out = append(out, roleAccounts(r, people)...)
	}
	return out
}

// Accounts returns the accounts of the configuration rendered for people
// (a disabled person is in DisabledAccount only).
func Accounts(people []Person) []Account {
	svc := Account{Name: ServiceAccount, JetStream: true, Users: ServiceNames()}
	out := []Account{svc}
	for _, r := range Roles {
		for _, acc := range roleAccounts(r, people) {
			a := Account{Name: acc, Imports: append(RoleEndpoints(r), srv)}
			for _, p := range people {
				if p.Role == r && !p.Disabled && (r != RolePublisher || PublisherAccount(p.Name) == acc) {
					a.Users = append(a.Users, p.Name)
				}
			}
			out = append(out, a)
		}
	}
	off := Account{Name: DisabledAccount}
	for _, p := range people {
		if p.Disabled {
			off.Users = append(off.Users, p.Name)
		}
	}
	return append(out, off)
}

// exports returns the services' account exports: each imported subject,
// open to exactly the person accounts that import it.
func exports(people []Person) []confExport {
	var subjs []string
	who := map[string][]string{}
	for _, r := range Roles {
		for _, s := range RoleEndpoints(r) {
			if _, ok := who[s]; !ok {
				subjs = append(subjs, s)
			}
			who[s] = append(who[s], roleAccounts(r, people)...)
		}
	}
	out := make([]confExport, 0, len(subjs)+1)
	for _, s := range subjs {
		if len(who[s]) > 0 {
			out = append(out, confExport{Service: s, Accounts: who[s]})
		}
	}
	// Discovery answers come from every instance of every service.
	return append(out, confExport{Service: srv, Accounts: allRoleAccounts(people), ResponseType: "stream"})
}

// roleImport is one import of a person account: events.> of a publisher
// maps to its own events.<name>.> (no caller shared: a stream strips the
// header, and writing it costs every publish); an endpoint learns the
// caller (share: true).
func roleImport(r Role, user, subject string) confImport {
	if r == RolePublisher && subject == subjects.EventsAll {
		return confImport{Service: &confImportService{Account: ServiceAccount, Subject: subjects.PublishedBy(user)}, To: subject}
	}
	return confImport{Service: &confImportService{Account: ServiceAccount, Subject: subject}, Share: subject != subjects.EventsAll}
}

// ServerConfig renders the accounts, users and permissions of sec as
// nats-server configuration text (the "accounts" block), for
// server.Options.ProcessConfigString and for a cluster's configuration
// files. There is no no_auth_user: every connection authenticates.
func ServerConfig(sec *Secrets) (string, error) {
	if err := checkPeople(sec.People); err != nil {
		return "", err
	}
	accounts := map[string]confAccount{}
	svc := confAccount{JetStream: "enabled", Exports: append(exports(sec.People), backupExports()...)}
	for _, s := range Specs() {
		sc, ok := sec.Users[s.Name]
		if !ok {
			return "", fmt.Errorf("access: no secret for %s", s.Name)
		}
		u := confUser{}
		if s.Unrestricted {
			if sc.Bcrypt == "" {
				return "", fmt.Errorf("access: no password hash for %s", s.Name)
			}
			u.User, u.Password = s.Name, sc.Bcrypt
		} else {
			pub, err := sec.PublicKey(s.Name)
			if err != nil {
				return "", err
			}
			u.NKey = pub
			u.Permissions = &permissions{Publish: s.Publish, Subscribe: s.Subscribe}
		}
		svc.Users = append(svc.Users, u)
	}
	accounts[ServiceAccount] = svc
	bak, err := backupAccount(sec)
	if err != nil {
		return "", err
	}
	accounts[BackupAccount] = bak
	for _, r := range Roles {
		imports := append(RoleEndpoints(r), srv)
		for _, name := range roleAccounts(r, sec.People) {
			acc := confAccount{Users: []confUser{}}
			// A publisher's account imports its own events subject.
			pub := ""
			if r == RolePublisher {
				pub = name[len(publisherAccountPrefix):]
			}
			for _, s := range imports {
				acc.Imports = append(acc.Imports, roleImport(r, pub, s))
			}
			for _, p := range sec.People {
				if p.Role != r || (r == RolePublisher && p.Name != pub) || p.Disabled {
					continue
				}
				sc, ok := sec.Users[p.Name]
				if !ok || sc.Bcrypt == "" {
					return "", fmt.Errorf("access: no password hash for %s", p.Name)
				}
				acc.Users = append(acc.Users, confUser{
					User: p.Name, Password: sc.Bcrypt,
					Permissions: &permissions{
						// and the server's "who am I" (disabled.go).
						Publish:   Rule{Allow: append(slices.Clone(imports), UserInfoSubject)},
						Subscribe: Rule{Allow: []string{inboxAll(p.Name)}},
					},
				})
			}
			accounts[name] = acc
		}
	}
	// Disabled people authenticate into an account of their own, where
	// they can only ask who they are (disabled.go).
	off := confAccount{Users: []confUser{}}
	for _, p := range sec.People {
		if !p.Disabled {
			continue
		}
		sc, ok := sec.Users[p.Name]
		if !ok || sc.Bcrypt == "" {
			return "", fmt.Errorf("access: no password hash for %s", p.Name)
		}
		off.Users = append(off.Users, confUser{User: p.Name, Password: sc.Bcrypt, Permissions: disabledPermissions(p.Name)})
	}
	accounts[DisabledAccount] = off
	// No HTML escaping: the configuration parser knows no \u escapes, and
	// subjects hold '>'.
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{"accounts": accounts}); err != nil {
		return "", fmt.Errorf("access: render config: %w", err)
	}
	return b.String(), nil
}
