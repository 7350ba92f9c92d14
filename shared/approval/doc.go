// Package approval is deadletter's two-person approval (issue #18): the
// policy of which actions need a second person, the decision whether one
// action does (Needs, with the correction guard), the store of pending
// approvals (bucket APPROVALS), re-authentication at signing, and the
// electronic signature a signed approval seals into the quarantine chain
// (record.KindApproved).
//
// # The flow
//
// A person (an operator) asks for an action: a correction, the release of
// a poison event, a drain, the lift of a legal hold. The service reads the
// policy (PolicyStore.Get) and asks Needs. When approval is needed it does
// not execute the action: it stores a pending approval (Store.Create) with
// the request to execute, and answers ErrApprovalRequired with it. Someone
// else, with the approver role, reads it (Store.Get, Store.List), and
// approves it (Store.Approve) with a stated meaning and his password, which
// a Reauthenticator checks against the server (21 CFR 11.200(a)(1)); or
// rejects it (Store.Reject). Only the request that wins the approval's
// compare-and-set executes the action: it first appends the approved
// record (Signature gives its signature) to the chain, then the action,
// then marks the approval executed (Store.MarkExecuted). Approving one's
// own request is refused (ErrSelfApproval); a pending approval expires
// (Policy.PendingTTL, default 72 h) and can then no longer be approved.
//
// # Proof
//
// An approval is executed only with its proof (proof.go): Approve, once
// the server accepted the approver's password, signs the decision with
// the approval key (Signer, an nkey only the approval owner holds); every
// executor checks it (Store.Proven) against the public key of its own
// configuration and finds the request and the decision in AUDIT. An entry
// stored approved without a valid proof is shown refused and refused for
// good (Store.Refuse). Create caps the pending approvals per requester and
// per chain (Limits, ErrLimit) and answers a request asked again while
// pending with the pending approval.
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
// ("approval", id)), and a signature is sealed into the chain.
//
// # Values stay out of logs
//
// The request to execute may carry a payload and the identity diff carries
// business identifiers: neither is ever logged. api.Approval and
// api.IdentityChange log only ids, names and statuses (slog.LogValuer,
// fmt.Stringer), api.Password is redacted everywhere, and Redact removes
// the request and the diff values for a role that does not read payloads
// (access.Role.ReadsPayloads).
package approval
