// Package access is the single source of truth for deadletter's NATS users
// and their permissions.
//
// The table in this file names every user, what it may publish and what it
// may subscribe to. Users turns it into the []*server.User of the embedded
// server; Specs exposes it as plain data, so that a cluster configuration can
// be rendered from the same table later.
//
// The permissions exist because the stream flags of a WORM store are not
// enough on nats-server 2.15: DenyDelete and DenyPurge refuse message delete
// and purge, but a stream UPDATE that lowers MaxAge or MaxMsgs is accepted
// (and drops records), and so is a stream DELETE. So every user but the
// break-glass admin is denied the mutating JetStream API of the protected
// streams (ProtectedStreams), only the admin may create the WORM streams, and
// only the quarantiner (and the admin) may publish to quarantine.>.
//
// The table also guards the work the services
// own: no user but the owner may pull from, acknowledge, update, pause,
// reset or delete the validator's consumer on EVENTS or any consumer of the
// quarantiner's intakes (FAILURES, ADVISORIES). A forged acknowledgement
// would make an event vanish without being committed or quarantined.
//
// Permission rules in NATS: a subject is allowed when it matches an allow
// entry and no deny entry (deny wins). Replies to requests a service
// receives are allowed with the "allow responses" permission, so services do
// not need to publish to _INBOX.> at large.
package access

import (
	"slices"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/subjects"
)

// User names.
const (
	// Admin is the break-glass user: no restriction at all. It provisions
	// the WORM streams and is the only one that can alter or delete them.
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
	// Client is every publisher and operator. The embedded server maps a
	// connection without credentials to it (NoAuthUser), so `nats pub` and
	// `nats req` work without flags.
	Client = "client"
)

// NoAuthUser is the user a connection without credentials is mapped to.
const NoAuthUser = Client

// Endpoint subject filters: the subjects each service's micro endpoints
// live under (the exact subjects are in shared/api).
const (
	// ValidatorEndpoints covers the validator's endpoints
	// (validator.check.<domain>.<type>).
	ValidatorEndpoints = "validator.>"
	// ValidatorCheck covers the dry-run endpoint clients may call.
	ValidatorCheck = "validator.check.>"
	// QuarantinerEndpoints covers the quarantiner's endpoints
	// (api.QuarantinerAppend). They live under quarantiner.>, not
	// quarantine.>, which is QUARANTINE's stream subject.
	QuarantinerEndpoints = "quarantiner.>"
	// RedriverDrain covers the redriver's drain endpoints (api.Drain*).
	RedriverDrain = "drain.>"
	// AuditorEndpoints covers the auditor's endpoints (api.Audit*). It also
	// contains AUDIT's stream subject, subjects.AuditCheckpoints, which
	// everyone but the auditor is denied.
	AuditorEndpoints = "audit.>"
)

// ProtectedStreams are the streams whose records no user but the admin may
// remove: their update, delete, purge and message-delete API subjects are
// denied to everyone else.
var ProtectedStreams = []string{subjects.LedgerStream, subjects.QuarantineStream, subjects.AuditStream}

// WORMStreams are the protected streams that only the admin provisions:
// their create and restore API subjects are denied to everyone else too.
// (streams.EnsureWORM). LEDGER is not among them because the validator may
// provision the core streams (streams.EnsureCore) when they are missing.
var WORMStreams = []string{subjects.QuarantineStream, subjects.AuditStream}

// OwnedConsumer is a consumer (or every consumer, Name "*") of a stream that
// only its owner may pull from, acknowledge or administer.
type OwnedConsumer struct {
	Stream, Name, Owner string
}

// OwnedConsumers are the service consumers no other user may touch.
var OwnedConsumers = []OwnedConsumer{
	{Stream: subjects.EventsStream, Name: subjects.ValidatorConsumer, Owner: Validator},
	{Stream: subjects.FailuresStream, Name: "*", Owner: Quarantiner},
	{Stream: subjects.AdvisoriesStream, Name: "*", Owner: Quarantiner},
}

// Common subjects of the table.
const (
	inbox   = "_INBOX.>"             // replies to the user's own requests
	jsAPI   = "$JS.API.>"            // the JetStream API (reads, own consumers)
	jsAck   = "$JS.ACK.>"            // acknowledgements of consumed messages
	jsFC    = "$JS.FC.>"             // flow control of push/ordered consumers
	srv     = "$SRV.>"               // micro discovery (PING, INFO, STATS)
	advisor = "$JS.EVENT.ADVISORY.>" // JetStream advisories
)

// Rule is one direction (publish or subscribe) of a user's permissions.
type Rule struct {
	// Allow lists the subjects allowed (nil: everything).
	Allow []string
	// Deny lists the subjects denied even when allowed.
	Deny []string
}

// Spec is one user of the table.
type Spec struct {
	// Name is the user name (one of the constants above).
	Name string
	// Doc says what the user is for.
	Doc string
	// Unrestricted marks the break-glass admin: no permissions at all.
	Unrestricted bool
	// Publish and Subscribe are the user's permissions.
	Publish, Subscribe Rule
	// Responses allows one reply to each request the user receives (the
	// server's "allow_responses"), which micro endpoints and $SRV
	// discovery need.
	Responses bool
}

// table is the single source of truth. Denies shared by every non-admin
// user (protected streams, owned consumers) are added by Specs.
var table = []Spec{
	{
		Name:         Admin,
		Doc:          "break-glass administrator: provisions and, if ever needed, alters the WORM streams",
		Unrestricted: true,
	},
	{
		Name: Validator,
		Doc:  "consumes EVENTS, commits to LEDGER, sends failures to FAILURES, keeps IDEMPOTENCY and ATTEMPTS",
		Publish: Rule{Allow: []string{
			jsAPI, jsAck, jsFC,
			subjects.LedgerAll, subjects.FailuresAll,
			kv(subjects.IdempotencyBucket), kv(subjects.AttemptsBucket),
		}},
		Subscribe: Rule{Allow: []string{inbox, srv, ValidatorEndpoints}},
		Responses: true,
	},
	{
		Name:      Quarantiner,
		Doc:       "consumes FAILURES and ADVISORIES, reads EVENTS and ATTEMPTS, appends sealed records to QUARANTINE (its only writer)",
		Publish:   Rule{Allow: []string{jsAPI, jsAck, jsFC, subjects.QuarantineAll}},
		Subscribe: Rule{Allow: []string{inbox, srv, QuarantinerEndpoints, advisor}},
		Responses: true,
	},
	{
		Name: Redriver,
		Doc:  "drains and redrives quarantined events back into EVENTS, keeps drain states in DRAINS, appends lifecycle records through the quarantiner",
		Publish: Rule{Allow: []string{
			jsAPI, jsAck, jsFC, subjects.EventsAll, kv(subjects.DrainsBucket), QuarantinerEndpoints,
		}},
		// It watches commits and quarantine records (read-only core
		// subscriptions) to observe each replay's outcome as it happens.
		Subscribe: Rule{Allow: []string{inbox, srv, RedriverDrain, api.Redrive, api.Release,
			kv(subjects.IdempotencyBucket), subjects.QuarantineAll}},
		Responses: true,
	},
	{
		Name:      Auditor,
		Doc:       "verifies and reconciles (reads), writes only its checkpoints to AUDIT",
		Publish:   Rule{Allow: []string{jsAPI, jsAck, jsFC, subjects.AuditCheckpoints}},
		Subscribe: Rule{Allow: []string{inbox, srv, AuditorEndpoints}},
		Responses: true,
	},
	{
		Name: Client,
		Doc:  "publishers and operators (no credentials): publish events, call endpoints, read streams",
		Publish: Rule{
			Allow: []string{
				jsAPI, jsAck, jsFC, srv,
				subjects.EventsAll, ValidatorCheck,
				RedriverDrain, api.Redrive, api.Release, AuditorEndpoints,
			},
			// Clients read, they don't administer: no stream administration
			// at all (which also closes creating a stream whose RePublish
			// writes into a protected stream), and no forged checkpoint.
			// Lifecycle records are written only through the redriver's
			// endpoints (which record the operator and reason), never by
			// calling quarantiner.append directly.
			Deny: append(streamAdmin("*"), subjects.AuditCheckpoints),
		},
		Subscribe: Rule{Allow: []string{inbox}},
	},
}

// kv returns the publish subjects of a key-value bucket's keys.
func kv(bucket string) string { return "$KV." + bucket + ".>" }

// protectedMutations returns the API subjects that remove records of a
// protected stream.
func protectedMutations(stream string) []string {
	return []string{
		"$JS.API.STREAM.UPDATE." + stream,
		"$JS.API.STREAM.DELETE." + stream,
		"$JS.API.STREAM.PURGE." + stream,
		"$JS.API.STREAM.MSG.DELETE." + stream,
	}
}

// provisioning returns the API subjects that bring a stream into existence.
func provisioning(stream string) []string {
	return []string{"$JS.API.STREAM.CREATE." + stream, "$JS.API.STREAM.RESTORE." + stream}
}

// streamAdmin returns every stream-administration API subject of a stream
// (or of every stream, "*").
func streamAdmin(stream string) []string {
	return append(provisioning(stream), protectedMutations(stream)...)
}

// consumerGuard returns the subjects that pull from, acknowledge or
// administer a consumer. Acks are denied in both formats the server
// accepts: v1 $JS.ACK.<stream>.<consumer>... and v2
// $JS.ACK.<domain>.<account hash>.<stream>.<consumer>...
func consumerGuard(c OwnedConsumer) []string {
	sc := c.Stream + "." + c.Name
	return []string{
		"$JS.API.CONSUMER.MSG.NEXT." + sc,
		"$JS.ACK." + sc + ".>",
		"$JS.ACK.*.*." + sc + ".>",
		"$JS.API.CONSUMER.CREATE." + sc,
		"$JS.API.CONSUMER.CREATE." + sc + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + sc,
		"$JS.API.CONSUMER.DELETE." + sc,
		"$JS.API.CONSUMER.PAUSE." + sc,
		"$JS.API.CONSUMER.RESET." + sc,
	}
}

// commonDeny returns the publish denies of a non-admin user.
func commonDeny(user string) []string {
	var deny []string
	for _, s := range ProtectedStreams {
		deny = append(deny, protectedMutations(s)...)
	}
	for _, s := range WORMStreams {
		deny = append(deny, provisioning(s)...)
	}
	for _, c := range OwnedConsumers {
		if c.Owner != user {
			deny = append(deny, consumerGuard(c)...)
		}
	}
	if user != Quarantiner {
		deny = append(deny, subjects.QuarantineAll)
	}
	return deny
}

// Specs returns the table with every rule complete (the common denies
// added, duplicates removed). The result is a fresh copy.
func Specs() []Spec {
	out := make([]Spec, 0, len(table))
	for _, s := range table {
		s.Publish = Rule{Allow: slices.Clone(s.Publish.Allow), Deny: slices.Clone(s.Publish.Deny)}
		s.Subscribe = Rule{Allow: slices.Clone(s.Subscribe.Allow), Deny: slices.Clone(s.Subscribe.Deny)}
		if !s.Unrestricted {
			s.Publish.Deny = dedup(append(s.Publish.Deny, commonDeny(s.Name)...))
		}
		out = append(out, s)
	}
	return out
}

// Names returns every user name, admin first.
func Names() []string {
	names := make([]string, len(table))
	for i, s := range table {
		names[i] = s.Name
	}
	return names
}

// Lookup returns the complete Spec of a user.
func Lookup(user string) (Spec, bool) {
	for _, s := range Specs() {
		if s.Name == user {
			return s, true
		}
	}
	return Spec{}, false
}

// ServerPermissions returns the nats-server permissions of the spec (nil
// for the unrestricted admin).
func (s Spec) ServerPermissions() *server.Permissions {
	if s.Unrestricted {
		return nil
	}
	p := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: slices.Clone(s.Publish.Allow), Deny: slices.Clone(s.Publish.Deny)},
		Subscribe: &server.SubjectPermission{Allow: slices.Clone(s.Subscribe.Allow), Deny: slices.Clone(s.Subscribe.Deny)},
	}
	if s.Responses {
		p.Response = &server.ResponsePermission{
			MaxMsgs: server.DEFAULT_ALLOW_RESPONSE_MAX_MSGS,
			Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION,
		}
	}
	return p
}

// Users returns the server users of the table with the passwords of p, for
// embedded.Config.Users (together with NoAuthUser). A user without a
// password in p is left out.
func Users(p Passwords) []*server.User {
	var users []*server.User
	for _, s := range Specs() {
		pw, ok := p[s.Name]
		if !ok || pw == "" {
			continue
		}
		users = append(users, &server.User{Username: s.Name, Password: pw, Permissions: s.ServerPermissions()})
	}
	return users
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
