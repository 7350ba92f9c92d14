// Package output defines the JSON that dlqctl prints with --output json for
// the commands whose reply is not already a type of shared/api. Together
// with shared/api it documents every JSON shape dlqctl emits; the shapes are
// stable: fields are only ever added.
//
// Commands and their JSON (one document on stdout unless noted):
//
//	publish         one PublishResult per event, one per line (JSON Lines)
//	ls              api.ListReply (every page merged with --all)
//	groups          api.GroupsReply
//	show            Show
//	drain           api.DrainState when it ends (followed); api.DrainStartReply
//	                with --detach or --dry-run
//	drain status    api.DrainState
//	drain cancel    api.DrainState
//	drain ls        api.DrainListReply
//	redrive         Redrive (api.RedriveReply and the recorded actor;
//	                with --dry-run its Check, no outcome and no actor)
//	release         Release (api.AppendReply and the recorded actor)
//	dismiss         Release (api.AppendReply and the recorded actor)
//	verify          api.VerifyReply
//	reconcile       api.ReconcileReply
//	checkpoint      api.CheckpointReply
//	tail            one TailRecord per record, one per line (JSON Lines)
//
// Errors are written to stderr as one Error document; stdout stays empty
// for a command that failed before producing a result.
//
// Everything dlqctl prints, tables, text and JSON, passes one escape of
// the characters a terminal acts on (package shared/safetext): a table
// cell or a value in a text line is escaped whole (line breaks and tabs
// too), the rest keeps its lines. JSON escapes the C0 controls itself;
// DEL, C1 and the bidi overrides are written as JSON escapes, so the JSON
// decodes to the same values.
package output

import (
	"time"

	"github.com/deadletter/deadletter/shared/api"
)

// PublishResult is the outcome of publishing one event.
type PublishResult struct {
	// Source is the file the event came from ("-" for stdin), with
	// ":<line>" appended for --lines input.
	Source string `json:"source"`
	// Subject is the subject published to; Domain and EventType the
	// detected (or given) domain and event type.
	Subject   string `json:"subject,omitempty"`
	Domain    string `json:"domain,omitempty"`
	EventType string `json:"event_type,omitempty"`
	// MsgID is the Nats-Msg-Id sent, if any.
	MsgID string `json:"msg_id,omitempty"`
	// Stream and Seq are where JetStream stored the event; Duplicate is
	// true when JetStream recognised the message id and did not store it
	// again (Seq is then the original's).
	Stream    string `json:"stream,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// Size is the payload length in bytes.
	Size int `json:"size"`
	// Document is set when the input was an EPCIS document: its SHA-256
	// and the parts it was published in (0: one message; Seq is then the
	// document's, else its manifest's).
	Document *PublishedDocument `json:"document,omitempty"`
	// Error says why the event was not published ("" when it was).
	Error string `json:"error,omitempty"`
}

// PublishedDocument is how an EPCIS document was published.
type PublishedDocument struct {
	SHA256 string `json:"sha256"`
	Parts  int    `json:"parts"`
}

// Show is one quarantine chain (audit.get) with the Jaeger link of its
// failure's trace.
type Show struct {
	api.GetReply
	// TraceURL is the trace view of the failure's trace ("" without a
	// trace id).
	TraceURL string `json:"trace_url,omitempty"`
}

// Redrive is a redrive's reply with the actor the redriver recorded.
type Redrive struct {
	api.RedriveReply
	// Actor is the authenticated user the chain's records name as the one
	// who asked for the redrive ("" when it could not be read back).
	Actor string `json:"actor,omitempty"`
}

// Release is a release's reply with the actor the redriver recorded.
type Release struct {
	api.AppendReply
	// Actor is the authenticated user the released record names ("" when
	// it could not be read back).
	Actor string `json:"actor,omitempty"`
}

// TailRecord is one lifecycle record of QUARANTINE, without payload,
// headers, details or attempts: PHI-free by construction.
type TailRecord struct {
	// Seq is the record's QUARANTINE sequence.
	Seq uint64 `json:"seq"`
	// DLQID, Index and Kind name the record (record.Kind*).
	DLQID string `json:"dlq_id"`
	Index int    `json:"index"`
	Kind  string `json:"kind"`
	// Domain, Class, Code and RedriveCount are the event's state after
	// the record.
	Domain       string `json:"domain"`
	Class        string `json:"class"`
	Code         string `json:"code"`
	RedriveCount int    `json:"redrive_count"`
	// DrainID names the drain that wrote the record, if any.
	DrainID string `json:"drain_id,omitempty"`
	// Actor is the authenticated person whose decision the record states
	// (a correction, redrive request, release), as the service recorded
	// it.
	Actor string `json:"actor,omitempty"`
	// At is when the record was written; Hash its audit hash.
	At   time.Time `json:"at"`
	Hash string    `json:"hash"`
}

// Error is a failed command's error (stderr, --output json).
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the code and message of an error. Code is the service's
// error code (api.Err*, e.g. NOT_FOUND) when a service refused the request,
// else one of dlqctl's: USAGE (exit 2), CONNECT, TIMEOUT, NO_RESPONDERS
// (no service listens: is it running?), PERMISSION (the NATS user may not
// use the subject), FAILED (the operation ran but did not succeed, e.g.
// verify found problems), APPROVAL_REQUIRED (the action waits for a
// second person: Approval names the pending approval), INTERRUPTED (Ctrl-C while following a drain, which
// continues), ERROR.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Approval is the pending approval of an APPROVAL_REQUIRED answer
	// (the action waits for a second person: dlqctl approval).
	Approval *api.Approval `json:"approval,omitempty"`
}
