package approval

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/deadletter/deadletter/shared/api"
)

// Proof of a signature (issue #28, I4). APPROVALS is a key-value bucket:
// whoever may write it could write an entry already marked approved. An
// approval is therefore executed only with a proof that only the path that
// re-authenticated the approver can make: Store.Approve, after the server
// accepted the approver's password, signs the decision with the approval
// key (an ed25519 nkey whose seed only the approval owner, the redriver,
// holds) over the request's digest, the requester, the decider, the
// meaning and the decision time. Every executor verifies the proof against
// the public key of its own configuration (never one read from a store)
// and matches it with the request and the decision in AUDIT
// (Store.Proven); an approval stored approved without a valid proof is
// never executed, it is refused (Store.Refuse).

// ErrUnproven: an approval marked approved carries no valid proof.
var ErrUnproven = errors.New("approval: no valid proof of the signature")

// Signer signs approval decisions (the approval owner's key).
type Signer struct{ kp nkeys.KeyPair }

// NewSigner returns the signer of an nkey seed (Secrets.ApprovalSeed).
func NewSigner(seed []byte) (*Signer, error) {
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
	if err != nil {
		return nil, fmt.Errorf("approval: signing seed: %w", err)
	}
	return &Signer{kp: kp}, nil
}

// NewEphemeralSigner returns a signer with a key of its own, for a process
// with no configured seed: only a verifier given its PublicKey accepts
// its proofs.
func NewEphemeralSigner() (*Signer, error) {
	kp, err := nkeys.CreateServer()
	if err != nil {
		return nil, fmt.Errorf("approval: signing key: %w", err)
	}
	return &Signer{kp: kp}, nil
}

// SignerFromFile reads a seed file (the deployment kit's approval.seed).
func SignerFromFile(path string) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("approval: signing seed: %w", err)
	}
	return NewSigner(b)
}

// PublicKey is the signer's public key (what verifiers are configured
// with).
func (s *Signer) PublicKey() string {
	pub, _ := s.kp.PublicKey()
	return pub
}

// Verifier verifies proofs against one public key.
type Verifier struct {
	key string
	kp  nkeys.KeyPair
}

// NewVerifier returns the verifier of a public key.
func NewVerifier(pub string) (*Verifier, error) {
	pub = strings.TrimSpace(pub)
	kp, err := nkeys.FromPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("approval: verification key: %w", err)
	}
	return &Verifier{key: pub, kp: kp}, nil
}

// VerifierFromFile reads a public key file (the kit's approval.pub).
func VerifierFromFile(path string) (*Verifier, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("approval: verification key: %w", err)
	}
	return NewVerifier(string(b))
}

// Verifier returns the verifier of the signer's own key.
func (s *Signer) Verifier() *Verifier {
	v, _ := NewVerifier(s.PublicKey())
	return v
}

// Key is the public key verified against.
func (v *Verifier) Key() string { return v.key }

// requestPart is what RequestDigest covers: the request as asked for.
type requestPart struct {
	ID            string          `json:"id"`
	Action        string          `json:"action"`
	DLQID         string          `json:"dlq_id"`
	Domain        string          `json:"domain"`
	HoldID        string          `json:"hold_id"`
	Request       json.RawMessage `json:"request"`
	Payload       []byte          `json:"payload"`
	Requester     string          `json:"requester"`
	RequesterRole string          `json:"requester_role"`
	RequestedAt   time.Time       `json:"requested_at"`
	ExpiresAt     time.Time       `json:"expires_at"`
	ChainRecords  int             `json:"chain_records"`
}

// RequestDigest is the SHA-256 (hex) of a's request as asked for: its id,
// action, event or hold, request body, payload, requester and times, and
// the chain's length (JSON of those members in a fixed order).
func RequestDigest(a api.Approval) string {
	b, _ := json.Marshal(requestPart{
		ID: a.ID, Action: a.Action, DLQID: a.DLQID, Domain: a.Domain, HoldID: a.HoldID, Request: a.Request, Payload: a.Payload,
		Requester: a.Requester, RequesterRole: a.RequesterRole, RequestedAt: a.RequestedAt.UTC(), ExpiresAt: a.ExpiresAt.UTC(),
		ChainRecords: a.ChainRecords,
	})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// decisionPart is what a proof signs.
type decisionPart struct {
	Domain        string    `json:"domain"` // domain separation of the key's use
	ID            string    `json:"id"`
	RequestDigest string    `json:"request_digest"`
	Requester     string    `json:"requester"`
	Decider       string    `json:"decider"`
	Meaning       string    `json:"meaning"`
	DecidedAt     time.Time `json:"decided_at"`
	Decision      string    `json:"decision"`
}

// signedDomain separates the approval key's signatures from any other use.
const signedDomain = "deadletter approval decision v1"

// signed returns the bytes a proof signs for a and digest.
func signed(a api.Approval, digest string) ([]byte, error) {
	if a.DecidedAt == nil {
		return nil, fmt.Errorf("%w: %s has no decision time", ErrUnproven, a.ID)
	}
	return json.Marshal(decisionPart{
		Domain: signedDomain, ID: a.ID, RequestDigest: digest, Requester: a.Requester, Decider: a.Decider,
		Meaning: a.Meaning, DecidedAt: a.DecidedAt.UTC(), Decision: api.ApprovalApproved,
	})
}

// Sign returns the proof of approved approval a.
func (s *Signer) Sign(a api.Approval) (api.ApprovalProof, error) {
	digest := RequestDigest(a)
	b, err := signed(a, digest)
	if err != nil {
		return api.ApprovalProof{}, err
	}
	sig, err := s.kp.Sign(b)
	if err != nil {
		return api.ApprovalProof{}, fmt.Errorf("approval: sign %s: %w", a.ID, err)
	}
	return api.ApprovalProof{RequestDigest: digest, Key: s.PublicKey(), Signature: base64.RawURLEncoding.EncodeToString(sig)}, nil
}

// Verify checks a's proof: present, over a's own request digest and
// decision, signed by the verifier's key. It returns an error wrapping
// ErrUnproven that says what is wrong (no value of the request).
func (v *Verifier) Verify(a api.Approval) error {
	if v == nil {
		return fmt.Errorf("%w: no verification key is configured", ErrUnproven)
	}
	p := a.Proof
	switch {
	case p == nil || p.Signature == "":
		return fmt.Errorf("%w: %s carries no proof", ErrUnproven, a.ID)
	case a.Decider == "" || a.Meaning == "" || a.DecidedAt == nil:
		return fmt.Errorf("%w: %s names no decider, meaning or decision time", ErrUnproven, a.ID)
	case p.RequestDigest != RequestDigest(a):
		return fmt.Errorf("%w: %s: the request differs from the one signed", ErrUnproven, a.ID)
	}
	sig, err := base64.RawURLEncoding.DecodeString(p.Signature)
	if err != nil {
		return fmt.Errorf("%w: %s: the signature does not decode", ErrUnproven, a.ID)
	}
	b, err := signed(a, p.RequestDigest)
	if err != nil {
		return err
	}
	if err := v.kp.Verify(b, sig); err != nil {
		return fmt.Errorf("%w: %s: the signature is not the approval key's", ErrUnproven, a.ID)
	}
	return nil
}
