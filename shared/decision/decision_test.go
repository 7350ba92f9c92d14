package decision_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/shared/streams"
)

func newKey(t testing.TB) (ed25519.PrivateKey, api.DecisionKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := decision.Ed25519Key(decision.KeyID(pub), "laptop")
	if err != nil {
		t.Fatal(err)
	}
	k.AddedAt = time.Now().UTC().Truncate(time.Second)
	return priv, k
}

// meaning is what people write: quotes, markup characters, non-ASCII.
const meaning = `geprüft gegen Rechnung 4711 von Müller & Söhne <Großhandel>, "dringend" — 陈伟 bestätigt`

func approvalOf() api.Approval {
	return api.Approval{ID: "apr-7f3a", Action: "correct", DLQID: "dlq-1", Domain: "dscsa",
		Request: json.RawMessage(`{"dlq_id":"dlq-1","reason":"Menge 500 → 50 <Lieferschein> & \"Rücksprache\""}`),
		Payload: []byte(`{"quantity":50,"party":"Müller & Söhne"}`), Requester: "amara.okafor", RequesterRole: "operator",
		RequestedAt: time.Date(2026, 12, 7, 19, 0, 0, 123, time.UTC), ExpiresAt: time.Date(2026, 12, 8, 19, 0, 0, 0, time.UTC), ChainRecords: 3, ChainHead: "9f2c"}
}

func TestCheck(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	js := srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	before := time.Now().Add(-time.Hour)
	chenPriv, chenKey := newKey(t)
	oldPriv, oldKey := newKey(t)
	revokedAt := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	oldKey.RevokedAt = &revokedAt
	jonasPriv, jonasKey := newKey(t)
	elifPriv, elifKey := newKey(t)
	strangerPriv, strangerKey := newKey(t)
	_ = strangerKey
	now := time.Now().UTC()
	for _, pk := range []api.PersonKeys{
		{Person: "chen.wei", Roles: []string{"approver"}, Keys: []api.DecisionKey{oldKey, chenKey}, Event: "key added", By: "root", At: now},
		{Person: "jonas.mueller", Roles: []string{"operator"}, Keys: []api.DecisionKey{jonasKey}, Event: "added", By: "root", At: now},
		{Person: "elif.yilmaz", Roles: []string{"inspector", "approver"}, Keys: []api.DecisionKey{elifKey}, Event: "added", By: "root", At: now},
	} {
		if _, err := decision.Publish(ctx, js, pk); err != nil {
			t.Fatal(err)
		}
	}
	// elif.yilmaz leaves: her later record says disabled.
	afterElifEnabled := time.Now()
	// The disabling record's stored time must come after that as-of
	// time: wait for the clock to pass it.
	natstest.CheckFor(t, time.Second, time.Millisecond, func() error {
		if !time.Now().After(afterElifEnabled) {
			return errors.New("the clock has not moved past the as-of time")
		}
		return nil
	})
	if _, err := decision.Publish(ctx, js, api.PersonKeys{Person: "elif.yilmaz", Roles: []string{"inspector", "approver"}, Disabled: true,
		Keys: []api.DecisionKey{elifKey}, Event: "disabled", By: "root", At: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	reg := decision.NewRegistry(js)

	at := time.Now().UTC()
	d := decision.ForApproval(approvalOf(), api.DecisionApprove, meaning, "chen.wei", "approver", at)
	good := decision.SignEd25519(chenPriv, d)

	tampered := func(f func(*api.SignedDecision)) api.SignedDecision {
		s := good
		f(&s)
		return s
	}
	other := d
	other.Target = "apr-other"
	tests := []struct {
		name string
		sd   api.SignedDecision
		at   []time.Time
		want error
	}{
		{name: "good signature", sd: good},
		{name: "good signature as of its time", sd: good, at: []time.Time{at.Add(time.Second)}},
		{name: "unsigned", sd: api.SignedDecision{Decision: d}, want: decision.ErrUnsigned},
		{name: "a key never registered", sd: decision.SignEd25519(strangerPriv, d), want: decision.ErrUnknownKey},
		{name: "another person's key", sd: decision.SignEd25519(jonasPriv, d), want: decision.ErrUnknownKey},
		{name: "the person's key id, another key's signature", sd: tampered(func(s *api.SignedDecision) {
			s.Signature.Signature = decision.SignEd25519(strangerPriv, d).Signature.Signature
		}), want: decision.ErrBadSignature},
		{name: "a revoked key", sd: decision.SignEd25519(oldPriv, d), want: decision.ErrUnknownKey},
		{name: "a revoked key, signed before its revocation", sd: decision.SignEd25519(oldPriv, func() api.Decision {
			e := d
			e.At = revokedAt.Add(-time.Minute)
			return e
		}())},
		{name: "a disabled person", sd: decision.SignEd25519(elifPriv, decision.ForApproval(approvalOf(), api.DecisionApprove, meaning, "elif.yilmaz", "approver", at)),
			want: decision.ErrPerson},
		{name: "the same person before she was disabled", sd: decision.SignEd25519(elifPriv, decision.ForApproval(approvalOf(), api.DecisionApprove, meaning, "elif.yilmaz", "approver", afterElifEnabled)),
			at: []time.Time{afterElifEnabled}},
		{name: "a role the person does not hold", sd: decision.SignEd25519(jonasPriv, decision.ForApproval(approvalOf(), api.DecisionApprove, meaning, "jonas.mueller", "approver", at)),
			want: decision.ErrPerson},
		{name: "a signature copied onto another decision", sd: tampered(func(s *api.SignedDecision) { s.Decision = other }), want: decision.ErrBadSignature},
		{name: "the meaning tampered", sd: tampered(func(s *api.SignedDecision) { s.Decision.Meaning += " (nicht)" }), want: decision.ErrBadSignature},
		{name: "the time tampered", sd: tampered(func(s *api.SignedDecision) { s.Decision.At = s.Decision.At.Add(-time.Minute) }), want: decision.ErrBadSignature},
		{name: "the signer renamed", sd: tampered(func(s *api.SignedDecision) { s.Decision.Person = "jonas.mueller" }), want: decision.ErrUnknownKey},
		{name: "an unknown scheme", sd: tampered(func(s *api.SignedDecision) { s.Signature.Scheme = "rsa" }), want: decision.ErrUnknownKey},
		{name: "a truncated signature", sd: tampered(func(s *api.SignedDecision) { s.Signature.Signature = s.Signature.Signature[:10] }), want: decision.ErrBadSignature},
		{name: "before the person registered a key", sd: decision.SignEd25519(chenPriv, decision.ForApproval(approvalOf(), api.DecisionApprove, meaning, "chen.wei", "approver", before)),
			at: []time.Time{before}, want: decision.ErrUnknownKey},
		{name: "signed long after it was recorded", sd: good, at: []time.Time{before}, want: decision.ErrMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := reg.Check(ctx, tc.sd, tc.at...)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Check = %v, want %v", err, tc.want)
			}
			if tc.want != nil && decision.Code(err) == "" {
				t.Fatalf("%v has no reply code", err)
			}
		})
	}
}

func TestExpect(t *testing.T) {
	now := time.Now().UTC()
	want := decision.ForRelease(api.ReleaseRequest{DLQID: "dlq-9", Reason: "Lieferant bestätigt <ok> & \"richtig\""}, "ab12", "amara.okafor", "operator", now)
	tests := []struct {
		name string
		sd   *api.SignedDecision
		err  error
	}{
		{name: "the same decision", sd: &api.SignedDecision{Decision: want}},
		{name: "other words, a minute later", sd: &api.SignedDecision{Decision: func() api.Decision { d := want; d.Meaning = "陈伟 sagt ok"; d.At = now.Add(time.Minute); return d }()}},
		{name: "no signed decision", sd: nil, err: decision.ErrUnsigned},
		{name: "another event", sd: &api.SignedDecision{Decision: func() api.Decision { d := want; d.Target = "dlq-10"; return d }()}, err: decision.ErrMismatch},
		{name: "another reason than the request's", sd: &api.SignedDecision{Decision: decision.ForRelease(api.ReleaseRequest{DLQID: "dlq-9", Reason: "x"}, "ab12", "amara.okafor", "operator", now)}, err: decision.ErrMismatch},
		{name: "a chain changed since", sd: &api.SignedDecision{Decision: func() api.Decision { d := want; d.Chain = "cd34"; return d }()}, err: decision.ErrMismatch},
		{name: "dismiss for release", sd: &api.SignedDecision{Decision: func() api.Decision { d := want; d.Action = api.DecisionDismiss; return d }()}, err: decision.ErrMismatch},
		{name: "signed an hour ago", sd: &api.SignedDecision{Decision: func() api.Decision { d := want; d.At = now.Add(-time.Hour); return d }()}, err: decision.ErrMismatch},
		{name: "another person", sd: &api.SignedDecision{Decision: func() api.Decision { d := want; d.Person = "jonas.mueller"; return d }()}, err: decision.ErrMismatch},
		{name: "no meaning", sd: &api.SignedDecision{Decision: func() api.Decision { d := want; d.Meaning = ""; return d }()}, err: decision.ErrMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := decision.Expect(want, tc.sd, now); tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("Expect = %v, want %v", err, tc.err)
			}
		})
	}
}

func TestEd25519KeyText(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		{"empty", ""}, {"not base64", "<Müller & Söhne>"}, {"too short", "AAAA"}, {"a seed", "SUAM" + string(make([]byte, 50))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decision.Ed25519Key(tc.text, ""); !errors.Is(err, decision.ErrKeyText) {
				t.Fatalf("Ed25519Key(%q) = %v, want ErrKeyText", tc.text, err)
			}
		})
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	pass := []byte("Müller & Söhne <Großhandel> \"geheim\" 陈伟")
	start := time.Now()
	kf, priv, err := decision.NewKeyFile("chen.wei", pass)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new key sealed in %s", time.Since(start))
	path := dir + "/chen.wei.key"
	if err := decision.WriteKeyFile(path, kf); err != nil {
		t.Fatal(err)
	}
	if err := decision.WriteKeyFile(path, kf); err == nil {
		t.Fatal("a key file was written over")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, priv.Seed()) || bytes.Contains(raw, []byte(base64.StdEncoding.EncodeToString(priv.Seed()))) {
		t.Fatal("the seed is in the file in clear")
	}
	read, err := decision.ReadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	other := read
	other.Person = "jonas.mueller"
	tests := []struct {
		name string
		kf   decision.KeyFile
		pass []byte
		want error
	}{
		{name: "the passphrase", kf: read, pass: pass},
		{name: "no passphrase", kf: read, pass: nil, want: decision.ErrPassphrase},
		{name: "another passphrase", kf: read, pass: []byte("Müller & Söhne"), want: decision.ErrPassphrase},
		{name: "the file renamed to another person", kf: other, pass: pass, want: decision.ErrPassphrase},
		{name: "a cost out of bounds", kf: func() decision.KeyFile { k := read; k.N = 1 << 30; return k }(), pass: pass, want: decision.ErrKeyFile},
		{name: "an unknown derivation", kf: func() decision.KeyFile { k := read; k.KDF = "rot13"; return k }(), pass: pass, want: decision.ErrKeyFile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got, err := tc.kf.Open(tc.pass)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Open = %v, want %v", err, tc.want)
			}
			if tc.want == nil {
				t.Logf("opened in %s", time.Since(start))
				sd := decision.SignEd25519(got, decision.ForHold(api.HoldLiftRequest{ID: "hold-1", CaseID: "DEA-2026-<17>", Reason: meaning}, "chen.wei", "approver", time.Now()))
				k, err := tc.kf.Key()
				if err != nil {
					t.Fatal(err)
				}
				if err := decision.Verify(k, sd); err != nil {
					t.Fatalf("a decision signed with the opened key: %v", err)
				}
			}
		})
	}
}

// TestRegistry: records are read as of a sequence and a time, a message
// on a people subject that is no record (or names another person) is
// never used, and Sync stores only what changed.
func TestRegistry(t *testing.T) {
	srv := natstest.Start(t)
	srv.Provision(t, streams.DefaultOptions())
	js := srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, key := newKey(t)
	chen := api.PersonKeys{Person: "chen.wei", Roles: []string{"approver"}, Event: "added", By: "root", At: time.Now().UTC()}
	first, err := decision.Publish(ctx, js, chen)
	if err != nil {
		t.Fatal(err)
	}
	// Not records: garbage, and a record naming another person.
	if _, err := js.Publish(ctx, decision.PeopleSubject("chen.wei"), []byte(`{"action":"key added","detail":"<Müller & Söhne>"`)); err != nil {
		t.Fatal(err)
	}
	other := chen
	other.Person, other.Keys = "jonas.mueller", []api.DecisionKey{key}
	b, _ := json.Marshal(decision.Action(other))
	if _, err := js.Publish(ctx, decision.PeopleSubject("chen.wei"), b); err != nil {
		t.Fatal(err)
	}
	withKey := chen
	withKey.Keys, withKey.Event = []api.DecisionKey{key}, "key added"
	reg := decision.NewRegistry(js)
	stored, err := reg.Sync(ctx, []api.PersonKeys{withKey})
	if err != nil || len(stored) != 1 {
		t.Fatalf("Sync of a change stored %d records (%v), want 1", len(stored), err)
	}
	again := withKey
	again.Event, again.By, again.At = "enabled", "someone else", time.Now().UTC() // the same roles, state and keys
	if stored, err := decision.NewRegistry(js).Sync(ctx, []api.PersonKeys{again}); err != nil || len(stored) != 0 {
		t.Fatalf("Sync of what AUDIT says: stored %d (%v), want none", len(stored), err)
	}
	tests := []struct {
		name string
		get  func() (decision.Entry, bool, error)
		keys int
		ok   bool
	}{
		{"as of the first record's sequence", func() (decision.Entry, bool, error) { return reg.AsOfSeq(ctx, "chen.wei", first) }, 0, true},
		{"before it", func() (decision.Entry, bool, error) { return reg.AsOfSeq(ctx, "chen.wei", first-1) }, 0, false},
		{"as of the key's record", func() (decision.Entry, bool, error) { return reg.AsOfSeq(ctx, "chen.wei", first+3) }, 1, true},
		{"now", func() (decision.Entry, bool, error) { return reg.AsOf(ctx, "chen.wei", time.Now()) }, 1, true},
		{"a person never registered", func() (decision.Entry, bool, error) { return reg.AsOf(ctx, "jonas.mueller", time.Now()) }, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, ok, err := tc.get()
			if err != nil || ok != tc.ok || len(e.Keys.Keys) != tc.keys {
				t.Fatalf("got %+v %v %v, want found %v with %d keys", e, ok, err, tc.ok, tc.keys)
			}
		})
	}
	if bad := reg.Bad(); len(bad) != 2 {
		t.Fatalf("%d messages set aside, want the garbage and the other person's: %+v", len(bad), bad)
	}
	if e, ok, err := reg.First(ctx); err != nil || !ok || e.Seq != first {
		t.Fatalf("First = %+v %v %v", e, ok, err)
	}
}
