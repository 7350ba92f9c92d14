package access

import (
	"slices"
	"time"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/subjects"
)

// Endpoint is one request-reply endpoint of a deadletter service: one row
// of the endpoint table (Endpoints), from which everything else about it
// derives: the service user that subscribes to it (ServiceEndpoints), the
// person roles whose accounts import it (RoleEndpoints), the service users
// within ServiceAccount that may publish to it (Callers), the micro
// registration of its service (endpoint.Listed: name, subject, time limit,
// description) and the service's role check (Allows).
type Endpoint struct {
	// Subject is the endpoint's subject (an api constant; a wildcard for
	// the validator's dry run).
	Subject string
	// Service is the service user that serves it (Validator, Quarantiner,
	// Redriver, Auditor); its micro service has the same name.
	Service string
	// Name is the micro endpoint's name in $SRV.INFO.
	Name string
	// Roles are the person roles that may call it: their accounts import
	// it, and its service refuses any other caller's role. None: only the
	// services in Callers call it.
	Roles []Role
	// Callers are the service users (within ServiceAccount) that may
	// publish to it.
	Callers []string
	// Timeout bounds each request (the redrive's is widened by the
	// redriver's Config.RedriveWait; zero: the service bounds its work
	// itself).
	Timeout time.Duration
	// Description is the endpoint's $SRV.INFO description.
	Description string
}

// Allows reports whether a person of role r may call e.
func (e Endpoint) Allows(r Role) bool { return slices.Contains(e.Roles, r) }

// Role sets of the table.
var (
	// everyone: every person role, publishers included (the dry run).
	everyone = Roles
	// readers: every person role but a publisher; reads that carry no
	// payload bytes unless the role allows it (the services check).
	readers = []Role{RoleViewer, RoleOperator, RoleInspector, RoleApprover, RolePolicy}
	// operators: changes to quarantined events and drains.
	operators = []Role{RoleOperator}
	// holders place and lift legal holds: the inspector's (holds are an
	// inspection and retention function: the compliance officer or
	// counsel places them for a case) and the operator's (who must be able
	// to freeze an event before acting on it, and is refused by the hold
	// otherwise).
	holders = []Role{RoleOperator, RoleInspector}
	// approvers give a two-person approval's second signature.
	approvers = []Role{RoleApprover}
	// policySetters change the approval policy.
	policySetters = []Role{RolePolicy}
)

// endpoints is the endpoint table, the single source of truth for every
// request-reply endpoint of the services.
var endpoints = []Endpoint{
	{Subject: api.ValidatorCheckAll, Service: Validator, Name: "check", Roles: everyone,
		Description: "dry-run an event: validator.check.<domain>.<type> with the payload as body"},

	{Subject: api.QuarantinerAppend, Service: Quarantiner, Name: "append", Callers: []string{Redriver},
		Description: "append a lifecycle record to a chain (redriver, operators)"},
	{Subject: api.QuarantinerHold, Service: Quarantiner, Name: "hold", Callers: []string{Auditor},
		Description: "append a legal hold's record to a chain (auditor); no other kind"},
	{Subject: api.QuarantinerRepair, Service: Quarantiner, Name: "repair", Callers: []string{Auditor},
		Description: "seal the record of an event left without an outcome, read from EVENTS (auditor's reconciliation)"},

	{Subject: api.DrainStart, Service: Redriver, Name: "drain-start", Roles: operators, Timeout: 5 * time.Minute,
		Description: "start a drain (filter, rate_per_second, burst, max_concurrency, dry_run)"},
	{Subject: api.DrainStatus, Service: Redriver, Name: "drain-status", Roles: readers, Timeout: 5 * time.Second,
		Description: "a drain's progress"},
	{Subject: api.DrainCancel, Service: Redriver, Name: "drain-cancel", Roles: operators, Timeout: 5 * time.Second,
		Description: "cancel a drain"},
	{Subject: api.DrainResume, Service: Redriver, Name: "drain-resume", Roles: operators, Timeout: 10 * time.Second,
		Description: "resume a paused drain"},
	{Subject: api.DrainList, Service: Redriver, Name: "drain-list", Roles: readers, Timeout: 10 * time.Second,
		Description: "list drains"},
	{Subject: api.Redrive, Service: Redriver, Name: "redrive", Roles: operators, Timeout: 30 * time.Second,
		Description: "replay one event, optionally with a corrected payload"},
	{Subject: api.Release, Service: Redriver, Name: "release", Roles: operators, Timeout: 20 * time.Second,
		Description: "release a poison event back to redrivable"},
	{Subject: api.Dismiss, Service: Redriver, Name: "dismiss", Roles: operators, Timeout: 20 * time.Second,
		Description: "close a chain for good without committing it (a second person approves unless the policy waives it)"},
	// Approvals and the policy: the redriver shows request and diff values
	// only to the roles that read payloads and the approver, and records
	// the read in the access audit.
	{Subject: api.ApprovalList, Service: Redriver, Name: "approval-list", Roles: readers, Timeout: 10 * time.Second,
		Description: "list two-person approvals (no values)"},
	{Subject: api.ApprovalGet, Service: Redriver, Name: "approval-get", Roles: readers, Timeout: 10 * time.Second,
		Description: "show an approval (its values to the approver and payload readers, recorded in the access audit)"},
	{Subject: api.ApprovalApprove, Service: Redriver, Name: "approval-approve", Roles: approvers, Timeout: time.Minute,
		Description: "sign a pending approval (approver, re-authenticating) and execute it"},
	{Subject: api.ApprovalReject, Service: Redriver, Name: "approval-reject", Roles: approvers, Timeout: 10 * time.Second,
		Description: "reject a pending approval"},
	{Subject: api.PolicyGet, Service: Redriver, Name: "policy-get", Roles: readers, Timeout: 10 * time.Second,
		Description: "the approval policy in force"},
	{Subject: api.PolicySet, Service: Redriver, Name: "policy-set", Roles: policySetters, Timeout: 10 * time.Second,
		Description: "replace the approval policy (policy role; recorded in AUDIT)"},
	// The auditor asks the redriver, the approval owner, to store a hold
	// lift's pending approval (it may not write APPROVALS).
	{Subject: api.ApprovalHoldLift, Service: Redriver, Name: "approval-hold-lift", Callers: []string{Auditor}, Timeout: 10 * time.Second,
		Description: "store the pending approval of a hold lift (the auditor's request only)"},

	{Subject: api.AuditVerify, Service: Auditor, Name: "verify", Roles: readers, Timeout: 30 * time.Minute,
		Description: "recompute every seal, chain and checkpoint"},
	{Subject: api.AuditReconcile, Service: Auditor, Name: "reconcile", Roles: readers, Timeout: 30 * time.Minute,
		Description: "account for every event of EVENTS in a time range"},
	{Subject: api.AuditGet, Service: Auditor, Name: "get", Roles: readers, Timeout: time.Minute,
		Description: "one chain: current state and records"},
	{Subject: api.AuditList, Service: Auditor, Name: "list", Roles: readers, Timeout: 5 * time.Minute,
		Description: "quarantined events, filtered, newest first"},
	{Subject: api.AuditGroups, Service: Auditor, Name: "groups", Roles: readers, Timeout: time.Minute,
		Description: "triage groups by fingerprint"},
	{Subject: api.AuditCheckpoint, Service: Auditor, Name: "checkpoint", Roles: operators, Timeout: time.Minute,
		Description: "append a checkpoint to AUDIT now"},
	{Subject: api.AuditWhoami, Service: Auditor, Name: "whoami", Roles: readers, Timeout: 5 * time.Second,
		Description: "the caller's user and role, as the server authenticated it"},
	// The auditor refuses an export to a role that does not read payloads;
	// the access audit lists who read, never what.
	{Subject: api.AuditExport, Service: Auditor, Name: "export", Roles: readers, Timeout: 5 * time.Minute,
		Description: "one page of an inspection export: chains with inclusion proofs (a payload read, recorded)"},
	{Subject: api.AuditAccess, Service: Auditor, Name: "access", Roles: readers, Timeout: time.Minute,
		Description: "the access audit: payload reads, newest first"},
	{Subject: api.HoldPlace, Service: Auditor, Name: "place", Roles: holders, Timeout: 5 * time.Minute,
		Description: "place a legal hold on an event, a party or a filter (inspector, operator)"},
	{Subject: api.HoldLift, Service: Auditor, Name: "lift", Roles: holders, Timeout: 5 * time.Minute,
		Description: "lift a legal hold (inspector, operator)"},
	// Which holds exist and what they hold (ids and case ids).
	{Subject: api.HoldList, Service: Auditor, Name: "list", Roles: readers, Timeout: time.Minute,
		Description: "the legal holds, each with the events it holds"},
	{Subject: api.HoldGet, Service: Auditor, Name: "get", Roles: readers, Timeout: time.Minute,
		Description: "one legal hold and the events it holds"},
	// An approved hold lift is executed by the auditor, on the redriver's
	// request (within the services' account).
	{Subject: api.HoldLiftApproved, Service: Auditor, Name: "lift-approved", Callers: []string{Redriver}, Timeout: 5 * time.Minute,
		Description: "execute a signed hold_lift approval (the redriver's request only)"},
}

// Endpoints returns the endpoint table, in its order. The result is a
// fresh copy.
func Endpoints() []Endpoint {
	out := make([]Endpoint, len(endpoints))
	for i, e := range endpoints {
		e.Roles, e.Callers = slices.Clone(e.Roles), slices.Clone(e.Callers)
		out[i] = e
	}
	return out
}

// EndpointOf returns the table's row of subject (false if the table lacks
// it).
func EndpointOf(subject string) (Endpoint, bool) {
	for _, e := range Endpoints() {
		if e.Subject == subject {
			return e, true
		}
	}
	return Endpoint{}, false
}

// Allowed reports whether a person of role r may call the endpoint
// subject: false for a subject the table lacks.
func Allowed(subject string, r Role) bool {
	e, ok := EndpointOf(subject)
	return ok && e.Allows(r)
}

// EndpointRoles returns the person roles that may call subject (nil for a
// subject the table lacks or one that only services call).
func EndpointRoles(subject string) []Role {
	e, _ := EndpointOf(subject)
	return e.Roles
}

// endpointSubjects returns the subjects of the rows keep selects, in the
// table's order.
func endpointSubjects(keep func(Endpoint) bool) []string {
	var out []string
	for _, e := range endpoints {
		if keep(e) {
			out = append(out, e.Subject)
		}
	}
	return out
}

// ServiceEndpoints returns the endpoint subjects the service user name
// serves (nil for another name): what a service must list in its
// $SRV.INFO before it is ready for requests (endpoint.WaitServing), and
// all that it may list.
func ServiceEndpoints(name string) []string {
	return endpointSubjects(func(e Endpoint) bool { return e.Service == name })
}

// RedriverEndpoints are the subjects of the redriver's endpoints.
func RedriverEndpoints() []string { return ServiceEndpoints(Redriver) }

// AuditorEndpoints are the subjects of the auditor's endpoints. AUDIT's
// stream subject (subjects.AuditCheckpoints) is not among them: it is
// never exported.
func AuditorEndpoints() []string { return ServiceEndpoints(Auditor) }

// calls returns the endpoint subjects the service user name may publish
// to (the rows that name it among their Callers).
func calls(name string) []string {
	return endpointSubjects(func(e Endpoint) bool { return slices.Contains(e.Callers, name) })
}

// RoleEndpoints returns the service subjects a role's account imports
// (and its users may publish to), besides $SRV.> discovery: the table's
// endpoints of the role, and for a publisher events.> first.
func RoleEndpoints(r Role) []string {
	out := endpointSubjects(func(e Endpoint) bool { return e.Allows(r) })
	if r == RolePublisher {
		out = append([]string{subjects.EventsAll}, out...)
	}
	return out
}
