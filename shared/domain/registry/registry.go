// Package registry is the one list of deadletter's event domains. Every
// other list of domains, every check of a request's domain field, every
// ordering-key and identity rule and every display derives from All; adding
// a domain is one line here (see README, "Adding a domain").
package registry

import (
	"errors"
	"fmt"
	"strings"

	"github.com/deadletter/deadletter/shared/codes"
	"github.com/deadletter/deadletter/shared/domain"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/fsma"
	"github.com/deadletter/deadletter/shared/domain/pharmacy"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Unknown is the domain of a failure whose domain is not known (an event on
// a subject of no registered domain); it is never a registered domain.
const Unknown = subjects.UnknownDomain

// ErrUnknownDomain is returned by Check for a name no domain has.
var ErrUnknownDomain = errors.New("unknown domain")

// All returns the registered domains, in display order. This is the
// registry: one line per domain.
func All() []domain.Spec {
	return []domain.Spec{
		pharmacy.Spec(),
		dscsa.Spec(),
		fsma.Spec(),
	}
}

// The registered domains' own error codes (domain.Spec.Codes) are known
// to package codes (codes.Known, codes.IsKnown) in every program that
// links the registry.
func init() {
	for _, s := range All() {
		codes.Register(s.Codes...)
	}
}

// Codes lists every error code deadletter emits, the domains' included:
// codes.Known, for a program that imports package codes but not this one
// (which registers the domains' codes).
func Codes() []codes.Info { return codes.Known() }

// Names returns the names of the registered domains, in display order.
func Names() []string {
	all := All()
	out := make([]string, len(all))
	for i, s := range all {
		out[i] = s.Name
	}
	return out
}

// NamesAndUnknown returns Names followed by Unknown: the domains a
// quarantine chain can have.
func NamesAndUnknown() []string { return append(Names(), Unknown) }

// Lookup returns the registered domain with the given name.
func Lookup(name string) (domain.Spec, bool) {
	for _, s := range All() {
		if s.Name == name {
			return s, true
		}
	}
	return domain.Spec{}, false
}

// PartyLabel names a domain's party id for people ("registrant" for
// pharmacy); "party" for the unknown domain or a name no domain has.
func PartyLabel(name string) string {
	if s, ok := Lookup(name); ok && s.PartyLabel != "" {
		return s.PartyLabel
	}
	return "party"
}

// Known reports whether name is a registered domain.
func Known(name string) bool {
	_, ok := Lookup(name)
	return ok
}

// Checkers returns the registered domains' checkers, in display order.
func Checkers() []domain.Checker {
	all := All()
	out := make([]domain.Checker, len(all))
	for i, s := range all {
		out[i] = s.Checker
	}
	return out
}

// Check validates the domain field of a request: "" passes (no filter), as
// does a registered domain, and Unknown when allowUnknown is set; anything
// else is ErrUnknownDomain, wrapped with the allowed names (never the
// value sent).
func Check(name string, allowUnknown bool) error {
	if name == "" || Known(name) || (allowUnknown && name == Unknown) {
		return nil
	}
	allowed := Names()
	if allowUnknown {
		allowed = append(allowed, Unknown)
	}
	return fmt.Errorf("%w: must be one of %s", ErrUnknownDomain, strings.Join(allowed, ", "))
}

// DomainOf returns the registered domain of an event subject, or Unknown.
func DomainOf(subject string) string { return subjects.DomainOf(subject, Names()) }
