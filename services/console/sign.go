package console

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/safetext"
)

// Decisions signed with a passkey (issue #38). Approve, reject, release,
// dismiss and the lift of a hold are signed in the browser by the
// person's passkey (static/passkey.js): when the person sends a decision
// form, the page asks the console for the decision (POST to the form's
// action followed by /challenge), shows it, has navigator.credentials.get
// sign its challenge (decision.Challenge: the decision's digest) and
// posts the assertion with the form. The console rebuilds the decision
// from the services' state with the meaning and the time signed, checks
// that the assertion's challenge is that decision's, and sends it as the
// request's Signed; the executors check the signature against the
// person's registered key, role and state (decision.Verify and the
// registry). The console holds no key and verifies no signature itself:
// it has no registry, and a check it made could be skipped by anyone
// calling the services directly.

// signWindow is how long ago a decision may have been signed when the
// console sends it (a person who left the passkey prompt open signs
// again); signSkew is how far in the future its time may be.
const (
	signWindow = 5 * time.Minute
	signSkew   = 30 * time.Second
)

// Form fields of a signed decision (static/passkey.js fills them).
const (
	fieldSignedAt = "signed_at"
	fieldKeyID    = "passkey_id"
	fieldAuthData = "passkey_authenticator_data"
	fieldClient   = "passkey_client_data"
	fieldSig      = "passkey_signature"
)

// decisionMaker builds the decision a form asks for, with the meaning
// typed, signed at at: read from the services' state as the person, as
// the executor will rebuild it.
type decisionMaker func(r *http.Request, s *session, meaning string, at time.Time) (api.Decision, error)

// errOwnRequest: the person deciding asked for the approval (one of
// their logins did).
var errOwnRequest = errors.New("console: approving one's own request")

// chainHead is the hash of the last record of a record's chain, as the
// person reads it (audit.get without the payload).
func (w web) chainHead(r *http.Request, s *session, dlqID, domain string) (string, error) {
	rep, err := call[api.GetRequest, api.GetReply](r.Context(), w.rq, s, api.AuditGet, api.GetRequest{DLQID: dlqID, Domain: domain})
	if err != nil {
		return "", err
	}
	return rep.State.LastHash, nil
}

// approvalDecision makes the decision of approving or rejecting (action)
// the approval the path names: its request digest (approval.RequestDigest
// of the approval as read) and the head of the chain it acts on as the
// approval names it (what the approver reviewed). A record that moved on
// since the request is not refused here: the redriver refuses the signed
// approval as stale and records it so (refused, STALE, never executed),
// where a refusal of the console's own would leave it pending. Approving
// one's own request is refused before anything is signed
// (SELF_APPROVAL, as the redriver refuses it whatever the console does).
func (w web) approvalDecision(action string) decisionMaker {
	return func(r *http.Request, s *session, meaning string, at time.Time) (api.Decision, error) {
		id := r.PathValue("id")
		rep, err := call[api.ApprovalGetRequest, api.ApprovalReply](r.Context(), w.rq, s, api.ApprovalGet, api.ApprovalGetRequest{ID: id})
		if err != nil {
			return api.Decision{}, err
		}
		if a := rep.Approval; action == api.DecisionApprove && access.SamePerson(s.user, a.Requester) {
			return api.Decision{}, api.Wrap(api.ErrSelfApproval, errOwnRequest,
				"you asked for this request yourself (as "+a.Requester+"): a second person must approve it")
		}
		return decision.ForApproval(rep.Approval, action, meaning, access.PersonOf(s.user), s.role, at), nil
	}
}

// recordDecision makes the decision of a direct request on the record
// the path names (release, dismiss): the digest of req(meaning) and the
// record's chain head.
func (w web) recordDecision(action string, req func(r *http.Request, meaning string) any) decisionMaker {
	return func(r *http.Request, s *session, meaning string, at time.Time) (api.Decision, error) {
		id := r.PathValue("id")
		chain, err := w.chainHead(r, s, id, r.PostFormValue("domain"))
		if err != nil {
			return api.Decision{}, err
		}
		return decision.ForRecord(action, id, approval.DirectDigest(req(r, meaning)), chain, meaning, access.PersonOf(s.user), s.role, at), nil
	}
}

// holdDecision makes the decision of lifting the hold the path names:
// the digest of the lift request.
func holdDecision(r *http.Request, s *session, meaning string, at time.Time) (api.Decision, error) {
	req := liftRequest(r)
	req.Reason = meaning
	return decision.ForHold(req, access.PersonOf(s.user), s.role, at), nil
}

// challengeReply is what a decision form's /challenge answers: the
// decision to sign, its challenge, and the relying party the passkey
// belongs to.
type challengeReply struct {
	Decision  api.Decision `json:"decision"`
	Challenge string       `json:"challenge"`
	RPID      string       `json:"rp_id"`
	SignedAt  string       `json:"signed_at"`
	// Error is a refusal (a missing meaning, a service's code).
	Error *api.Error `json:"error,omitempty"`
}

// handleChallenge answers a decision form's /challenge: the decision
// make builds with the form's meaning (field meaningField) at the
// console's time, as JSON for static/passkey.js.
func (w web) handleChallenge(rw http.ResponseWriter, r *http.Request, s *session, rp relyingParty, meaningField string, make decisionMaker) {
	var rep challengeReply
	status := http.StatusOK
	meaning := strings.TrimSpace(r.PostFormValue(meaningField))
	id, err := rp.of(r)
	if err == nil && meaning == "" {
		err = api.BadField(meaningField, "say what your signature means")
	}
	if err == nil {
		var d api.Decision
		d, err = make(r, s, meaning, w.now())
		rep = challengeReply{Decision: d, Challenge: decision.Challenge(d), RPID: id.rpID, SignedAt: d.At.Format(time.RFC3339)}
	}
	if err != nil {
		rep = challengeReply{Error: codedError(err)}
		status = statusOf(err)
		if status == http.StatusBadGateway && api.AsError(err) == nil {
			status = http.StatusServiceUnavailable
		}
	}
	w.log.Info("decision challenge", "user", s.user, "path", safetext.LogID(r.URL.Path), "code", api.CodeOf(err))
	rw.Header().Set("Content-Type", "application/json; charset=utf-8")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(rep)
}

// codedError is err as the page shows it (a service's code, else
// UNAVAILABLE).
func codedError(err error) *api.Error {
	if e := api.AsError(err); e != nil {
		return &api.Error{Code: e.Code, Field: e.Field, Message: e.Message}
	}
	return &api.Error{Code: api.ErrUnavailable, Message: "the service did not answer; retry"}
}

// errNotSigned: a decision form posted without the passkey's signature.
var errNotSigned = errors.New("console: the decision is not signed")

// signedOf reads the passkey's assertion posted with a decision form,
// rebuilds the decision (make) with the meaning and the time signed, and
// returns it signed. It refuses an assertion whose challenge is not the
// rebuilt decision's (the approval or the record changed while the
// person signed) and a signature older than signWindow. A form without
// an assertion returns nil and errNotSigned.
func (w web) signedOf(r *http.Request, s *session, meaning string, make decisionMaker) (*api.SignedDecision, error) {
	keyID := r.PostFormValue(fieldKeyID)
	if keyID == "" && r.PostFormValue(fieldSig) == "" {
		return nil, errNotSigned
	}
	if id, err := base64.RawURLEncoding.DecodeString(keyID); err != nil || len(id) == 0 {
		return nil, api.BadField(fieldKeyID, "the passkey's credential id is missing or not base64url; sign again")
	}
	at, err := time.Parse(time.RFC3339, r.PostFormValue(fieldSignedAt))
	if err != nil {
		return nil, api.BadField(fieldSignedAt, "the time of the signature is missing or unreadable; sign again")
	}
	if now := w.now(); now.Sub(at) > signWindow || at.Sub(now) > signSkew {
		return nil, api.BadField(fieldSignedAt, "the signature was made at %s, more than %s from now; sign again", at.UTC().Format(time.RFC3339), signWindow)
	}
	var parts [3][]byte
	for i, f := range []string{fieldAuthData, fieldClient, fieldSig} {
		if parts[i], err = base64.RawURLEncoding.DecodeString(r.PostFormValue(f)); err != nil || len(parts[i]) == 0 {
			return nil, api.BadField(f, "the passkey's answer is missing or not base64url; sign again")
		}
	}
	var client struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(parts[1], &client) != nil || client.Type != "webauthn.get" {
		return nil, api.BadField(fieldClient, "the passkey's client data is not an assertion's")
	}
	d, err := make(r, s, meaning, at)
	if err != nil {
		return nil, err
	}
	if client.Challenge != decision.Challenge(d) {
		return nil, &api.Error{Code: api.ErrConflict, Field: "passkey",
			Message: "what your passkey signed is not this decision as it stands now (it changed while you signed, or the meaning differs); sign again"}
	}
	return &api.SignedDecision{Decision: d, Signature: api.DecisionSignature{
		Scheme: api.SchemePasskey, KeyID: keyID, Signature: parts[2], AuthenticatorData: parts[0], ClientDataJSON: parts[1],
	}}, nil
}

// signedFor is signedOf for a decision form's handler: the signed
// decision, nil when the form carries no signature (the executor then
// refuses it with its code: a decision needs its person's signature), or
// the refusal to show.
func (w web) signedFor(r *http.Request, s *session, meaning string, make decisionMaker) (*api.SignedDecision, error) {
	sd, err := w.signedOf(r, s, meaning, make)
	if errors.Is(err, errNotSigned) {
		return nil, nil
	}
	return sd, err
}
