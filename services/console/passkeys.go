package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/safetext"
)

// passkeyPages is the Passkeys page: a person creates a passkey
// (navigator.credentials.create, static/passkey.js), the console verifies
// its creation (decision.VerifyPasskeyCreation: challenge, origin, relying
// party id, attestation) and shows its registration text and the command
// an administrator runs to register it. The console keeps no key: the
// registry of people's keys is `deadletter people` (PersonKeys in AUDIT).
type passkeyPages struct {
	web
	rp relyingParty
}

// relyingParty is the WebAuthn relying party of the console's passkeys:
// Config.Origin, or else the origin the browser shows (the request's
// Host, https with a TLS certificate). Its id is the origin's host name.
type relyingParty struct {
	origin string
	tls    bool
}

// relyingID is a relying party as resolved for a request.
type relyingID struct {
	origin, rpID string
}

// of resolves rp for r. An IP address is no relying party id (WebAuthn
// takes a domain name only): the person is told to open the console at
// a name.
func (rp relyingParty) of(r *http.Request) (relyingID, error) {
	origin := rp.origin
	if origin == "" {
		scheme := "http"
		if rp.tls {
			scheme = "https"
		}
		origin = scheme + "://" + r.Host
	}
	u, err := url.Parse(origin)
	if err != nil || u.Hostname() == "" {
		return relyingID{}, &api.Error{Code: api.ErrBadRequest, Field: "origin", Message: "the console's origin is not a URL; set DEADLETTER_CONSOLE_ORIGIN"}
	}
	if net.ParseIP(u.Hostname()) != nil {
		return relyingID{}, &api.Error{Code: api.ErrBadRequest, Field: "origin",
			Message: "passkeys work only at a name, not at an IP address: open the console at its name (on this machine http://localhost" + portOf(u) + "/) or set DEADLETTER_CONSOLE_ORIGIN"}
	}
	return relyingID{origin: u.Scheme + "://" + u.Host, rpID: u.Hostname()}, nil
}

// portOf is ":port" of u, or "".
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return ":" + p
	}
	return ""
}

// creationTTL is how long a passkey creation's challenge is good for.
const creationTTL = 5 * time.Minute

// passkeysData is the Passkeys page.
type passkeysData struct {
	Person string
	// RPID and Origin are the relying party passkeys are made for;
	// RPErr says why none can be made here.
	RPID, Origin, RPErr string
	// Label is the label typed (kept after a refusal).
	Label string
	// Registration is the created passkey's registration text, Command
	// the administrator's command registering it.
	Registration, Command string
	Key                   *api.DecisionKey
}

func (p *passkeyPages) data(r *http.Request, s *session) *passkeysData {
	d := &passkeysData{Person: access.PersonOf(s.user)}
	if id, err := p.rp.of(r); err != nil {
		d.RPErr = codedError(err).Message
	} else {
		d.RPID, d.Origin = id.rpID, id.origin
	}
	return d
}

func (p *passkeyPages) handlePasskeys(w http.ResponseWriter, r *http.Request, s *session) {
	v := newView(s, "Passkeys", "passkeys", p.data(r, s))
	p.render(w, r, http.StatusOK, "passkeys", v)
}

// creationOptions is navigator.credentials.create's publicKey member
// (binary members base64url; static/passkey.js decodes them).
type creationOptions struct {
	Challenge string `json:"challenge"`
	RP        struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"rp"`
	User struct {
		ID          string `json:"id"`
		Name        string `json:"name"`
		DisplayName string `json:"displayName"`
	} `json:"user"`
	Algorithms []int64 `json:"algorithms"`
	// ResidentKey is "required" (a passkey: the browser finds it without
	// a user name); UserVerification "preferred" at creation (the
	// signature of a decision requires it).
	ResidentKey      string     `json:"residentKey"`
	UserVerification string     `json:"userVerification"`
	Attestation      string     `json:"attestation"`
	TimeoutMS        int        `json:"timeout"`
	Error            *api.Error `json:"error,omitempty"`
}

// userHandle is the WebAuthn user id of a person: a hash of the person's
// name (no name in the authenticator's user handle).
func userHandle(person string) string {
	h := sha256.Sum256([]byte("deadletter person\n" + person))
	return base64.RawURLEncoding.EncodeToString(h[:16])
}

// handleOptions answers the options of a passkey's creation, with a new
// challenge kept in the session (one creation at a time, creationTTL).
func (p *passkeyPages) handleOptions(w http.ResponseWriter, r *http.Request, s *session) {
	var o creationOptions
	status := http.StatusOK
	if id, err := p.rp.of(r); err != nil {
		o.Error, status = codedError(err), http.StatusBadRequest
	} else {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		o.Challenge = base64.RawURLEncoding.EncodeToString(b)
		s.setCreation(o.Challenge, p.now())
		person := access.PersonOf(s.user)
		o.RP.ID, o.RP.Name = id.rpID, "deadletter console"
		o.User.ID, o.User.Name, o.User.DisplayName = userHandle(person), person, person
		o.Algorithms = decision.PasskeyAlgorithms()
		o.ResidentKey, o.UserVerification, o.Attestation, o.TimeoutMS = "required", "preferred", "none", 120_000
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(o)
}

// handleCreate verifies a passkey created in the browser and shows its
// registration text and the administrator's command.
func (p *passkeyPages) handleCreate(w http.ResponseWriter, r *http.Request, s *session) {
	d := p.data(r, s)
	d.Label = strings.TrimSpace(r.PostFormValue("label"))
	err := p.create(r, s, d)
	p.log.Info("passkey created", "user", s.user, "key_id", keyIDOf(d.Key), "code", api.CodeOf(err))
	v := newView(s, "Passkeys", "passkeys", d)
	v.setErr(err)
	if err == nil {
		v.Notice = "Your passkey is made. It signs nothing until an administrator registers it: give them the command below."
	}
	p.render(w, r, statusOf(err), "passkeys", v)
}

// keyIDOf is a key's id for a log line ("" without a key).
func keyIDOf(k *api.DecisionKey) string {
	if k == nil {
		return ""
	}
	return safetext.LogID(k.ID)
}

func (p *passkeyPages) create(r *http.Request, s *session, d *passkeysData) error {
	id, err := p.rp.of(r)
	if err != nil {
		return err
	}
	challenge, ok := s.takeCreation(p.now(), creationTTL)
	if !ok {
		return api.BadField("passkey", "no passkey creation was started in the last %s; create it again", creationTTL)
	}
	if utf8.RuneCountInString(d.Label) > decision.MaxLabel {
		return api.BadField("label", "a label is at most %d characters", decision.MaxLabel)
	}
	var parts [2][]byte
	for i, f := range []string{"attestation_object", "client_data"} {
		if parts[i], err = base64.RawURLEncoding.DecodeString(r.PostFormValue(f)); err != nil || len(parts[i]) == 0 {
			return api.BadField(f, "the browser's answer is missing or not base64url; create the passkey again")
		}
	}
	k, err := decision.VerifyPasskeyCreation(decision.PasskeyCreation{ID: r.PostFormValue("credential_id"), AttestationObject: parts[0], ClientDataJSON: parts[1]},
		challenge, id.rpID, id.origin, d.Label, p.now())
	if err != nil {
		return &api.Error{Code: api.ErrBadRequest, Field: "passkey", Message: err.Error(), Err: err}
	}
	d.Key = &k
	d.Registration = decision.PasskeyRegistration(k)
	d.Command = "deadletter people key add " + shellWord(d.Person) + " --passkey " + d.Registration
	return nil
}

// shellWord is s as one POSIX shell word: as it is when it holds only
// safe characters, else in single quotes.
func shellWord(s string) string {
	safe := s != ""
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-+@:/=", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
