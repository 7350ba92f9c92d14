package console

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/endpoint"
)

// challengeOf asks a decision form's /challenge.
func (cl *client) challengeOf(t *testing.T, path string, form url.Values) (int, challengeReply) {
	t.Helper()
	w := cl.do(http.MethodPost, path+"/challenge", form)
	var rep challengeReply
	if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
		t.Fatalf("%s/challenge: %d %s", path, w.Code, w.Body)
	}
	return w.Code, rep
}

// assertion is what static/passkey.js posts after navigator.credentials.get
// signed challenge: the console reads the client data's type and
// challenge and passes the rest on (the executors verify the signature).
func assertion(typ, challenge, signedAt string) url.Values {
	client, _ := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": "http://example.com", "crossOrigin": false})
	b64 := base64.RawURLEncoding.EncodeToString
	return url.Values{
		fieldSignedAt: {signedAt}, fieldKeyID: {b64([]byte("credential-of-the-approver"))},
		fieldAuthData: {b64([]byte("rpIdHash................32 bytes\x05\x00\x00\x00\x07"))},
		fieldClient:   {b64(client)}, fieldSig: {b64([]byte("0E\x02 signature of the authenticator"))},
	}
}

// with is form with the values of more added.
func with(form url.Values, more url.Values) url.Values {
	out := url.Values{}
	for k, v := range form {
		out[k] = slices.Clone(v)
	}
	for k, v := range more {
		out[k] = slices.Clone(v)
	}
	return out
}

// TestApprovalSignedWithPasskey: an approval's Approve form asks the
// console for the decision it signs (the approval's request digest, the
// person and role, the meaning typed, the console's time); the assertion
// posted with the form goes to approval.approve as the request's Signed,
// byte for byte; an assertion of another decision (another meaning), one
// signed too long ago, a creation's client data or an unreadable field is
// refused by the console and reaches no service.
func TestApprovalSignedWithPasskey(t *testing.T) {
	e := startEnv(t)
	f := startFakeRedriver(t, e)
	f.mu.Lock()
	f.approval.DLQID = "" // no record to read the chain of: a drain's approval
	f.mu.Unlock()
	c := e.newConsole(t, nil)
	approver := access.DefaultPerson(access.RoleApprover)
	pw := e.password(approver)
	ap := newClient(t, c, "127.0.0.80")
	token := ap.mustLogin(approver, pw)
	const path = "/approvals/apr-7/approve"
	const meaning = `Geprüft: Rechnung Müller & Söhne <Nord> "4711", 陈伟`

	page := ap.do(http.MethodGet, "/approvals/apr-7", nil).Body.String()
	f.mu.Lock()
	digest := approval.RequestDigest(f.approval)
	f.mu.Unlock()
	for _, want := range []string{`id="approval-signs"`, digest, `data-sign`, `name="passkey_signature"`, `src="/static/passkey.js"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the approval page lacks %s", want)
		}
	}

	if code, rep := ap.challengeOf(t, path, url.Values{"csrf": {token}}); code != http.StatusBadRequest || rep.Error == nil || rep.Error.Field != "meaning" {
		t.Errorf("a challenge without a meaning: %d %+v", code, rep.Error)
	}
	if w := ap.do(http.MethodPost, path+"/challenge", url.Values{"meaning": {meaning}}); w.Code != http.StatusForbidden {
		t.Errorf("a challenge without the CSRF token: %d", w.Code)
	}
	code, ch := ap.challengeOf(t, path, url.Values{"csrf": {token}, "meaning": {meaning}, "password": {"never sent by the page"}})
	if code != http.StatusOK || ch.Error != nil {
		t.Fatalf("challenge: %d %+v", code, ch.Error)
	}
	d := ch.Decision
	if d.Action != api.DecisionApprove || d.Target != "apr-7" || d.Request != digest || d.Chain != "" || d.Meaning != meaning ||
		d.Person != approver || d.Role != string(access.RoleApprover) || time.Since(d.At) > time.Minute || d.At.Nanosecond() != 0 {
		t.Errorf("the decision to sign: %+v", d)
	}
	if ch.Challenge != decision.Challenge(d) || ch.RPID != "example.com" || ch.SignedAt != d.At.Format(time.RFC3339) {
		t.Errorf("challenge %q rp %q at %q", ch.Challenge, ch.RPID, ch.SignedAt)
	}

	form := url.Values{"csrf": {token}, "meaning": {meaning}, "password": {pw}}
	other := d
	other.Meaning = "approved without review"
	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		code   string
	}{
		{"another decision's challenge", with(form, assertion("webauthn.get", decision.Challenge(other), ch.SignedAt)), http.StatusConflict, api.ErrConflict},
		{"the meaning changed after signing", with(with(form, assertion("webauthn.get", ch.Challenge, ch.SignedAt)), url.Values{"meaning": {"something else"}}), http.StatusConflict, api.ErrConflict},
		{"signed ten minutes ago", with(form, assertion("webauthn.get", ch.Challenge, d.At.Add(-10*time.Minute).Format(time.RFC3339))), http.StatusBadRequest, api.ErrBadRequest},
		{"signed in an hour", with(form, assertion("webauthn.get", ch.Challenge, d.At.Add(time.Hour).Format(time.RFC3339))), http.StatusBadRequest, api.ErrBadRequest},
		{"no time of signing", with(form, assertion("webauthn.get", ch.Challenge, "")), http.StatusBadRequest, api.ErrBadRequest},
		{"a creation's client data", with(form, assertion("webauthn.create", ch.Challenge, ch.SignedAt)), http.StatusBadRequest, api.ErrBadRequest},
		{"authenticator data not base64url", with(with(form, assertion("webauthn.get", ch.Challenge, ch.SignedAt)), url.Values{fieldAuthData: {"<&>"}}), http.StatusBadRequest, api.ErrBadRequest},
		{"no credential id", with(with(form, assertion("webauthn.get", ch.Challenge, ch.SignedAt)), url.Values{fieldKeyID: {""}}), http.StatusBadRequest, api.ErrBadRequest},
		{"no signature", with(with(form, assertion("webauthn.get", ch.Challenge, ch.SignedAt)), url.Values{fieldSig: {""}}), http.StatusBadRequest, api.ErrBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.mu.Lock()
			before := len(f.decisions)
			f.mu.Unlock()
			w := ap.do(http.MethodPost, path, tc.form)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.code) {
				t.Errorf("%d, want %d %s\n%s", w.Code, tc.status, tc.code, w.Body)
			}
			if body := w.Body.String(); strings.Contains(body, pw) {
				t.Error("the password is written back")
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.decisions) != before {
				t.Error("a refused signature reached the redriver")
			}
		})
	}

	signed := assertion("webauthn.get", ch.Challenge, ch.SignedAt)
	if w := ap.do(http.MethodPost, path, with(form, signed)); w.Code != http.StatusSeeOther {
		t.Fatalf("the signed approval: %d\n%s", w.Code, w.Body)
	}
	f.mu.Lock()
	got := f.signed
	f.mu.Unlock()
	if len(got) == 0 || got[len(got)-1] == nil {
		t.Fatal("approval.approve was sent without the signed decision")
	}
	sd := got[len(got)-1]
	unb64 := func(s string) []byte { b, _ := base64.RawURLEncoding.DecodeString(s); return b }
	if sd.Decision != d || sd.Signature.Scheme != api.SchemePasskey || sd.Signature.KeyID != signed.Get(fieldKeyID) ||
		string(sd.Signature.Signature) != string(unb64(signed.Get(fieldSig))) || string(sd.Signature.ClientDataJSON) != string(unb64(signed.Get(fieldClient))) ||
		string(sd.Signature.AuthenticatorData) != string(unb64(signed.Get(fieldAuthData))) {
		t.Errorf("the signed decision sent: %+v", sd)
	}
}

// TestHoldLiftSignedWithPasskey: a hold's Lift form signs the lift
// request's digest; the lift request the auditor receives carries it.
func TestHoldLiftSignedWithPasskey(t *testing.T) {
	e := startEnv(t)
	startFakeRedriver(t, e) // the approval owner: a lift waits for approval
	c := e.newConsole(t, nil)
	opName := access.DefaultPerson(access.RoleOperator)
	op := newClient(t, c, "127.0.0.81")
	token := op.mustLogin(opName, e.password(opName))
	place := url.Values{"csrf": {token}, "party": {"PARTY-SIGNED-LIFT"}, "case_id": {"CASE-陈伟-7"}, "reason": {"Müller & Söhne <Nord> litigation"}, "confirm": {"on"}}
	if w := op.do(http.MethodPost, "/holds", place); w.Code != http.StatusSeeOther {
		t.Fatalf("place: %d\n%s", w.Code, w.Body)
	}
	page := op.do(http.MethodGet, "/holds", nil).Body.String()
	// The lift form of this hold (the shared server holds other tests').
	var path string
	for _, row := range strings.Split(page, `<tr id="hold-`)[1:] {
		if m := regexp.MustCompile(`action="(/holds/[A-Za-z0-9_-]+/lift)"`).FindStringSubmatch(row); m != nil && strings.Contains(row, "party PARTY-SIGNED-LIFT") {
			path = m[1]
		}
	}
	if path == "" {
		t.Fatalf("no lift form of the hold:\n%s", page)
	}
	admin := e.srv.ConnectAs(t, access.Admin)
	lifts, err := admin.SubscribeSync(api.HoldLift)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Flush(); err != nil { // the server has the subscription before the lift is sent
		t.Fatal(err)
	}
	reason := `case closed: "settled" & sealed <2026>`
	form := url.Values{"csrf": {token}, "case_id": {"CASE-陈伟-7"}, "reason": {reason}}
	code, ch := op.challengeOf(t, path, form)
	if code != http.StatusOK {
		t.Fatalf("challenge: %d %+v", code, ch.Error)
	}
	id := strings.TrimSuffix(strings.TrimPrefix(path, "/holds/"), "/lift")
	want := approval.DirectDigest(api.HoldLiftRequest{ID: id, CaseID: "CASE-陈伟-7", Reason: reason})
	if d := ch.Decision; d.Action != api.DecisionLift || d.Target != id || d.Request != want || d.Meaning != reason || d.Person != opName {
		t.Errorf("the lift to sign: %+v", d)
	}
	// The test's authenticator is no registered passkey: the auditor, the
	// executor, refuses its signature; what matters here is that the
	// console sent the assertion as made (below).
	w := op.doFollow(http.MethodPost, path, with(form, assertion("webauthn.get", ch.Challenge, ch.SignedAt)))
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), api.ErrDecisionUnsigned) {
		t.Errorf("the lift signed by an unregistered authenticator: %d\n%s", w.Code, w.Body)
	}
	msg, err := lifts.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var req api.HoldLiftRequest
	if err := json.Unmarshal(msg.Data, &req); err != nil || req.Signed == nil || req.Signed.Decision != ch.Decision {
		t.Errorf("the lift request the auditor received: %s", msg.Data)
	}
}

// TestPasskeysPage: the Passkeys page names the person and the relying
// party; a creation's options ask a resident key with user verification
// preferred, ES256/EdDSA/RS256, the person's name but a hashed user id; a
// creation posted without its options, or with an answer that is not an
// attestation, is refused with the field named.
func TestPasskeysPage(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, nil)
	approver := access.DefaultPerson(access.RoleApprover)
	ap := newClient(t, c, "127.0.0.82")
	token := ap.mustLogin(approver, e.password(approver))
	page := ap.do(http.MethodGet, "/passkeys", nil).Body.String()
	for _, want := range []string{`id="passkey-person">` + approver, "<code>http://example.com</code>", `data-passkey-create`, `id="create-passkey"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the Passkeys page lacks %s", want)
		}
	}
	if w := ap.do(http.MethodPost, "/passkeys", url.Values{"csrf": {token}, "credential_id": {"AAAA"}, "attestation_object": {"AAAA"}, "client_data": {"AAAA"}}); w.Code != http.StatusBadRequest ||
		!strings.Contains(w.Body.String(), "no passkey creation was started") {
		t.Errorf("a creation without its options: %d\n%s", w.Code, w.Body)
	}
	w := ap.do(http.MethodPost, "/passkeys/options", url.Values{"csrf": {token}})
	var o creationOptions
	if err := json.Unmarshal(w.Body.Bytes(), &o); err != nil || w.Code != http.StatusOK {
		t.Fatalf("options: %d %s", w.Code, w.Body)
	}
	if o.RP.ID != "example.com" || o.User.Name != approver || strings.Contains(o.User.ID, approver) || o.ResidentKey != "required" ||
		o.UserVerification != "preferred" || !slices.Equal(o.Algorithms, []int64{-7, -8, -257}) || len(o.Challenge) < 43 {
		t.Errorf("options %+v", o)
	}
	w = ap.do(http.MethodPost, "/passkeys", url.Values{"csrf": {token}, "label": {"Müller's <YubiKey>"},
		"credential_id": {"Y3JlZA"}, "attestation_object": {"b3RoZXI"}, "client_data": {base64.RawURLEncoding.EncodeToString([]byte(`{"type":"webauthn.create","challenge":"` + o.Challenge + `","origin":"http://example.com"}`))}})
	if body := w.Body.String(); w.Code != http.StatusBadRequest || !strings.Contains(body, api.ErrBadRequest+"</strong> (passkey)") ||
		!strings.Contains(body, `value="Müller&#39;s &lt;YubiKey&gt;"`) || strings.Contains(body, "passkey-registration") {
		t.Errorf("a creation that is no attestation: %d\n%s", w.Code, body)
	}
	// The challenge is used once.
	if w := ap.do(http.MethodPost, "/passkeys", url.Values{"csrf": {token}, "credential_id": {"Y3JlZA"}, "attestation_object": {"AAAA"}, "client_data": {"AAAA"}}); !strings.Contains(w.Body.String(), "no passkey creation was started") {
		t.Errorf("a second creation on one challenge: %d", w.Code)
	}
}

// TestRelyingParty: the passkeys' origin and relying party id are the
// configured origin, else the request's (https with TLS); an IP address
// is refused with the name to use instead.
func TestRelyingParty(t *testing.T) {
	for _, tc := range []struct {
		name           string
		rp             relyingParty
		host           string
		origin, rpID   string
		wantErrContain string
	}{
		{"the request's name", relyingParty{}, "console.pharma.example:8090", "http://console.pharma.example:8090", "console.pharma.example", ""},
		{"with TLS", relyingParty{tls: true}, "console.pharma.example", "https://console.pharma.example", "console.pharma.example", ""},
		{"the configured origin wins over the Host", relyingParty{origin: "https://dlq.grosshandel.example"}, "evil.example", "https://dlq.grosshandel.example", "dlq.grosshandel.example", ""},
		{"localhost", relyingParty{}, "localhost:8090", "http://localhost:8090", "localhost", ""},
		{"an IPv4 address", relyingParty{}, "127.0.0.1:8090", "", "", "http://localhost:8090/"},
		{"an IPv6 address", relyingParty{}, "[::1]:8090", "", "", "not at an IP address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/passkeys", nil)
			r.Host = tc.host
			id, err := tc.rp.of(r)
			if tc.wantErrContain != "" {
				if e := api.AsError(err); e == nil || e.Code != api.ErrBadRequest || !strings.Contains(e.Message, tc.wantErrContain) {
					t.Fatalf("err = %v, want BAD_REQUEST naming %q", err, tc.wantErrContain)
				}
				return
			}
			if err != nil || id.origin != tc.origin || id.rpID != tc.rpID {
				t.Fatalf("= %+v, %v; want %s %s", id, err, tc.origin, tc.rpID)
			}
		})
	}
	for _, origin := range []string{"http://127.0.0.1:8090", "https://console.example/path", "console.example", "ftp://console.example"} {
		cfg := DefaultConfig()
		cfg.Origin = origin
		if _, err := New(cfg, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("origin %q: %v, want ErrConfig", origin, err)
		}
	}
}

// TestShellWord: the administrator's command quotes a person's name only
// when it must.
func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"chen.wei":            "chen.wei",
		"a+approver@ex.com":   "a+approver@ex.com",
		"Jürgen Groß":         "'Jürgen Groß'",
		"o'brien; rm -rf /":   `'o'\''brien; rm -rf /'`,
		"":                    "''",
		"$(id)":               "'$(id)'",
		"passkey:eyJzY2hlbWU": "passkey:eyJzY2hlbWU",
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestRecordDecisionChallenges: the decisions of a record's Release and
// Dismiss forms sign the request's digest and the head of the record's
// chain as audit.get reads it, and an approval of a correction signs the
// head of its record's chain; a record that does not exist is NOT_FOUND,
// with nothing to sign.
func TestRecordDecisionChallenges(t *testing.T) {
	e := startEnv(t)
	f := startReview(t, e)
	c := e.newConsole(t, nil)
	opName := access.DefaultPerson(access.RoleOperator)
	op := newClient(t, c, "127.0.0.83")
	token := op.mustLogin(opName, e.password(opName))
	viewer := e.srv.ConnectAs(t, access.DefaultPerson(access.RoleViewer))
	rep, err := endpoint.Call[api.GetRequest, api.GetReply](context.Background(), viewer, api.AuditGet, api.GetRequest{DLQID: f.dlqID})
	if err != nil || rep.State.LastHash == "" {
		t.Fatalf("audit.get: %v %q", err, rep.State.LastHash)
	}
	head := rep.State.LastHash
	reason := `Lieferschein "4711" von Müller & Söhne <Nord> bestätigt`
	for _, tc := range []struct {
		name, path, action string
		form               url.Values
		request            any
	}{
		{"release", "/records/" + f.dlqID + "/release", api.DecisionRelease, url.Values{"csrf": {token}, "reason": {reason}, "class": {"validation"}},
			api.ReleaseRequest{DLQID: f.dlqID, Class: "validation", Reason: reason}},
		{"dismiss", "/records/" + f.dlqID + "/dismiss", api.DecisionDismiss, url.Values{"csrf": {token}, "reason": {reason}},
			api.DismissRequest{DLQID: f.dlqID, Reason: reason}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, ch := op.challengeOf(t, tc.path, tc.form)
			if code != http.StatusOK {
				t.Fatalf("challenge: %d %+v", code, ch.Error)
			}
			d := ch.Decision
			if d.Action != tc.action || d.Target != f.dlqID || d.Request != approval.DirectDigest(tc.request) || d.Chain != head ||
				d.Meaning != reason || d.Person != opName || d.Role != string(access.RoleOperator) || ch.Challenge != decision.Challenge(d) {
				t.Errorf("the decision to sign: %+v", d)
			}
		})
	}
	t.Run("an unknown record", func(t *testing.T) {
		code, ch := op.challengeOf(t, "/records/pharmacy_"+strings.Repeat("0", 32)+"/dismiss", url.Values{"csrf": {token}, "reason": {reason}})
		if code != http.StatusNotFound || ch.Error == nil || ch.Error.Code != api.ErrNotFound || ch.Challenge != "" {
			t.Errorf("%d %+v", code, ch)
		}
	})
	t.Run("an approval of a correction signs its record's chain", func(t *testing.T) {
		approver := access.DefaultPerson(access.RoleApprover)
		ap := newClient(t, c, "127.0.0.84")
		atoken := ap.mustLogin(approver, e.password(approver))
		code, ch := ap.challengeOf(t, "/approvals/"+f.approvalID+"/approve", url.Values{"csrf": {atoken}, "meaning": {reason}})
		if code != http.StatusOK || ch.Decision.Chain != head || ch.Decision.Target != f.approvalID {
			t.Errorf("%d %+v", code, ch)
		}
	})
}
