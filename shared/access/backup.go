package access

import (
	"fmt"

	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// # The backup account
//
// A JetStream snapshot ($JS.API.STREAM.SNAPSHOT.<stream>) is delivered to
// a deliver_subject that subject permissions never see: a user allowed to
// snapshot a stream of the services' account could make the server write
// that stream's bytes onto any subject of the account (a service's
// endpoint, a stream's subject). So no one in the services' account but
// the break-glass admin may snapshot (ADR 0001).
//
// The backup identity therefore lives in an account of its own,
// BackupAccount, with JetStream of its own. It holds a mirror of each of
// the services' streams and buckets that hold evidence or state
// (BackupStreams), created by the account's own break-glass user
// (BackupAdmin) and fed by the server: the services' account exports to
// BackupAccount alone, per mirrored stream, the consumer-create request
// the mirror sends ($JS.API.CONSUMER.CREATE.<stream>, imported under
// BackupAPIPrefix), its flow-control replies ($JS.FC.<stream>...) and the
// subject the mirror's source consumer delivers on
// (BackupDeliverPrefix). The backup user (BackupUser, an nkey) may only
// read its mirrors' info, snapshot them, acknowledge the snapshot's
// chunks, read the newest checkpoint of AUDIT's mirror by direct get,
// and subscribe to its own inbox. A deliver_subject it picks lives in
// BackupAccount, where no service listens and from which no subject
// leads back into the services' account but the imports above, which the
// backup user may not publish to and which the server refuses as a
// delivery target (they are JetStream API subjects).

// BackupAccount is the account of the backup identity and of its mirrors.
const BackupAccount = "DEADLETTER_BACKUP"

// Users of BackupAccount.
const (
	// BackupUser takes backups: it snapshots the mirrors of
	// BackupAccount and can do nothing else (an nkey, kept by the backup
	// job).
	BackupUser = "backup"
	// BackupAdmin is BackupAccount's break-glass user: it creates (and
	// alone may alter or delete) the mirrors. It has no right in the
	// services' account but to read the mirrored streams' info (their
	// configurations, through BackupAPIPrefix).
	BackupAdmin = "backup-admin"
	// ReplicaLeafUser is the leaf node connection of the second copy's
	// server (the deployment kit's replica): a password user of
	// BackupAccount, present when the secrets hold one. It may send
	// into BackupAccount anything but ReplicaLeafDeny: the replica's
	// mirrors use the backup account's own JetStream API (through its
	// JetStream domain), never the imports from the services' account.
	ReplicaLeafUser = "replica-leaf"
)

// ReplicaLeafDeny are the subjects ReplicaLeafUser may not send into
// BackupAccount: the services' account's JetStream API as BackupAccount
// imports it, the mirrors' delivery subjects, the account's JetStream API
// but through a domain, and, through a domain, every stream change (a
// stream it could create or restore could mirror through the imports).
// Its mirrors need only consumer creation on the backup mirrors, their
// info, and flow-control replies.
func ReplicaLeafDeny() []string {
	out := []string{BackupAPIPrefix + ".>", "deadletter.backup.>", "$JS.API.>"}
	for _, op := range []string{"CREATE", "UPDATE", "DELETE", "PURGE", "MSG.DELETE", "RESTORE", "SNAPSHOT"} {
		out = append(out, "$JS.*.API.STREAM."+op+".>")
	}
	return append(out, "$JS.*.API.CONSUMER.DURABLE.>", "$JS.*.API.CONSUMER.DELETE.>", "$JS.*.API.DIRECT.>", "$JS.*.API.STREAM.MSG.GET.>")
}

// ReplicaLeafReceives are the subjects the primary sends to the replica's
// leaf connection: its mirrors' deliveries and consumer-create replies,
// and the replies to its admin's requests.
func ReplicaLeafReceives() []string {
	return []string{"$JS.M.>", "$JSC.>", InboxPrefix(Admin) + ".>"}
}

// BackupAPIPrefix is the services' account's JetStream API as
// BackupAccount imports it: a mirror's external API prefix.
const BackupAPIPrefix = "$JS." + ServiceAccount + ".API"

// BackupDeliverPrefix is the subject, in the services' account, on which
// the source consumer of stream's mirror delivers (exported to
// BackupAccount as a stream): a mirror's external deliver prefix.
func BackupDeliverPrefix(stream string) string { return "deadletter.backup." + stream }

// BackupStreams are the streams (a bucket's is KV_<bucket>) BackupAccount
// mirrors: every stream and bucket that holds evidence or state, but the
// work queues FAILURES and ADVISORIES (a mirror's consumer would take a
// work queue's messages from the quarantiner; what they hold in flight is
// also in EVENTS and the advisories' streams' origin).
func BackupStreams() []string {
	return []string{
		subjects.EventsStream, subjects.ReplaysStream,
		subjects.BucketStream(subjects.AttemptsBucket), subjects.BucketStream(subjects.DrainsBucket),
		subjects.BucketStream(subjects.ApprovalsBucket), subjects.BucketStream(subjects.HoldsBucket),
		subjects.QuarantineStream, subjects.LegalHoldStream, subjects.AuditStream,
		// DOCUMENTS: the EPCIS documents records and LEDGER entries point into.
		streams.DocumentsStream,
		// REQUESTS: the source APPROVALS and DRAINS are rebuilt from.
		streams.RequestsStream,
		subjects.BucketStream(subjects.IdempotencyBucket), subjects.LedgerStream,
	}
}

// BackupConsumers are the services' durable consumers whose position a
// backup of the mirrors records (by stream): a mirror's snapshot holds no
// consumer of its origin, and a restored EVENTS whose validator consumer
// started over would hand every quarantined event to the validator again.
// Their info (configuration and acknowledgement floor, no payload) is
// exported to BackupAccount, under BackupAPIPrefix.
func BackupConsumers() map[string][]string {
	return map[string][]string{subjects.EventsStream: {subjects.ValidatorConsumer}}
}

// BackupConsumerInfo is the subject on which the backup user asks the info
// of the services' consumer c on stream s.
func BackupConsumerInfo(s, c string) string {
	return BackupAPIPrefix + consumerInfo(s, c)[len("$JS.API"):]
}

// BackupCheckpointGet is the direct get of the newest checkpoint in
// AUDIT's mirror (last by subject): the one read the backup user may make
// besides its snapshots (a checkpoint holds hashes, no payload).
func BackupCheckpointGet() string {
	return "$JS.API.DIRECT.GET." + subjects.AuditStream + "." + subjects.AuditCheckpoints
}

// flowControl returns the flow-control reply subjects of a stream's
// consumers, in both formats the server uses ($JS.FC.<stream>... and
// $JS.FC.<domain>.<account hash>.<stream>...).
func flowControl(stream string) []string {
	return []string{"$JS.FC." + stream + ".>", "$JS.FC.*.*." + stream + ".>"}
}

// consumerCreate is the consumer-create request a mirror sends (the
// legacy form, the consumer's name in the body).
func consumerCreate(stream string) string { return "$JS.API.CONSUMER.CREATE." + stream }

// BackupSpec returns the backup user's permissions (in BackupAccount).
func BackupSpec() Spec {
	pub := []string{"$JS.API.INFO", BackupCheckpointGet()}
	for _, s := range BackupStreams() {
		pub = append(pub, streamInfo(s), "$JS.API.STREAM.SNAPSHOT."+s, "$JS.SNAPSHOT.ACK."+s+".>")
		for _, c := range BackupConsumers()[s] {
			pub = append(pub, BackupConsumerInfo(s, c))
		}
	}
	return Spec{
		Name:      BackupUser,
		Doc:       "snapshots the mirrors of the backup account (and reads their info and AUDIT's newest checkpoint): nothing in the services' account",
		Publish:   Rule{Allow: pub},
		Subscribe: Rule{Allow: []string{inboxAll(BackupUser)}},
	}
}

// backupExports are the services' account's exports to BackupAccount.
func backupExports() []confExport {
	to := []string{BackupAccount}
	var out []confExport
	for _, s := range BackupStreams() {
		out = append(out,
			confExport{Service: consumerCreate(s), Accounts: to},
			confExport{Service: streamInfo(s), Accounts: to},
			confExport{Stream: BackupDeliverPrefix(s) + ".>", Accounts: to})
		for _, fc := range flowControl(s) {
			out = append(out, confExport{Service: fc, Accounts: to})
		}
		for _, c := range BackupConsumers()[s] {
			out = append(out, confExport{Service: consumerInfo(s, c), Accounts: to})
		}
	}
	return out
}

// backupImports are BackupAccount's imports (the mirrors' and
// BackupAdmin's; the backup user may publish to none of them).
func backupImports() []confImport {
	var out []confImport
	imp := func(subj string) *confImportService {
		return &confImportService{Account: ServiceAccount, Subject: subj}
	}
	api := func(subj string) string { return BackupAPIPrefix + subj[len("$JS.API"):] }
	for _, s := range BackupStreams() {
		out = append(out,
			confImport{Service: imp(consumerCreate(s)), To: api(consumerCreate(s))},
			confImport{Service: imp(streamInfo(s)), To: api(streamInfo(s))},
			confImport{Stream: imp(BackupDeliverPrefix(s) + ".>")})
		for _, fc := range flowControl(s) {
			out = append(out, confImport{Service: imp(fc)})
		}
		for _, c := range BackupConsumers()[s] {
			out = append(out, confImport{Service: imp(consumerInfo(s, c)), To: BackupConsumerInfo(s, c)})
		}
	}
	return out
}

// backupAccount renders BackupAccount: JetStream, its two users and its
// imports.
func backupAccount(sec *Secrets) (confAccount, error) {
	for _, p := range sec.People {
		if p.Name == BackupUser || p.Name == BackupAdmin {
			return confAccount{}, fmt.Errorf("access: person %s has the name of a backup user", p.Name)
		}
	}
	admin, ok := sec.Users[BackupAdmin]
	if !ok || admin.Bcrypt == "" {
		return confAccount{}, fmt.Errorf("access: no password hash for %s", BackupAdmin)
	}
	pub, err := sec.PublicKey(BackupUser)
	if err != nil {
		return confAccount{}, err
	}
	b := BackupSpec()
	acc := confAccount{
		JetStream: "enabled",
		Users: []confUser{
			{User: BackupAdmin, Password: admin.Bcrypt},
			{NKey: pub, Permissions: &permissions{Publish: b.Publish, Subscribe: b.Subscribe}},
		},
		Imports: backupImports(),
	}
	if leaf := sec.Users[ReplicaLeafUser]; leaf.Bcrypt != "" {
		acc.Users = append(acc.Users, confUser{User: ReplicaLeafUser, Password: leaf.Bcrypt,
			Permissions: &permissions{Publish: Rule{Deny: ReplicaLeafDeny()}, Subscribe: Rule{Allow: ReplicaLeafReceives()}}})
	}
	return acc, nil
}
