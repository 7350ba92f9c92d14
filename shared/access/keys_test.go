package access_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
)

func TestKeys(t *testing.T) {
	sec, err := access.NewSecrets(access.DefaultPeople(), access.WithBcryptCost(access.MinBcryptCost))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sec.Grant("chen.wei", access.RoleOperator, "root"); err != nil {
		t.Fatal(err)
	}
	key := func(id string) api.DecisionKey {
		return api.DecisionKey{Scheme: api.SchemeEd25519, ID: id, Public: []byte(id), Label: "Laptop „Müller & Söhne“ <büro>"}
	}
	steps := []struct {
		name string
		do   func() error
		want error
	}{
		{name: "add a key", do: func() error { return sec.AddKey("chen.wei", key("k1"), "root") }},
		{name: "the same key again", do: func() error { return sec.AddKey("chen.wei", key("k1"), "root") }, want: access.ErrKeyExists},
		{name: "the same key for another person", do: func() error { return sec.AddKey("amara.okafor", key("k1"), "root") }, want: access.ErrKeyExists},
		{name: "a key for a role login", do: func() error { return sec.AddKey("chen.wei+operator", key("k2"), "root") }, want: access.ErrNoPerson},
		{name: "a key for a publisher", do: func() error { return sec.AddKey("publisher", key("k3"), "root") }, want: access.ErrRole},
		{name: "a key for nobody", do: func() error { return sec.AddKey("陈伟", key("k4"), "root") }, want: access.ErrNoPerson},
		{name: "a second key", do: func() error { return sec.AddKey("chen.wei", key("k5"), "root") }},
		{name: "revoke the first", do: func() error { _, err := sec.RevokeKey("chen.wei", "k1", "root"); return err }},
		{name: "revoke an unknown key", do: func() error { _, err := sec.RevokeKey("chen.wei", "k9", "root"); return err }, want: access.ErrNoKey},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := s.do(); s.want == nil && err != nil || s.want != nil && !errors.Is(err, s.want) {
				t.Fatalf("%v, want %v", err, s.want)
			}
		})
	}
	if again, err := sec.RevokeKey("chen.wei", "k1", "root"); err != nil || again {
		t.Fatalf("revoking a revoked key: %v %v, want a no-op", again, err)
	}
	var chen api.PersonKeys
	for _, pk := range sec.PersonKeys() {
		if pk.Person == "publisher" || pk.Person == "chen.wei+operator" {
			t.Fatalf("PersonKeys lists %s", pk.Person)
		}
		if pk.Person == "chen.wei" {
			chen = pk
		}
	}
	if !slices.Equal(chen.Roles, []string{"approver", "operator"}) || len(chen.Keys) != 2 || chen.Keys[0].RevokedAt == nil ||
		chen.Keys[1].RevokedAt != nil || chen.Event != access.EventKeyRevoked || chen.By != "root" {
		t.Fatalf("chen.wei's record: %+v", chen)
	}
	if _, err := sec.SetDisabled("chen.wei", true, "root"); err != nil {
		t.Fatal(err)
	}
	for _, pk := range sec.PersonKeys() {
		if pk.Person == "chen.wei" && (!pk.Disabled || len(pk.Roles) != 0 || pk.Event != access.EventDisabled) {
			t.Fatalf("disabled chen.wei's record: %+v", pk)
		}
	}
}
