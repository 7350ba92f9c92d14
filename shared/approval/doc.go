// Package approval is deadletter's two-person approval (issue #18): the
// policy of which actions need a second person, the decision whether one
// action does (Needs, with the correction guard), the store of pending
// approvals (bucket APPROVALS), the check of decisions signed by their
// person (issue #38), and the electronic signature a signed approval
// seals into the quarantine chain (record.KindApproved).
//
// # The flow
//
// A person (an operator) asks for an action: a correction, the release of
// a poison event, a drain, the lift of a legal hold. The service reads the
// policy (PolicyStore.Get) and asks Needs. When approval is needed it does
// not execute the action: it stores a pending approval (Store.Create) with
// the request to execute, and answers ErrApprovalRequired with it. Someone
// else, with the approver role, reads it (Store.Get, Store.List), and
// approves it (Store.Approve) or rejects it (Store.Reject) with a decision
// signed by a key only that person holds (api.SignedDecision: ForApproval
// of the approval as stored, a meaning, the time). Only the request that
// wins the approval's compare-and-set executes the action: it first
// appends the approved record (Signature gives its signature, the signed
// decision whole) to the chain, then the action, then marks the approval
// executed (Store.MarkExecuted). Approving one's own request is refused
// (ErrSelfApproval), by person: whichever of their logins asked or signs;
// a pending approval expires (Policy.PendingTTL, default 72 h) and can
// then no longer be approved.
//
// # Signed decisions
//
// No service holds a key that can sign a decision (signed.go). An
// executor rebuilds the decision it expects from its own state
// (ForApproval, ForRecord, ForHold) and accepts the signed one only when
// it is that decision but for its meaning and time, signed within MaxSkew
// of now (CheckSigned; CheckRecorded for one recorded earlier), and a
// Checker (the people registry in AUDIT: decision.Registry, or
// AuditRegistry which reads the same api.PersonKeys records) finds it
// signed by a key of the person, who was enabled and held the role at the
// time. Every executor checks an approval's signed decision and finds
// the request and the decision in AUDIT (Store.Proven); an entry stored
// approved without one is shown refused and refused for good
// (Store.Refuse). A refused signature is coded
// (api.ErrDecisionUnsigned); an approval without one APPROVAL_UNPROVEN.
// Create caps the pending approvals per requester and per chain (Limits,
// ErrLimit) and answers a request asked again while pending with the
// pending approval. A record has one open correction at a time
// (PendingCorrection, and Create under the bucket's compare-and-set):
// another is refused with the pending one (ErrCorrectionPending,
// CORRECTION_PENDING). A signed approval whose record moved on since the
// request is refused as stale (Stale: refused, outcome STALE), never
// executed. Tests sign with package approvaltest.
//
// # The default policy
//
// CorrectionsControlled (issue #40): besides the identity rule, every
// correction of a pharmacy event naming a DEA schedule, and every change
// of a pharmacy event's quantity, NDC, lot or registrant, needs a second
// person; other domains keep the identity rule. A store whose policy was
// ever set keeps it (the last AUDIT policy record); only a store without
// one gets the default.
//
// # Where things are kept, and why
//
// The policy is kept in AUDIT, the WORM trail, as governance actions
// (api.AuditAction on subjects.AuditAction("policy", "approval")): every
// change is then recorded for good, with who made it, when and why, and the
// current policy is the last of them (a direct get). A key-value bucket
// with history would keep only its last 64 versions and could be purged.
// A change is a compare-and-set on the subject's last sequence, so two
// people changing it at once cannot silently overwrite each other.
//
// Approvals are kept in the key-value bucket APPROVALS: they change state
// (pending, approved, executed, rejected) by compare-and-set on the entry's
// revision, so two approvers, or one approver's retry, never both win.
// Every transition is also written to AUDIT (subjects.AuditAction
// ("approval", id)), with the signed decision whole, and a signature is
// sealed into the chain.
//
// # Values stay out of logs
//
// The request to execute may carry a payload and the identity diff carries
// business identifiers: neither is ever logged. api.Approval and
// api.IdentityChange log only ids, names and statuses (slog.LogValuer,
// fmt.Stringer), and Redact removes
// the request and the diff values for a role that does not read payloads
// (access.Role.ReadsPayloads). A signed decision logs its action, target,
// person and key id only.
package approval
