package approval

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/trail"
)

// MaxList is the most approvals List returns (and its default).
const MaxList = 1000

// The APPROVALS bucket's stream and key subjects: List reads the bucket
// with direct gets on its stream (kv.ListKeys would create a consumer, a
// right the redriver does not have).
const (
	approvalsStream = "KV_" + subjects.ApprovalsBucket
	approvalsPrefix = "$KV." + subjects.ApprovalsBucket + "."
	kvOperation     = "KV-Operation"
)

// auditObject is the AUDIT object kind of an approval's actions.
const auditObject = "approval"

// Audit actions of an approval (api.AuditAction.Action).
const (
	AuditRequested = "requested"
	AuditApproved  = "approved"
	AuditRejected  = "rejected"
	AuditExecuted  = "executed"
	// AuditRefused: an approval stored as approved without a decision
	// signed by its person that checks (a forgery) was refused, never
	// executed.
	AuditRefused = "refused"
)

// Store keeps the approvals in the APPROVALS bucket and writes each
// transition to AUDIT. It needs a connection that may write APPROVALS and
// publish audit.actions.> (the redriver's).
type Store struct {
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	checker Checker
	// checked holds the approvals (id and revision) whose signed decision
	// the registry accepted: a sweep checks each stored entry once.
	checked sync.Map
	limits  Limits
	now     func() time.Time
	log     *slog.Logger
}

// Limits bound the pending approvals (issue #28: bounded by
// construction). Zero: no limit.
type Limits struct {
	// PerRequester is the most pending approvals one person may have.
	PerRequester int
	// PerChain is the most pending approvals of one chain (one dlq id),
	// or of one legal hold's lift.
	PerChain int
}

// Config configures a Store.
type Config struct {
	// Checker checks the decisions signed by their person (Approve,
	// Reject, Proven, Unproven) against the people registry: required
	// (decision.Registry; AuditRegistry reads the same records).
	Checker Checker
	// Limits bound pending approvals (Create).
	Limits Limits
	// Logger receives ids and statuses only (nil: discard).
	Logger *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Open binds the APPROVALS bucket (provisioned by streams.EnsureCore).
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	if cfg.Checker == nil {
		return nil, errors.New("approval: a Checker of signed decisions is required")
	}
	kv, err := js.KeyValue(ctx, subjects.ApprovalsBucket)
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %w", ErrUnavailable, subjects.ApprovalsBucket, err)
	}
	s := &Store{js: js, kv: kv, checker: cfg.Checker, limits: cfg.Limits, now: cfg.Now, log: cfg.Logger}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Request is an action to hold for approval (Store.Create).
type Request struct {
	// Action is one of the api.Action* constants; DLQID and Domain the
	// event it acts on (empty for a drain and a hold lift); HoldID the
	// hold a hold lift lifts; ChainRecords the number of records of its
	// chain when the action was asked for, ChainHead the AuditHash of its
	// last record then (what the approver's signed decision names).
	Action       string
	DLQID        string
	Domain       string
	HoldID       string
	ChainRecords int
	ChainHead    string
	// Body is the request to execute once approved (a JSON value).
	Body json.RawMessage
	// Payload is a correction's corrected payload as sent (kept byte for
	// byte: Body is re-encoded compacted when stored).
	Payload []byte
	// Requester asked for it, for Reason.
	Requester access.Identity
	Reason    string
	// Decision is Needs' answer (its reasons and diff are kept).
	Decision Decision
}

// Create stores a pending approval of req, expiring after p's pending TTL,
// and writes its request whole to REQUESTS and then to AUDIT (with the
// request's digest, which a signed decision names) first: without those
// records nothing is stored. The same
// request asked again by the same person while pending (same action,
// event or hold, body and payload) answers the pending approval. A
// requester (a person, whichever of their users asks), or a chain, with
// Limits' pending approvals already is refused (ErrLimit), however many
// requests run at once: the entry is written only if no other write
// reached the bucket since the count (createAt), else counted again. A
// request that loses that race and is then refused leaves its AUDIT
// request without an entry: never executed (Proven needs the entry).
func (s *Store) Create(ctx context.Context, req Request, p Policy) (api.Approval, error) {
	switch {
	case !slices.Contains(Actions(), req.Action):
		return api.Approval{}, badField("action", "must be one of "+strings.Join(Actions(), ", "))
	case req.Requester.User == "":
		return api.Approval{}, fmt.Errorf("%w: no requester", ErrForbidden)
	case len(req.Body) == 0 || !json.Valid(req.Body):
		return api.Approval{}, badField("request", "must be a JSON value")
	case req.ChainRecords < 0:
		return api.Approval{}, badField("chain_records", "must not be negative")
	case req.Action == api.ActionHoldLift && !api.ValidHoldID(req.HoldID):
		return api.Approval{}, badField("hold_id", "a hold lift names its hold")
	}
	ttl, err := PendingTTL(p)
	if err != nil {
		return api.Approval{}, err
	}
	now := s.now().UTC()
	id, err := newID(now)
	if err != nil {
		return api.Approval{}, err
	}
	var body bytes.Buffer
	if err := json.Compact(&body, req.Body); err != nil {
		return api.Approval{}, badField("request", "must be a JSON value")
	}
	a := api.Approval{
		ID: id, Action: req.Action, DLQID: req.DLQID, Domain: req.Domain, HoldID: req.HoldID, Status: api.ApprovalPending,
		Request: body.Bytes(), Payload: req.Payload, Reasons: req.Decision.Reasons, Diff: req.Decision.Diff, DiffFields: req.Decision.DiffFields(),
		Requester: req.Requester.User, RequesterRole: string(req.Requester.Role), RequestedAt: now, Reason: req.Reason,
		ExpiresAt: now.Add(ttl), ChainRecords: req.ChainRecords, ChainHead: req.ChainHead,
	}
	if len(a.DiffFields) == 0 {
		a.DiffFields = nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return api.Approval{}, fmt.Errorf("approval: encode: %w", err)
	}
	audited := false
	for attempt := 0; ; attempt++ {
		stored, last, err := s.scanAt(ctx)
		if err != nil {
			return api.Approval{}, fmt.Errorf("%w: list approvals: %w", ErrUnavailable, err)
		}
		if same, err := s.admit(ctx, stored, a); err != nil || same.ID != "" {
			return same, err
		}
		if !audited {
			// The request whole goes to REQUESTS first (write-once: the
			// source a lost or altered entry is restored from), then its
			// digest to AUDIT, then the entry.
			if err := s.writeRequest(ctx, a.ID, b); err != nil {
				return api.Approval{}, err
			}
			if err := s.Audit(ctx, a, AuditRequested); err != nil {
				return api.Approval{}, err
			}
			audited = true
		}
		rev, err := s.createAt(ctx, id, b, last)
		if errors.Is(err, errBucketMoved) && attempt < maxAdmitAttempts {
			// Another write reached the bucket since the scan: count
			// again (the limits hold whatever runs concurrently).
			select {
			case <-ctx.Done():
				return api.Approval{}, fmt.Errorf("%w: create %s: %w", ErrUnavailable, id, ctx.Err())
			case <-time.After(admitBackoff(attempt)):
			}
			continue
		}
		if err != nil {
			return api.Approval{}, fmt.Errorf("%w: create %s: %w", ErrUnavailable, id, err)
		}
		a.Revision = rev
		s.log.InfoContext(ctx, "approval requested", "approval", a)
		return a, nil
	}
}

// writeRequest writes approval id's request as created (b: the entry's
// first value) to REQUESTS, once: the write-once source of the entry's
// request body, payload, identity diff, requester and chain head, which
// AUDIT holds only as a digest (they may carry a payload's values).
// REQUESTS refuses a second message on the subject; a retry of the same
// request finds its own and goes on.
func (s *Store) writeRequest(ctx context.Context, id string, b []byte) error {
	err := streams.WriteOnce(ctx, s.js, streams.RequestsStream, streams.ApprovalRequestSubject(id), "request-"+id, b, nil)
	if err != nil {
		return fmt.Errorf("%w: record the request of %s in %s: %w", ErrUnavailable, id, streams.RequestsStream, err)
	}
	return nil
}

// maxAdmitAttempts bounds how often Create counts again after another
// write reached the bucket between its count and its write.
const maxAdmitAttempts = 200

// admitBackoff is a short random pause before the attempt after attempt,
// so that concurrent creators do not keep colliding.
func admitBackoff(attempt int) time.Duration {
	b := make([]byte, 1)
	_, _ = rand.Read(b)
	return time.Duration(1+min(attempt, 20)) * time.Duration(100+int(b[0])*4) * time.Microsecond
}

// errBucketMoved: the bucket took another write after the scan a create
// was admitted on.
var errBucketMoved = errors.New("approval: the bucket changed since it was counted")

// createAt stores a new approval entry, on the condition that the last
// write to the whole bucket is still last (the scan's): the server
// refuses it otherwise (errBucketMoved). The limits are counted on that
// scan, so no two creates are admitted on the same count: a
// compare-and-set on the bucket's revision, checked by the server, which
// holds across every redriver instance.
func (s *Store) createAt(ctx context.Context, id string, b []byte, last uint64) (uint64, error) {
	m := nats.NewMsg(approvalsPrefix + id)
	m.Data = b
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	m.Header.Set(expectedLastSubjSeqSubject, approvalsPrefix+">")
	ack, err := s.js.PublishMsg(ctx, m)
	if isWrongLastSeq(err) {
		return 0, errBucketMoved
	}
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// expectedLastSubjSeqSubject names the subject (a wildcard here) whose
// last sequence Nats-Expected-Last-Subject-Sequence checks (nats-server
// 2.11; nats.go has no constant for it).
const expectedLastSubjSeqSubject = "Nats-Expected-Last-Subject-Sequence-Subject"

// admit returns the pending approval of stored identical to a (same
// requester, action, event or hold, chain length, body and payload), if
// any, else checks the limits on a's requester (a person, whichever of
// their users asks: access.SamePerson) and chain (ErrLimit). Create
// writes only if the bucket is still as stored was read (createAt).
func (s *Store) admit(ctx context.Context, stored map[string]api.Approval, a api.Approval) (api.Approval, error) {
	byRequester, byChain := 0, 0
	for _, e := range stored {
		if e.Status != api.ApprovalPending || !s.now().Before(e.ExpiresAt) {
			continue
		}
		if sameRequest(e, a) {
			s.log.InfoContext(ctx, "approval requested again: the pending one answers", "approval", e)
			return e, nil
		}
		if a.Action == api.ActionCorrect && e.Action == api.ActionCorrect && e.DLQID == a.DLQID {
			// One open correction per record: whatever the other one
			// says, only one can be executed on the chain as it is.
			s.log.InfoContext(ctx, "CORRECTION_PENDING", "approval_id", e.ID, "dlq_id", a.DLQID, "requester", a.Requester)
			return api.Approval{}, &PendingError{Pending: e}
		}
		if access.SamePerson(e.Requester, a.Requester) {
			byRequester++
		}
		if (a.DLQID != "" && e.DLQID == a.DLQID) || (a.HoldID != "" && e.HoldID == a.HoldID) {
			byChain++
		}
	}
	switch {
	case s.limits.PerRequester > 0 && byRequester >= s.limits.PerRequester:
		return api.Approval{}, fmt.Errorf("%w: %s has %d pending approvals (at most %d)", ErrLimit, a.Requester, byRequester, s.limits.PerRequester)
	case s.limits.PerChain > 0 && byChain >= s.limits.PerChain:
		return api.Approval{}, fmt.Errorf("%w: the chain has %d pending approvals (at most %d)", ErrLimit, byChain, s.limits.PerChain)
	}
	return api.Approval{}, nil
}

// sameRequest reports whether pending approval e is the request a asked
// again (same requester, action, event or hold, chain length, body and
// payload).
func sameRequest(e, a api.Approval) bool {
	return e.Requester == a.Requester && e.Action == a.Action && e.DLQID == a.DLQID && e.HoldID == a.HoldID &&
		e.ChainRecords == a.ChainRecords && bytes.Equal(e.Request, a.Request) && bytes.Equal(e.Payload, a.Payload)
}

// PendingCorrection refuses a correction of req.DLQID while another one
// of that record is pending and unexpired (a *PendingError naming it),
// whether or not req itself needs a second person: one open correction
// per record. The same request asked again by its requester is no other
// one (Create answers the pending approval). Create checks the same
// under the bucket's compare-and-set, so of two concurrent requests that
// both need approval one is refused.
func (s *Store) PendingCorrection(ctx context.Context, req Request) error {
	if req.DLQID == "" {
		return nil
	}
	var body bytes.Buffer
	if len(req.Body) > 0 {
		if err := json.Compact(&body, req.Body); err != nil {
			return badField("request", "must be a JSON value")
		}
	}
	a := api.Approval{Action: api.ActionCorrect, DLQID: req.DLQID, Requester: req.Requester.User, ChainRecords: req.ChainRecords,
		Request: body.Bytes(), Payload: req.Payload}
	stored, err := s.scan(ctx)
	if err != nil {
		return fmt.Errorf("%w: list approvals: %w", ErrUnavailable, err)
	}
	for _, e := range stored {
		if e.Status != api.ApprovalPending || !s.now().Before(e.ExpiresAt) || e.Action != api.ActionCorrect || e.DLQID != req.DLQID {
			continue
		}
		if sameRequest(e, a) {
			continue
		}
		return &PendingError{Pending: e}
	}
	return nil
}

// Pending returns the pending, unexpired approvals of the event dlqID,
// oldest first (a record page shows its pending correction).
func (s *Store) Pending(ctx context.Context, dlqID string) ([]api.Approval, error) {
	stored, err := s.scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: list approvals: %w", ErrUnavailable, err)
	}
	var out []api.Approval
	for _, e := range stored {
		if e.DLQID == dlqID && e.Status == api.ApprovalPending && s.now().Before(e.ExpiresAt) {
			out = append(out, e)
		}
	}
	sortList(out)
	return out, nil
}

// newID returns a new approval id: "appr-<UTC time>-<64 random bits>".
func newID(now time.Time) (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("approval: id: %w", err)
	}
	return "appr-" + now.Format("20060102T150405") + "-" + hex.EncodeToString(b), nil
}

// validID reports whether id could name an approval (a key of the bucket
// and a subject token).
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Get returns the approval id (with Status expired for a pending one past
// its expiry).
func (s *Store) Get(ctx context.Context, id string) (api.Approval, error) {
	a, err := s.get(ctx, id)
	if err != nil {
		return api.Approval{}, err
	}
	return s.view(a), nil
}

// get reads the approval id as stored (Revision set).
func (s *Store) get(ctx context.Context, id string) (api.Approval, error) {
	if !validID(id) {
		return api.Approval{}, badField("id", "is not an approval id")
	}
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return api.Approval{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return api.Approval{}, fmt.Errorf("%w: read %s: %w", ErrUnavailable, id, err)
	}
	var a api.Approval
	if err := json.Unmarshal(e.Value(), &a); err != nil {
		return api.Approval{}, fmt.Errorf("approval %s does not decode: %w", id, err)
	}
	a.Revision = e.Revision()
	return a, nil
}

// view is a stored approval as shown: a pending one past its expiry is
// expired.
func (s *Store) view(a api.Approval) api.Approval {
	if a.Status == api.ApprovalPending && !s.now().Before(a.ExpiresAt) {
		a.Status = api.ApprovalExpired
	}
	// An approved entry is shown refused unless it carries its approver's
	// signed decision of itself (an executed one is history: approvals
	// executed before decisions were signed by their person carry none).
	if a.Status == api.ApprovalApproved {
		if err := signedShape(a); err != nil {
			a.Status, a.Refused = api.ApprovalRefused, err.Error()
		}
	}
	return a
}

// approverRole is the role an approval is decided in.
var approverRole = string(access.RoleApprover)

// signedShape checks, without the registry, that approved (or executed)
// approval a carries its approver's signed decision of itself: the
// decision ForApproval rebuilds from the entry, signed by the decider's
// person, with the entry's meaning and time. It wraps ErrUnproven.
func signedShape(a api.Approval) error {
	if a.Decider == "" || a.Meaning == "" || a.DecidedAt == nil {
		return fmt.Errorf("%w: %s names no decider, meaning or decision time", ErrUnproven, a.ID)
	}
	want := ForApproval(a, api.DecisionApprove, "", access.PersonOf(a.Decider), approverRole, time.Time{})
	if err := matches(want, a.Signed); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnproven, a.ID, err)
	}
	if a.Signed.Decision.Meaning != a.Meaning || !a.Signed.Decision.At.Equal(*a.DecidedAt) {
		return fmt.Errorf("%w: %s: %w: the meaning or time differs from the one signed", ErrUnproven, a.ID, decision.ErrMismatch)
	}
	if access.SamePerson(a.Decider, a.Requester) {
		return fmt.Errorf("%w: %s: the decider %s is the requester %s", ErrUnproven, a.ID, a.Decider, a.Requester)
	}
	return nil
}

// checkApproved is signedShape and the registry's check of a's signed
// decision (the person's key, role and state at its time). A refusal
// wraps ErrUnproven; an unreadable registry is ErrUnavailable.
func (s *Store) checkApproved(ctx context.Context, a api.Approval) error {
	if err := signedShape(a); err != nil {
		return err
	}
	key := a.ID + "@" + strconv.FormatUint(a.Revision, 10) + "@" + string(Raw(a.Signed))
	if _, ok := s.checked.Load(key); ok && a.Revision != 0 {
		return nil
	}
	if err := check(ctx, s.checker, *a.Signed); err != nil {
		if unsigned(err) {
			return fmt.Errorf("%w: %s: %w", ErrUnproven, a.ID, err)
		}
		return err
	}
	if a.Revision != 0 {
		s.checked.Store(key, struct{}{})
	}
	return nil
}

// List returns the approvals of status ("" for all), pending first (oldest
// first, the next to expire), then the others newest first, at most limit
// (0 or above MaxList: MaxList).
func (s *Store) List(ctx context.Context, status string, limit int) (api.ApprovalListReply, error) {
	switch status {
	case "", api.ApprovalPending, api.ApprovalApproved, api.ApprovalExecuted, api.ApprovalRejected, api.ApprovalExpired, api.ApprovalRefused:
	default:
		return api.ApprovalListReply{}, badField("status", "is not an approval status")
	}
	if limit <= 0 || limit > MaxList {
		limit = MaxList
	}
	stored, err := s.scan(ctx)
	if err != nil {
		return api.ApprovalListReply{}, fmt.Errorf("%w: list approvals: %w", ErrUnavailable, err)
	}
	var out []api.Approval
	for _, a := range stored {
		if a = s.view(a); status == "" || a.Status == status {
			out = append(out, a)
		}
	}
	return finishList(out, limit)
}

// scan reads every approval as stored (its last revision), by id.
func (s *Store) scan(ctx context.Context) (map[string]api.Approval, error) {
	last, _, err := s.scanAt(ctx)
	return last, err
}

// scanAt is scan, and the sequence of the last message it read (0: none).
func (s *Store) scanAt(ctx context.Context) (map[string]api.Approval, uint64, error) {
	last := map[string]api.Approval{}
	var seq uint64
	err := streams.DirectGetAll(ctx, s.js, approvalsStream,
		streams.DirectRequest{Seq: 1, NextFor: approvalsPrefix + ">", Batch: 256}, func(m *jetstream.RawStreamMsg) error {
			seq = max(seq, m.Sequence)
			key, ok := strings.CutPrefix(m.Subject, approvalsPrefix)
			if !ok {
				return nil
			}
			if m.Header.Get(kvOperation) != "" {
				delete(last, key) // a delete or purge marker
				return nil
			}
			var a api.Approval
			if err := json.Unmarshal(m.Data, &a); err != nil {
				s.log.WarnContext(ctx, "approval does not decode", "approval_id", key)
				return nil
			}
			a.Revision = m.Sequence
			last[key] = a
			return nil
		})
	return last, seq, err
}

// sortList orders a list: pending first (oldest first, the next to
// expire), then the others newest first.
func sortList(out []api.Approval) {
	slices.SortFunc(out, func(a, b api.Approval) int {
		ap, bp := a.Status == api.ApprovalPending, b.Status == api.ApprovalPending
		switch {
		case ap && !bp:
			return -1
		case bp && !ap:
			return 1
		case ap:
			return cmp.Or(a.RequestedAt.Compare(b.RequestedAt), cmp.Compare(a.Revision, b.Revision), strings.Compare(a.ID, b.ID))
		}
		return cmp.Or(b.RequestedAt.Compare(a.RequestedAt), strings.Compare(b.ID, a.ID))
	})
}

// finishList sorts out and cuts it at limit.
func finishList(out []api.Approval, limit int) (api.ApprovalListReply, error) {
	sortList(out)
	rep := api.ApprovalListReply{Approvals: out}
	if len(out) > limit {
		rep.Approvals, rep.Truncated = out[:limit], true
	}
	if rep.Approvals == nil {
		rep.Approvals = []api.Approval{}
	}
	return rep, nil
}

// pending reads approval id and requires it to be pending and unexpired.
func (s *Store) pending(ctx context.Context, id string) (api.Approval, error) {
	a, err := s.get(ctx, id)
	if err != nil {
		return api.Approval{}, err
	}
	if a.Status != api.ApprovalPending {
		return api.Approval{}, fmt.Errorf("%w: %s is %s", ErrAlreadyDecided, id, a.Status)
	}
	if !s.now().Before(a.ExpiresAt) {
		return api.Approval{}, fmt.Errorf("%w: %s expired at %s", ErrExpired, id, a.ExpiresAt.Format(time.RFC3339))
	}
	return a, nil
}

// Approve approves approval id with approver's signed decision sd:
// approver must have the approver role and not be the requester (by
// person, whichever of their logins asked), and sd must be the decision
// ForApproval rebuilds from the approval as stored (api.DecisionApprove,
// its request digest and chain head, approver's person, the approver
// role), signed within MaxSkew of now with a key the registry gives the
// person then (CheckSigned). The approval must be pending and unexpired.
// The decision is a compare-and-set on the entry's revision: of two
// approvers, or of one approver's retries, exactly one call succeeds;
// the others get ErrAlreadyDecided. Only the caller that gets the
// approval back executes the action (see the package doc). The decision
// is then written to AUDIT, with sd whole; an error doing so is returned
// with the approval, which stands.
func (s *Store) Approve(ctx context.Context, id string, approver access.Identity, sd *api.SignedDecision) (api.Approval, error) {
	a, err := s.decide(ctx, id, approver, api.DecisionApprove, sd)
	if err != nil {
		return api.Approval{}, err
	}
	a.Status = api.ApprovalApproved
	if a, err = s.update(ctx, a); err != nil {
		return api.Approval{}, err
	}
	s.log.InfoContext(ctx, "approval signed", "approval", a, "approver", approver.User, "signed", *sd)
	return a, s.Audit(ctx, a, AuditApproved)
}

// Reject refuses approval id with decider's signed decision sd (as
// Approve, api.DecisionReject; sd's meaning says why). The approval must
// be pending and unexpired; it is never executed.
func (s *Store) Reject(ctx context.Context, id string, decider access.Identity, sd *api.SignedDecision) (api.Approval, error) {
	a, err := s.decide(ctx, id, decider, api.DecisionReject, sd)
	if err != nil {
		return api.Approval{}, err
	}
	a.Status = api.ApprovalRejected
	if a, err = s.update(ctx, a); err != nil {
		return api.Approval{}, err
	}
	s.log.InfoContext(ctx, "approval rejected", "approval", a, "decider", decider.User, "signed", *sd)
	return a, s.Audit(ctx, a, AuditRejected)
}

// decide checks who's signed decision sd (action) of pending approval
// id and returns the approval with its decider, time, meaning and sd.
func (s *Store) decide(ctx context.Context, id string, who access.Identity, action string, sd *api.SignedDecision) (api.Approval, error) {
	endpoint := api.ApprovalApprove
	if action == api.DecisionReject {
		endpoint = api.ApprovalReject
	}
	if !access.Allowed(endpoint, who.Role) {
		return api.Approval{}, fmt.Errorf("%w: deciding takes the role %v (the endpoint table)", ErrForbidden, access.EndpointRoles(endpoint))
	}
	if sd != nil && strings.TrimSpace(sd.Decision.Meaning) == "" {
		return api.Approval{}, badField("signed", "the decision states no meaning (what the signature means, or why)")
	}
	a, err := s.pending(ctx, id)
	if err != nil {
		return api.Approval{}, err
	}
	if action == api.DecisionApprove && access.SamePerson(who.User, a.Requester) {
		// One person, whichever of their role logins asked or signs.
		return api.Approval{}, fmt.Errorf("%w: %s is the person who requested %s (as %s)", ErrSelfApproval, who.User, id, a.Requester)
	}
	want := ForApproval(a, action, "", access.PersonOf(who.User), approverRole, time.Time{})
	if err := CheckSigned(ctx, s.checker, want, sd, s.now()); err != nil {
		s.log.WarnContext(ctx, "DECISION_UNSIGNED", "approval_id", id, "user", who.User, "action", action, "code", Code(err))
		return api.Approval{}, err
	}
	at := sd.Decision.At.UTC()
	a.Decider, a.DecidedAt, a.Meaning, a.Signed = who.User, &at, sd.Decision.Meaning, sd
	return a, nil
}

// MarkExecuted records that the approved action of approval id was
// executed, with its outcome (an api outcome or error code): an approved
// approval becomes executed, once (ErrAlreadyDecided otherwise).
func (s *Store) MarkExecuted(ctx context.Context, id, outcome string) (api.Approval, error) {
	a, err := s.get(ctx, id)
	if err != nil {
		return api.Approval{}, err
	}
	if a.Status != api.ApprovalApproved {
		return api.Approval{}, fmt.Errorf("%w: %s is %s, not approved", ErrAlreadyDecided, id, a.Status)
	}
	now := s.now().UTC()
	a.Status, a.ExecutedAt, a.Outcome = api.ApprovalExecuted, &now, outcome
	if a, err = s.update(ctx, a); err != nil {
		return api.Approval{}, err
	}
	return a, s.Audit(ctx, a, AuditExecuted)
}

// update stores a at its revision (compare-and-set). A refused write is
// ErrAlreadyDecided when the stored approval is no longer in a's previous
// state (someone decided first), else ErrConflict.
func (s *Store) update(ctx context.Context, a api.Approval) (api.Approval, error) {
	rev := a.Revision
	a.Revision = 0
	b, err := json.Marshal(a)
	if err != nil {
		return api.Approval{}, fmt.Errorf("approval: encode: %w", err)
	}
	next, err := s.kv.Update(ctx, a.ID, b, rev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		cur, gerr := s.get(ctx, a.ID)
		if gerr == nil && cur.Revision != rev {
			return api.Approval{}, fmt.Errorf("%w: %s changed to %s meanwhile", ErrAlreadyDecided, a.ID, cur.Status)
		}
		return api.Approval{}, fmt.Errorf("%w: %s", ErrConflict, a.ID)
	}
	if err != nil {
		return api.Approval{}, fmt.Errorf("%w: update %s: %w", ErrUnavailable, a.ID, err)
	}
	a.Revision = next
	return a, nil
}

// Audit writes approval a's action (AuditRequested, ...) to AUDIT, on
// subjects.AuditAction("approval", id), with the facts of the action and
// no request body or diff value. It is idempotent within AUDIT's
// de-duplication window (the message id is the approval's id and action),
// so a caller may retry it.
func (s *Store) Audit(ctx context.Context, a api.Approval, action string) error {
	d := AuditDetail{
		Action: a.Action, DLQID: a.DLQID, Domain: a.Domain, HoldID: a.HoldID, Requester: a.Requester, RequestedAt: a.RequestedAt,
		ExpiresAt: a.ExpiresAt, Reasons: a.Reasons, DiffFields: a.DiffFields, Outcome: a.Outcome,
	}
	switch action {
	case AuditRequested:
		d.RequestDigest = RequestDigest(a)
	case AuditApproved, AuditRejected:
		d.RequestDigest, d.Signed = RequestDigest(a), a.Signed
	}
	detail, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("approval: encode audit: %w", err)
	}
	act := api.AuditAction{Action: action, Object: auditObject, ObjectID: a.ID, Actor: a.Requester, Role: a.RequesterRole,
		At: a.RequestedAt, Reason: a.Reason, Detail: detail}
	switch action {
	case AuditApproved, AuditRejected:
		act.Actor, act.Role, act.At, act.Reason = a.Decider, string(access.RoleApprover), *a.DecidedAt, a.Meaning
	case AuditExecuted:
		act.Actor, act.Role, act.At, act.Reason = access.Redriver, "", *a.ExecutedAt, ""
	}
	if _, err := trail.Publish(ctx, s.js, act, a.ID+"-"+action); err != nil {
		return fmt.Errorf("%w: audit %s of %s: %w", ErrUnavailable, action, a.ID, err)
	}
	return nil
}

// AuditDetail is the Detail of an approval's audit action: ids, names,
// times and rule names, never a value of the request or of the diff.
type AuditDetail struct {
	Action      string    `json:"action"`
	DLQID       string    `json:"dlq_id,omitempty"`
	Domain      string    `json:"domain,omitempty"`
	HoldID      string    `json:"hold_id,omitempty"`
	Requester   string    `json:"requester"`
	RequestedAt time.Time `json:"requested_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	Reasons     []string  `json:"reasons,omitempty"`
	DiffFields  []string  `json:"diff_fields,omitempty"`
	Outcome     string    `json:"outcome,omitempty"`
	// RequestDigest is the request's digest (RequestDigest) on the
	// requested, approved and rejected actions; Signed the decider's
	// signed decision whole (approved, rejected); Refused why an
	// approval was refused.
	RequestDigest string              `json:"request_digest,omitempty"`
	Signed        *api.SignedDecision `json:"signed,omitempty"`
	Refused       string              `json:"refused,omitempty"`
}

// Proven checks that approval a, as stored, may be executed: it carries
// its approver's signed decision of itself, which the people registry
// accepts (checkApproved), and AUDIT holds its request with the same
// digest and its decision with the same signed decision. It returns an
// error wrapping ErrUnproven for an approval that must never be
// executed, ErrUnavailable when AUDIT could not be read or does not hold
// the decision yet (the approval owner writes it before it executes).
func (s *Store) Proven(ctx context.Context, a api.Approval) error {
	if a.Status != api.ApprovalApproved {
		return fmt.Errorf("%w: %s is %s, not approved", ErrAlreadyDecided, a.ID, a.Status)
	}
	if err := s.checkApproved(ctx, a); err != nil {
		return err
	}
	digest, signed := RequestDigest(a), Raw(a.Signed)
	requested, decided := false, false
	err := streams.ReadSubject(ctx, s.js, subjects.AuditStream, subjects.AuditAction(auditObject, a.ID), func(m *jetstream.RawStreamMsg) error {
		var act api.AuditAction
		var d AuditDetail
		if json.Unmarshal(m.Data, &act) != nil || act.Object != auditObject || act.ObjectID != a.ID || json.Unmarshal(act.Detail, &d) != nil {
			return nil
		}
		switch act.Action {
		case AuditRequested:
			requested = requested || (d.RequestDigest == digest && act.Actor == a.Requester)
		case AuditApproved:
			decided = decided || (d.RequestDigest == digest && bytes.Equal(Raw(d.Signed), signed) && act.Actor == a.Decider)
		}
		return nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("%w: read the AUDIT trail of %s: %w", ErrUnavailable, a.ID, err)
	case !requested:
		return fmt.Errorf("%w: %s: AUDIT holds no request with the signed digest", ErrUnproven, a.ID)
	case !decided:
		return fmt.Errorf("%w: %s: AUDIT does not hold the signed decision yet", ErrUnavailable, a.ID)
	}
	return nil
}

// Unproven returns the approvals stored as approved whose signed decision
// does not check (forgeries not refused yet: none is executed), oldest
// first. One the registry could not be read for is left for later. An
// executed entry is history (one executed before decisions were signed by
// their person carries none) and is not refused afterwards.
func (s *Store) Unproven(ctx context.Context) ([]api.Approval, error) {
	stored, err := s.scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: list approvals: %w", ErrUnavailable, err)
	}
	var out []api.Approval
	for _, a := range stored {
		if a.Status != api.ApprovalApproved {
			continue
		}
		if err := s.checkApproved(ctx, a); errors.Is(err, ErrUnproven) {
			a.Refused = err.Error()
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b api.Approval) int { return cmp.Compare(a.Revision, b.Revision) })
	return out, nil
}

// Refuse marks stored approval a (its Revision) refused, with why, and
// writes the refusal to AUDIT (AuditRefused, de-duplicated by the
// approval's id and revision). The entry keeps what was written, so
// the forgery stays visible. A refusal that lost its compare-and-set
// (the entry changed) is ErrConflict; the caller looks again.
func (s *Store) Refuse(ctx context.Context, a api.Approval, why string) (api.Approval, error) {
	a.Status, a.Refused = api.ApprovalRefused, why
	if err := s.auditRefusal(ctx, a); err != nil {
		return api.Approval{}, err
	}
	refused, err := s.update(ctx, a)
	if err != nil {
		return api.Approval{}, err
	}
	s.log.WarnContext(ctx, "APPROVAL_REFUSED", "approval", refused, "why", why)
	return refused, nil
}

// StaleOutcome is the Outcome of an approval refused because its record
// moved on (Stale).
const StaleOutcome = "STALE"

// Stale marks signed approval a (its Revision) refused because its
// event's chain moved on since the request (its head is no longer
// a.ChainHead): nothing of it was executed, and it never will be. why
// says what moved (ids and counts, no values). The entry's status is
// api.ApprovalRefused with Outcome StaleOutcome, AUDIT gets the refusal
// (AuditRefused), and the requester asks again on the record as it is.
// A refusal that lost its compare-and-set is ErrConflict, as Refuse.
func (s *Store) Stale(ctx context.Context, a api.Approval, why string) (api.Approval, error) {
	if a.Status != api.ApprovalApproved && a.Status != api.ApprovalPending {
		return api.Approval{}, fmt.Errorf("%w: %s is %s", ErrAlreadyDecided, a.ID, a.Status)
	}
	a.Status, a.Outcome = api.ApprovalRefused, StaleOutcome
	a.Refused = "stale: " + why + ": never executed; ask again on the record as it is now"
	if err := s.auditRefusalFor(ctx, a, "the record moved on since the request: never executed"); err != nil {
		return api.Approval{}, err
	}
	refused, err := s.update(ctx, a)
	if err != nil {
		return api.Approval{}, err
	}
	s.log.WarnContext(ctx, "APPROVAL_STALE", "approval", refused)
	return refused, nil
}

// auditRefusal writes a's refusal to AUDIT, once per stored revision.
func (s *Store) auditRefusal(ctx context.Context, a api.Approval) error {
	return s.auditRefusalFor(ctx, a, "stored as approved without a decision signed by its person: never executed")
}

// auditRefusalFor writes a's refusal to AUDIT with reason, once per
// stored revision.
func (s *Store) auditRefusalFor(ctx context.Context, a api.Approval, reason string) error {
	detail, err := json.Marshal(AuditDetail{Action: a.Action, DLQID: a.DLQID, Domain: a.Domain, HoldID: a.HoldID,
		Requester: a.Requester, RequestedAt: a.RequestedAt, ExpiresAt: a.ExpiresAt, Refused: a.Refused, Outcome: a.Outcome})
	if err != nil {
		return fmt.Errorf("approval: encode audit: %w", err)
	}
	act := api.AuditAction{Action: AuditRefused, Object: auditObject, ObjectID: a.ID, Actor: access.Redriver, At: s.now().UTC(),
		Reason: reason, Detail: detail}
	if _, err := trail.Publish(ctx, s.js, act, fmt.Sprintf("%s-%s-%d", a.ID, AuditRefused, a.Revision)); err != nil {
		return fmt.Errorf("%w: audit %s of %s: %w", ErrUnavailable, AuditRefused, a.ID, err)
	}
	return nil
}
