package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// PeopleObject is the AUDIT object kind of the people registry: a
// person's api.PersonKeys records are on subjects.AuditAction(PeopleObject,
// person).
const PeopleObject = "people"

// AuditRegistry is a Checker over the people registry kept in AUDIT: the
// last api.PersonKeys of the signer whose time (At) is at or before the
// decision's time (its roles, enabled state and keys) decides.
//
// TODO(#38): decision.Registry reads the same records (by stored time,
// cached) for verify; the executors keep this reader (by the record's
// own time, read each time) until the two are made one.
type AuditRegistry struct {
	// JS reads AUDIT (direct gets).
	JS jetstream.JetStream
}

var _ Checker = AuditRegistry{}

// Check verifies sd against the signer's registry record as of
// sd.Decision.At.
func (r AuditRegistry) Check(ctx context.Context, sd api.SignedDecision) error {
	// A decision's time has second precision (decision.Digest): it was
	// signed within the second after it, so a record of that second
	// counts.
	return r.CheckAt(ctx, sd, sd.Decision.At.Truncate(time.Second).Add(time.Second-time.Nanosecond))
}

var _ AsOfChecker = AuditRegistry{}

// CheckAt verifies sd against the signer's registry record as of at (a
// decision asked now is checked as of now too: a person disabled, or a
// key revoked, a minute ago may not sign with a time before that).
func (r AuditRegistry) CheckAt(ctx context.Context, sd api.SignedDecision, at time.Time) error {
	d := sd.Decision
	if d.Person == "" {
		return fmt.Errorf("%w: the decision names no person", decision.ErrPerson)
	}
	pk, found, err := r.personAt(ctx, d.Person, at)
	switch {
	case err != nil:
		return fmt.Errorf("%w: the registry of %s: %w", ErrUnavailable, d.Person, err)
	case !found:
		return fmt.Errorf("%w: %s is not registered at %s", decision.ErrPerson, d.Person, at.UTC().Format(time.RFC3339))
	case pk.Disabled:
		return fmt.Errorf("%w: %s was disabled at %s", decision.ErrPerson, d.Person, at.UTC().Format(time.RFC3339))
	case !slices.Contains(pk.Roles, d.Role):
		return fmt.Errorf("%w: %s did not hold the role %s", decision.ErrPerson, d.Person, d.Role)
	}
	i := slices.IndexFunc(pk.Keys, func(k api.DecisionKey) bool {
		return k.Scheme == sd.Signature.Scheme && k.ID == sd.Signature.KeyID
	})
	if i < 0 {
		return fmt.Errorf("%w: %s holds no key %s", decision.ErrUnknownKey, d.Person, sd.Signature.KeyID)
	}
	k := pk.Keys[i]
	if k.RevokedAt != nil && (!d.At.Before(*k.RevokedAt) || !at.Before(*k.RevokedAt)) {
		return fmt.Errorf("%w: %s's key %s was revoked", decision.ErrUnknownKey, d.Person, k.ID)
	}
	return decision.Verify(k, sd)
}

// personAt reads person's last registry record (in stream order) of a
// time at or before at.
func (r AuditRegistry) personAt(ctx context.Context, person string, at time.Time) (api.PersonKeys, bool, error) {
	var last api.PersonKeys
	found := false
	err := streams.ReadSubject(ctx, r.JS, subjects.AuditStream, subjects.AuditAction(PeopleObject, person), func(m *jetstream.RawStreamMsg) error {
		pk, ok := decodePersonKeys(m.Data)
		if !ok || pk.Person != person {
			return nil
		}
		if pk.At.After(at) {
			return nil // recorded after the decision
		}
		last, found = pk, true
		return nil
	})
	return last, found, err
}

// decodePersonKeys reads a registry record: an api.PersonKeys, or an
// api.AuditAction whose Detail is one.
func decodePersonKeys(b []byte) (api.PersonKeys, bool) {
	var pk api.PersonKeys
	if json.Unmarshal(b, &pk) == nil && pk.Person != "" {
		return pk, true
	}
	var act api.AuditAction
	if json.Unmarshal(b, &act) == nil && len(act.Detail) > 0 && json.Unmarshal(act.Detail, &pk) == nil && pk.Person != "" {
		return pk, true
	}
	return api.PersonKeys{}, false
}
