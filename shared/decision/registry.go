package decision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/trail"
)

// PeopleObject is the AUDIT object of a person's registry record:
// subjects.AuditAction(PeopleObject, person).
const PeopleObject = "people"

// peoplePrefix is the subject prefix of every person's record.
var peoplePrefix = subjects.AuditAction(PeopleObject, "")

// PeopleAll covers every person's registry record in AUDIT.
var PeopleAll = peoplePrefix + ">"

// PeopleSubject is the AUDIT subject of person's registry records.
func PeopleSubject(person string) string { return subjects.AuditAction(PeopleObject, person) }

// Action is the AUDIT action that stores pk: an api.AuditAction of
// object PeopleObject whose Detail is pk, so that every reader of AUDIT's
// actions lists it like any other.
func Action(pk api.PersonKeys) api.AuditAction {
	b, _ := json.Marshal(pk)
	return api.AuditAction{Action: pk.Event, Object: PeopleObject, ObjectID: pk.Person, Actor: pk.By, At: pk.At.UTC(), Detail: b}
}

// Publish stores pk in AUDIT (Action) and returns its sequence. Only the
// registrar's credential may publish there (package access).
func Publish(ctx context.Context, js jetstream.JetStream, pk api.PersonKeys) (uint64, error) {
	b, _ := json.Marshal(pk)
	return trail.Publish(ctx, js, Action(pk), "people-"+pk.Person+"-"+digestJSON(json.RawMessage(b))[:32])
}

// Entry is one registry record as stored: its AUDIT sequence and time.
type Entry struct {
	Seq    uint64
	Stored time.Time
	Keys   api.PersonKeys
}

// Registry reads the people's registry records (api.PersonKeys) from
// AUDIT and answers what was registered for a person as of a time or an
// AUDIT sequence: the last record for the person stored at or before it.
// It reads by direct get (no consumer), once for what it has not seen,
// and is safe for concurrent use.
type Registry struct {
	js jetstream.JetStream

	mu       sync.Mutex
	next     uint64 // next AUDIT sequence to read
	readAt   time.Time
	byPerson map[string][]Entry
	first    *Entry
	bad      []BadRecord
}

// BadRecord is a message on a people subject that is not a registry
// record (undecodable, or naming another person than its subject): it is
// never used.
type BadRecord struct {
	Seq     uint64
	Subject string
	Err     string
}

// NewRegistry returns a registry reading AUDIT through js.
func NewRegistry(js jetstream.JetStream) *Registry {
	return &Registry{js: js, next: 1, byPerson: map[string][]Entry{}}
}

// Refresh reads the records stored since the last read.
func (r *Registry) Refresh(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refresh(ctx)
}

func (r *Registry) refresh(ctx context.Context) error {
	start := time.Now()
	err := streams.DirectGetAll(ctx, r.js, subjects.AuditStream, streams.DirectRequest{Seq: r.next, NextFor: PeopleAll, Batch: 256},
		func(m *jetstream.RawStreamMsg) error {
			r.next = m.Sequence + 1
			person := strings.TrimPrefix(m.Subject, peoplePrefix)
			var act api.AuditAction
			var pk api.PersonKeys
			err := json.Unmarshal(m.Data, &act)
			if err == nil {
				err = json.Unmarshal(act.Detail, &pk)
			}
			if err == nil && (pk.Person != person || act.Object != PeopleObject) {
				err = fmt.Errorf("names person %q on the subject of %q", pk.Person, person)
			}
			if err != nil {
				r.bad = append(r.bad, BadRecord{Seq: m.Sequence, Subject: m.Subject, Err: err.Error()})
				return nil
			}
			e := Entry{Seq: m.Sequence, Stored: m.Time, Keys: pk}
			r.byPerson[person] = append(r.byPerson[person], e)
			if r.first == nil {
				r.first = &e
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRegistry, err)
	}
	r.readAt = start
	return nil
}

// AsOf returns the last record of person stored at or before at (false:
// none), reading AUDIT first when at is later than the last read.
func (r *Registry) AsOf(ctx context.Context, person string, at time.Time) (Entry, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.readAt.IsZero() || at.After(r.readAt) {
		if err := r.refresh(ctx); err != nil {
			return Entry{}, false, err
		}
	}
	return last(r.byPerson[person], func(e Entry) bool { return !e.Stored.After(at) })
}

// AsOfSeq returns the last record of person stored at or before AUDIT
// sequence seq (false: none).
func (r *Registry) AsOfSeq(ctx context.Context, person string, seq uint64) (Entry, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq >= r.next {
		if err := r.refresh(ctx); err != nil {
			return Entry{}, false, err
		}
	}
	return last(r.byPerson[person], func(e Entry) bool { return e.Seq <= seq })
}

func last(es []Entry, ok func(Entry) bool) (Entry, bool, error) {
	for i := len(es) - 1; i >= 0; i-- {
		if ok(es[i]) {
			return es[i], true, nil
		}
	}
	return Entry{}, false, nil
}

// Latest returns every person's last record, as of now.
func (r *Registry) Latest(ctx context.Context) (map[string]Entry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refresh(ctx); err != nil {
		return nil, err
	}
	out := make(map[string]Entry, len(r.byPerson))
	for p, es := range r.byPerson {
		out[p] = es[len(es)-1]
	}
	return out, nil
}

// First returns the store's first registry record (false: none yet):
// decisions recorded before it were made before people signed.
func (r *Registry) First(ctx context.Context) (Entry, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first == nil {
		if err := r.refresh(ctx); err != nil {
			return Entry{}, false, err
		}
	}
	if r.first == nil {
		return Entry{}, false, nil
	}
	return *r.first, true, nil
}

// Bad returns the messages on people subjects that are not registry
// records, as read so far.
func (r *Registry) Bad() []BadRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.bad)
}

// Check checks sd against the registry as of at (default now; verify
// gives the time the decision was recorded): Verify with the key the
// person had registered under the signature's key id, the key not revoked
// at the decision's time, the person enabled and holding the role signed.
// The decision itself (what it is about) is Expect's.
func (r *Registry) Check(ctx context.Context, sd api.SignedDecision, at ...time.Time) error {
	if sd.Signature.Scheme == "" || len(sd.Signature.Signature) == 0 {
		return ErrUnsigned
	}
	asOf := time.Now()
	if len(at) > 0 {
		asOf = at[0]
	}
	d := sd.Decision
	if d.Person == "" || d.Role == "" || d.Meaning == "" || d.At.IsZero() {
		return fmt.Errorf("%w: a decision names its person, role, meaning and time", ErrMismatch)
	}
	if d.At.After(asOf.Add(MaxSkew)) {
		return fmt.Errorf("%w: signed at %s, after it was recorded", ErrMismatch, d.At.UTC().Format(time.RFC3339))
	}
	e, ok, err := r.AsOf(ctx, d.Person, asOf)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s had no registered key at %s", ErrUnknownKey, d.Person, asOf.UTC().Format(time.RFC3339))
	}
	pk := e.Keys
	i := slices.IndexFunc(pk.Keys, func(k api.DecisionKey) bool {
		return k.Scheme == sd.Signature.Scheme && k.ID == sd.Signature.KeyID
	})
	if i < 0 {
		return fmt.Errorf("%w: key %s is not one of %s's", ErrUnknownKey, sd.Signature.KeyID, d.Person)
	}
	k := pk.Keys[i]
	if k.RevokedAt != nil && !d.At.Before(*k.RevokedAt) {
		return fmt.Errorf("%w: key %s of %s was revoked at %s", ErrUnknownKey, k.ID, d.Person, k.RevokedAt.UTC().Format(time.RFC3339))
	}
	if err := Verify(k, sd); err != nil {
		return err
	}
	if pk.Disabled {
		return fmt.Errorf("%w: %s was disabled", ErrPerson, d.Person)
	}
	if !slices.Contains(pk.Roles, d.Role) {
		return fmt.Errorf("%w: %s did not hold the role %s", ErrPerson, d.Person, d.Role)
	}
	return nil
}

// Same reports whether two records say the same of a person (roles,
// state, keys), whatever event, author and time they record.
func Same(a, b api.PersonKeys) bool {
	a.Event, a.By, a.At = "", "", time.Time{}
	b.Event, b.By, b.At = "", "", time.Time{}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// Sync stores the record of each person of current whose last record in
// AUDIT says otherwise (Same), or who has none: what a server does when it
// applies the people file, and at start (a store begun before people
// signed gets its people). current holds one record per person
// (access.Secrets.PersonKeys); it returns the records stored.
func (r *Registry) Sync(ctx context.Context, current []api.PersonKeys) ([]api.PersonKeys, error) {
	latest, err := r.Latest(ctx)
	if err != nil {
		return nil, err
	}
	var stored []api.PersonKeys
	var errs []error
	for _, pk := range current {
		if e, ok := latest[pk.Person]; ok && Same(e.Keys, pk) {
			continue
		}
		if _, err := Publish(ctx, r.js, pk); err != nil {
			errs = append(errs, err)
			continue
		}
		stored = append(stored, pk)
	}
	return stored, errors.Join(errs...)
}
