package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/safetext"
)

// correction is the Record page's editor after a check: the corrected
// payload as typed, the validator's verdict and its line diff against the
// original.
type correction struct {
	Text   string
	Reason string
	// Checked: the redriver's dry run answered (OK, or Code and Detail).
	Checked      bool
	OK           bool
	Code, Detail string
	EventType    string
	// IdentityChanges names the identity fields the correction changes
	// (field names only); ApprovalRequired: under the policy in force it
	// waits for a second person's approval.
	IdentityChanges  []string
	ApprovalRequired bool
	Diff             []diffLine
	// Changed: the diff is not empty.
	Changed bool
}

// diffLine is one line of a diff: Op is "+", "-" or " ".
type diffLine struct {
	Op, Text string
}

// lineDiff is the line diff of b against a (sergi/go-diff's line mode).
func lineDiff(a, b string) (lines []diffLine, changed bool) {
	dmp := diffmatchpatch.New()
	ca, cb, table := dmp.DiffLinesToChars(a, b)
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(ca, cb, false), table)
	for _, d := range diffs {
		op := " "
		switch d.Type {
		case diffmatchpatch.DiffInsert:
			op, changed = "+", true
		case diffmatchpatch.DiffDelete:
			op, changed = "-", true
		}
		for _, l := range strings.SplitAfter(d.Text, "\n") {
			if l == "" {
				continue
			}
			lines = append(lines, diffLine{Op: op, Text: strings.TrimSuffix(l, "\n")})
		}
	}
	return lines, changed
}

// checkCorrection asks the redriver's dry run (api.RedriveRequest.DryRun)
// of the correction text of record d: it is checked on the subject the
// corrected payload names (a corrected bizStep, CTE type or event type
// moves it), as the replay will be, and says whether the policy asks a
// second person; the text is diffed against the original.
func (p *recordPages) checkCorrection(r *http.Request, s *session, d *recordData, text string) *correction {
	cr := &correction{Text: text, Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	cr.Diff, cr.Changed = lineDiff(d.Original, showPayload([]byte(text)))
	cr.Checked = true
	if !json.Valid([]byte(text)) {
		cr.Code, cr.Detail = "MALFORMED_JSON", "the correction is not JSON"
		return cr
	}
	rep, err := call[api.RedriveRequest, api.RedriveReply](r.Context(), p.rq, s, api.Redrive,
		api.RedriveRequest{DLQID: d.ID, Payload: json.RawMessage(text), Reason: cr.Reason, DryRun: true})
	if err != nil {
		if e := api.AsError(err); e != nil {
			cr.Code, cr.Detail = e.Code, e.Message
		} else {
			cr.Code, cr.Detail = api.ErrUnavailable, "the redriver did not answer"
		}
		return cr
	}
	c := rep.Check
	if c == nil {
		cr.Code, cr.Detail = api.ErrUnavailable, "the redriver's answer holds no check"
		return cr
	}
	cr.OK, cr.Code, cr.Detail, cr.EventType = c.OK, c.Code, c.Detail, c.EventType
	cr.IdentityChanges, cr.ApprovalRequired = c.IdentityChanges, c.ApprovalRequired
	return cr
}

// handleCheck shows a correction's validation result and diff. Showing
// the original is a payload read: it needs the reveal's reason and is
// recorded in the access audit again.
func (p *recordPages) handleCheck(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	revealReason := strings.TrimSpace(r.PostFormValue("reveal_reason"))
	text := r.PostFormValue("payload")
	if revealReason == "" {
		d, err := p.getRecord(r, s, id, "")
		if err == nil {
			err = api.BadField("reveal_reason", "reveal the payload with a reason first")
		}
		p.renderRecord(w, r, s, d, err, "")
		return
	}
	d, err := p.getRecord(r, s, id, revealReason)
	d.Reason = revealReason
	if err != nil || !d.Revealed {
		if err == nil {
			err = &api.Error{Code: api.ErrForbidden, Message: "the payload could not be read"}
		}
		p.renderRecord(w, r, s, d, err, "")
		return
	}
	d.Correction = p.checkCorrection(r, s, d, text)
	p.log.Info("correction checked", "user", s.user, "dlq_id", safetext.LogID(id), "ok", d.Correction.OK, "code", d.Correction.Code)
	p.renderRecord(w, r, s, d, nil, "")
}

// handleCorrect redrives the record with the corrected payload. An
// identity-changing correction (or any, by policy) is answered with a
// pending approval: shown as sent for approval.
func (p *recordPages) handleCorrect(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	text := r.PostFormValue("payload")
	req := api.RedriveRequest{DLQID: id, Payload: json.RawMessage(text), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	var (
		rep api.RedriveReply
		err error
	)
	switch {
	case !json.Valid([]byte(text)):
		err = api.BadField("payload", "the correction is not JSON")
	case req.Reason == "":
		err = api.BadField("reason", "a correction needs a reason")
	default:
		rep, err = call[api.RedriveRequest, api.RedriveReply](r.Context(), p.rq, s, api.Redrive, req)
	}
	if ap := approvalOf(err); ap != nil {
		p.log.Info("correction sent for approval", "user", s.user, "dlq_id", safetext.LogID(id), "approval_id", ap.ID)
		p.afterAction(w, r, s, id, nil, approvalNotice(ap))
		return
	}
	p.log.Info("correction redriven", "user", s.user, "dlq_id", safetext.LogID(id), "outcome", rep.Outcome, "code", api.CodeOf(err))
	p.afterAction(w, r, s, id, err, fmt.Sprintf("Corrected and redriven: %s (status %s).", rep.Outcome, rep.Status))
}
