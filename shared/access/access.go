// Package access is the single source of truth for deadletter's trust
// boundary: the NATS accounts, the users in them, and what each may publish
// and subscribe to. ServerConfig renders it as a nats-server configuration
// (the embedded server of `make run` loads the same text), so a single
// machine and a cluster enforce one boundary.
//
// # Accounts are the trust zones
//
// The services (validator, quarantiner, redriver, auditor) and the
// break-glass admin live in the services' account, ServiceAccount, the
// only account with JetStream. Every person role (Roles) is an account of
// its own with no JetStream API at all: a publisher or an operator cannot
// create a consumer, read a stream, touch a bucket or see the services'
// inboxes, whatever subject it picks, because those subjects do not exist
// in its account. What a role account can reach is exactly what it
// imports: events.> (publishers; a service import, so the stream's PubAck
// comes back), the service endpoints of its role (with share: true, so the
// server writes the caller's account and user into Nats-Request-Info,
// overwriting any the client sent, see CallerOf), and $SRV.> for `nats
// micro ls` (response_type stream). Replies to those requests cross back
// on the server's _R_ subjects, so a requester cannot make a service
// answer onto a subject of its choosing.
//
// # Allow-lists within the services' account
//
// Each service may publish only the API subjects, streams, consumers and
// keys its work needs (Spec.Publish), and subscribe only to its own inbox,
// its endpoints and discovery. No service may create, update or delete a
// stream, a bucket or a consumer: the admin provisions them all,
// the services' durable consumers included. (A right to create a consumer
// would be a right to aim its deliver_subject at any subject: permissions
// do not see it.) Services read everything else by direct get.
//
// Every user, people included, has a private inbox prefix (InboxPrefix)
// and may subscribe to nothing else of the bus's replies.
package access

import (
	"slices"

	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// ServiceAccount is the account of the services and their streams.
const ServiceAccount = "DEADLETTER"

// Service user names (in ServiceAccount).
const (
	// Admin is the break-glass user: no restriction at all within the
	// services' account. It provisions every stream, bucket and durable
	// consumer and is the only one that can alter or delete them.
	Admin = "admin"
	// Validator is the validator service.
	Validator = "validator"
	// Quarantiner is the quarantiner service, the only writer of QUARANTINE.
	Quarantiner = "quarantiner"
	// Redriver is the redriver service (drains and redrives quarantined
	// events back into EVENTS).
	Redriver = "redriver"
	// Auditor is the auditor service: it reads, and writes only its own
	// checkpoints to AUDIT.
	Auditor = "auditor"
)

// InboxPrefix is the private inbox prefix of a user: its requests' replies
// arrive below it (nats.CustomInboxPrefix, a natscli context's
// inbox_prefix), and it may subscribe to no other inbox. The user name is
// one token of it ("amara.okafor" → "_INBOX.amara_okafor"), so that no
// user's inbox lies within another's.
func InboxPrefix(user string) string { return "_INBOX." + inboxToken(user) }

// inboxAll is the subscription filter of a user's inbox.
func inboxAll(user string) string { return InboxPrefix(user) + ".>" }

// crossAccountReplies covers the reply subjects of requests that came
// through a service import (the server's _R_ mapping).
const crossAccountReplies = "_R_.>"

// srv covers micro discovery (PING, INFO, STATS).
const srv = "$SRV.>"

// Rule is one direction (publish or subscribe) of a user's permissions.
type Rule struct {
	// Allow lists the subjects allowed.
	Allow []string `json:"allow,omitempty"`
	// Deny lists the subjects denied even when allowed.
	Deny []string `json:"deny,omitempty"`
}

// Spec is one user of the services' account.
type Spec struct {
	// Name is the user name (one of the constants above).
	Name string
	// Doc says what the user is for.
	Doc string
	// Unrestricted marks the break-glass admin: no permissions at all.
	Unrestricted bool
	// Publish and Subscribe are the user's permissions.
	Publish, Subscribe Rule
}

// api subjects of one stream.
func streamInfo(s string) string      { return "$JS.API.STREAM.INFO." + s }
func msgGet(s string) string          { return "$JS.API.STREAM.MSG.GET." + s }
func consumerInfo(s, c string) string { return "$JS.API.CONSUMER.INFO." + s + "." + c }
func msgNext(s, c string) string      { return "$JS.API.CONSUMER.MSG.NEXT." + s + "." + c }

// directGet returns the direct-get subjects of a stream (by sequence or
// batch, and last-by-subject).
func directGet(s string) []string {
	return []string{"$JS.API.DIRECT.GET." + s, "$JS.API.DIRECT.GET." + s + ".>"}
}

// reads returns what reading a stream takes: its info, message gets and
// direct gets.
func reads(streams ...string) []string {
	var out []string
	for _, s := range streams {
		out = append(out, streamInfo(s), msgGet(s))
		out = append(out, directGet(s)...)
	}
	return out
}

// bucketStream is the stream behind a key-value bucket.
func bucketStream(bucket string) string { return subjects.BucketStream(bucket) }

// kvKeys returns the subjects of a bucket's keys (puts, creates, updates,
// deletes).
func kvKeys(bucket string) string { return subjects.BucketKeys(bucket) }

// kvRead returns what reading a bucket takes.
func kvRead(bucket string) []string { return reads(bucketStream(bucket)) }

// kvWrite returns what reading and writing a bucket takes.
func kvWrite(bucket string) []string { return append(kvRead(bucket), kvKeys(bucket)) }

// pull returns what binding to, pulling from and acknowledging one durable
// consumer takes. Acks are allowed in both formats the server uses: v1
// $JS.ACK.<stream>.<consumer>... and v2
// $JS.ACK.<domain>.<account hash>.<stream>.<consumer>...
func pull(stream, consumer string) []string {
	sc := stream + "." + consumer
	return []string{
		streamInfo(stream), consumerInfo(stream, consumer), msgNext(stream, consumer),
		"$JS.ACK." + sc + ".>", "$JS.ACK.*.*." + sc + ".>",
	}
}

// service returns the permissions every service shares: its own inbox,
// micro discovery, and replies to requests that came through an import.
func service(user string, publish []string, endpoints ...string) (Rule, Rule) {
	pub := append([]string{crossAccountReplies}, publish...)
	sub := append([]string{inboxAll(user), srv}, endpoints...)
	return Rule{Allow: dedup(pub)}, Rule{Allow: dedup(sub)}
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// table is the single source of truth for the services' account.
var table = func() []Spec {
	vp, vs := service(Validator, concat(
		pull(subjects.EventsStream, subjects.ValidatorConsumer),
		reads(subjects.LedgerStream),
		kvWrite(subjects.IdempotencyBucket), kvWrite(subjects.AttemptsBucket),
		// DOCUMENTS: the EPCIS documents it ingests, kept verbatim, written
		// on documents.> only (chunks and one manifest each; the stream
		// refuses a second manifest and any rollup, delete or purge);
		// EVENTS: the parts of a document published in parts, read back
		// by sequence.
		reads(streams.DocumentsStream, subjects.EventsStream),
		[]string{subjects.LedgerAll, subjects.FailuresAll, streams.DocumentsAll},
	), ServiceEndpoints(Validator)...)
	qp, qs := service(Quarantiner, concat(
		pull(subjects.FailuresStream, subjects.FailuresConsumer),
		pull(subjects.AdvisoriesStream, subjects.AdvisoriesConsumer),
		reads(subjects.QuarantineStream, subjects.EventsStream),
		kvRead(subjects.AttemptsBucket),
		// A repair (quarantiner.repair) seals only what the validator's
		// consumer has settled and LEDGER does not hold committed from it.
		[]string{consumerInfo(subjects.EventsStream, subjects.ValidatorConsumer)},
		reads(subjects.LedgerStream),
		// AUDIT: the people registry, against which it checks the signed
		// decision of a decision record before it seals it (issue #38).
		reads(subjects.AuditStream),
		// Answers to the redriver's and the auditor's appends (requests
		// within the account).
		[]string{subjects.QuarantineAll, inboxAll(Redriver), inboxAll(Auditor)},
	), ServiceEndpoints(Quarantiner)...)
	rp, rs := service(Redriver, concat(
		// AUDIT: the current approval policy is its last policy action.
		reads(subjects.QuarantineStream, subjects.EventsStream, subjects.LedgerStream, subjects.AuditStream),
		kvRead(subjects.IdempotencyBucket), kvWrite(subjects.DrainsBucket), kvWrite(subjects.ApprovalsBucket),
		// REQUESTS: the write-once source of APPROVALS and DRAINS (each
		// approval's request, each drain's start and end), written before
		// the bucket's entry and read back by the restore at start.
		reads(streams.RequestsStream), []string{streams.RequestsAll},
		// HOLDS: it refuses held events (package hold).
		kvRead(subjects.HoldsBucket),
		// Its governance actions (pauses, resumes, approvals, holds) go to
		// AUDIT, and so does the access record of an approver's review of
		// a correction (approval.get shows payload values).
		// Its replays go into EVENTS on redriven.> (replay.>, REPLAYS',
		// is where earlier redrivers wrote them); no one else may publish
		// either.
		// It answers the auditor's requests for a hold lift's pending
		// approval (api.ApprovalHoldLift) on the auditor's inbox.
		// The endpoints it calls (the table's Callers): its lifecycle
		// appends (quarantiner.append), and the execution of an approved
		// hold lift by the auditor (hold.lift.approved).
		[]string{subjects.RedrivenAll, subjects.ReplaysAll, subjects.AuditActionsAll, subjects.AuditAccessAll, inboxAll(Auditor)},
		calls(Redriver),
		// Its notifications (package notify): a paused drain, a pending
		// approval.
		[]string{subjects.Notify(subjects.NotifyDrainPaused), subjects.Notify(subjects.NotifyApprovalPending)},
	), append(RedriverEndpoints(),
		// It watches commits and quarantine records (core subscriptions,
		// read-only) to observe each replay's outcome as it happens.
		kvKeys(subjects.IdempotencyBucket), subjects.QuarantineAll)...)
	ap, as := service(Auditor, concat(
		reads(subjects.QuarantineStream, subjects.AuditStream, subjects.EventsStream, subjects.LedgerStream, subjects.LegalHoldStream,
			// DOCUMENTS: reconcile reads a document published in parts, audit.get an event's original bytes, audit.verify every document (re-hashed).
			streams.DocumentsStream),
		kvRead(subjects.IdempotencyBucket),
		// Legal holds: their definitions in HOLDS, their actions in AUDIT,
		// their records appended through the quarantiner, the held chains'
		// copies in LEGALHOLD.
		kvWrite(subjects.HoldsBucket),
		// A lift the policy makes wait for a second person: it reads
		// APPROVALS but never writes it (nor an approval's AUDIT actions):
		// the redriver, the approval owner, stores the pending approval on
		// its request (api.ApprovalHoldLift); executed, once signed and
		// its proof verified, on the redriver's request, answered on its
		// inbox.
		kvRead(subjects.ApprovalsBucket),
		// audit.verify compares every index with its source (package
		// rebuild): DRAINS too, read only, and REQUESTS, the source of
		// APPROVALS and DRAINS (it may carry payload values: verify names
		// keys and fields, never a value).
		kvRead(subjects.DrainsBucket), reads(streams.RequestsStream),
		// The endpoints it calls (the table's Callers): its legal holds'
		// appends (quarantiner.hold) and a hold lift's pending approval
		// (approval.hold_lift).
		[]string{subjects.AuditCheckpoints, subjects.AuditAccessAll, subjects.AuditAction("hold", ">"), subjects.AuditAction("anchors", ">"),
			subjects.LegalHoldAll, inboxAll(Redriver)},
		// Reconciliation's repair of an event left without an outcome: the
		// validator consumer's state (only what it settled is repaired)
		// and the repair's AUDIT action; the record itself is the
		// quarantiner's (quarantiner.repair, in calls).
		[]string{consumerInfo(subjects.EventsStream, subjects.ValidatorConsumer), subjects.AuditAction("reconcile", ">")},
		calls(Auditor),
		// Its notifications (package notify): a new failure group, a
		// poison record, a failed verify.
		[]string{subjects.Notify(subjects.NotifyFailureGroup), subjects.Notify(subjects.NotifyPoison), subjects.Notify(subjects.NotifyVerifyFailed)},
	), AuditorEndpoints()...)
	return []Spec{
		{
			Name:         Admin,
			Doc:          "break-glass administrator: provisions every stream, bucket and durable consumer, and alone may alter or delete them",
			Unrestricted: true,
		},
		{
			Name:    Validator,
			Doc:     "pulls EVENTS through its provisioned consumer, commits to LEDGER, sends failures to FAILURES, keeps IDEMPOTENCY and ATTEMPTS",
			Publish: vp, Subscribe: vs,
		},
		{
			Name:    Quarantiner,
			Doc:     "pulls FAILURES and ADVISORIES, reads EVENTS and ATTEMPTS, appends sealed records to QUARANTINE (its only writer); answers only the redriver's and the auditor's appends, and seals a decision record only with its person's signed decision (checked against the people registry in AUDIT)",
			Publish: qp, Subscribe: qs,
		},
		{
			Name:    Redriver,
			Doc:     "reads QUARANTINE, replays into EVENTS on redriven.> (its own subjects; replay.>, into REPLAYS, before), keeps drain states in DRAINS and two-person approvals in APPROVALS (each first written once to REQUESTS, their source), reads the legal holds in HOLDS (and asks the auditor to execute an approved hold lift), appends lifecycle records through the quarantiner, writes its governance actions (the approval policy among them) to AUDIT and reads them back, and records an approver's review of a correction in the access audit",
			Publish: rp, Subscribe: rs,
		},
		{
			Name:    Auditor,
			Doc:     "reads QUARANTINE, AUDIT, EVENTS, LEDGER, DOCUMENTS, REQUESTS and IDEMPOTENCY; writes its checkpoints, the access audit of payload reads and the legal holds' actions to AUDIT, keeps the legal holds in HOLDS, appends their records through the quarantiner and copies the held chains to LEGALHOLD; asks the redriver to store the pending approval of a hold lift (it may not write APPROVALS) and executes it, once signed and proven, on the redriver's request alone",
			Publish: ap, Subscribe: as,
		},
	}
}()

// PeopleRecords covers the people's registry records in AUDIT
// (api.PersonKeys on subjects.AuditAction("people", person)): what every
// signed decision is checked against. Only the server applying the
// people file writes them, as the break-glass Admin; every other user is
// denied them, whatever else it may write to AUDIT.
var PeopleRecords = subjects.AuditAction("people", ">")

// Specs returns the services' account users. The result is a fresh copy.
func Specs() []Spec {
	out := make([]Spec, 0, len(table))
	for _, s := range table {
		deny := slices.Clone(s.Publish.Deny)
		if !s.Unrestricted {
			deny = append(deny, PeopleRecords)
		}
		s.Publish = Rule{Allow: slices.Clone(s.Publish.Allow), Deny: deny}
		s.Subscribe = Rule{Allow: slices.Clone(s.Subscribe.Allow), Deny: slices.Clone(s.Subscribe.Deny)}
		out = append(out, s)
	}
	return out
}

// ServiceNames returns the services' account user names, admin first.
func ServiceNames() []string {
	names := make([]string, len(table))
	for i, s := range table {
		names[i] = s.Name
	}
	return names
}

// Lookup returns the Spec of a services' account user.
func Lookup(user string) (Spec, bool) {
	for _, s := range Specs() {
		if s.Name == user {
			return s, true
		}
	}
	return Spec{}, false
}

func dedup(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
