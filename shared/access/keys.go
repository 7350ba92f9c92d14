package access

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/deadletter/deadletter/shared/api"
)

// A person's decision keys (issue #38): the public keys of the personal
// keys that sign their decisions (dlqctl's ed25519 key, the console's
// passkeys). The people file keeps them on the person's first user; the
// server that applies the file writes each person's record (PersonKeys)
// to AUDIT, where executors and verify read them.

// Key events, in Person.History and PersonKeys.Event.
const (
	EventKeyAdded   = "key added"
	EventKeyRevoked = "key revoked"
)

// Errors of key registration.
var (
	// ErrKeyExists: the person (or another) has a key of that id already
	// (revoked keys included: a key is never registered twice).
	ErrKeyExists = errors.New("access: the key is registered already")
	// ErrNoKey: the person has no key of that id.
	ErrNoKey = errors.New("access: the person has no such key")
)

// keyPerson returns the index of person's first user, a person who may
// hold keys (not a publisher).
func (s *Secrets) keyPerson(person string) (int, error) {
	i := s.index(person)
	switch {
	case i < 0 || PersonOf(person) != person:
		return -1, fmt.Errorf("%w: %q (keys belong to a person's first user)", ErrNoPerson, person)
	case s.People[i].Role == RolePublisher:
		return -1, fmt.Errorf("%w: %q is a publisher, a party's service: it makes no decisions", ErrRole, person)
	}
	return i, nil
}

// AddKey registers k (a public key) as person's, recording who did it.
// A key id registered before, to anyone, is refused.
func (s *Secrets) AddKey(person string, k api.DecisionKey, by string) error {
	i, err := s.keyPerson(person)
	if err != nil {
		return err
	}
	if k.Scheme == "" || k.ID == "" || len(k.Public) == 0 {
		return fmt.Errorf("access: a key needs a scheme, an id and a public key")
	}
	for _, p := range s.People {
		if slices.ContainsFunc(p.Keys, func(o api.DecisionKey) bool { return o.ID == k.ID && o.Scheme == k.Scheme }) {
			return fmt.Errorf("%w: %s's", ErrKeyExists, p.Name)
		}
	}
	now := time.Now().UTC()
	k.AddedAt, k.RevokedAt = now.Truncate(time.Second), nil
	s.People[i].Keys = append(s.People[i].Keys, k)
	s.People[i].History = append(s.People[i].History, PersonEvent{At: now, Event: EventKeyAdded, By: by})
	return nil
}

// RevokeKey revokes person's key id from now on, recording who did it;
// the key stays listed with the time (decisions signed before stay
// valid). Revoking a revoked key is a no-op that reports false.
func (s *Secrets) RevokeKey(person, id, by string) (bool, error) {
	i, err := s.keyPerson(person)
	if err != nil {
		return false, err
	}
	j := slices.IndexFunc(s.People[i].Keys, func(k api.DecisionKey) bool { return k.ID == id })
	if j < 0 {
		return false, fmt.Errorf("%w: %s has no key %q", ErrNoKey, person, id)
	}
	if s.People[i].Keys[j].RevokedAt != nil {
		return false, nil
	}
	now := time.Now().UTC()
	at := now.Truncate(time.Second)
	s.People[i].Keys[j].RevokedAt = &at
	s.People[i].History = append(s.People[i].History, PersonEvent{At: now, Event: EventKeyRevoked, By: by})
	return true, nil
}

// ActiveKeys counts p's keys not revoked.
func (p Person) ActiveKeys() int {
	n := 0
	for _, k := range p.Keys {
		if k.RevokedAt == nil {
			n++
		}
	}
	return n
}

// PersonKeys returns the registry record of every person (not the
// publishers), in the file's order: the roles their enabled users hold,
// whether the person is disabled, their keys, and the last change made to
// any of their users (event, by whom, when).
func (s *Secrets) PersonKeys() []api.PersonKeys {
	var out []api.PersonKeys
	for _, p := range s.People {
		if p.Role == RolePublisher || PersonOf(p.Name) != p.Name {
			continue
		}
		pk := api.PersonKeys{Person: p.Name, Roles: []string{}, Disabled: p.Disabled, Keys: slices.Clone(p.Keys)}
		for _, u := range s.People {
			if u.Role == RolePublisher || PersonOf(u.Name) != p.Name {
				continue
			}
			if !u.Disabled && !slices.Contains(pk.Roles, string(u.Role)) {
				pk.Roles = append(pk.Roles, string(u.Role))
			}
			for _, e := range u.History {
				if !e.At.Before(pk.At) {
					pk.Event, pk.By, pk.At = e.Event, e.By, e.At.UTC()
				}
			}
		}
		slices.Sort(pk.Roles)
		out = append(out, pk)
	}
	return out
}
