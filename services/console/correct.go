package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/envelope"
	"github.com/deadletter/deadletter/shared/safetext"
	"github.com/deadletter/deadletter/shared/subjects"
)

// correction is the Record page's editor after a check: the corrected
// payload as typed, the validator's verdict and its line diff against the
// original.
type correction struct {
	Text   string
	Reason string
	// Checked: the validator answered (OK, or Code and Detail).
	Checked      bool
	OK           bool
	Code, Detail string
	EventType    string
	// IdentityChanges names the identity fields the correction changes
	// (field names only): such a correction waits for a second person's
	// approval.
	IdentityChanges []string
	Diff            []diffLine
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

// checkSubject is the validator's dry-run subject of a record from its
// source subject (events.<domain>.<type>, or as stored with its
// publisher's token, events.<publisher>.<domain>.<type>).
func checkSubject(source string) (string, bool) {
	rest, ok := strings.CutPrefix(subjects.AsPublished(source), "events.")
	if !ok || strings.Count(rest, ".") < 1 {
		return "", false
	}
	return "validator.check." + rest, true
}

// checkCorrection runs the validator's dry run on text (the event's own
// subject) and diffs it against the original.
func (p *recordPages) checkCorrection(r *http.Request, s *session, d *recordData, text string) *correction {
	cr := &correction{Text: text, Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	cr.Diff, cr.Changed = lineDiff(d.Original, showPayload([]byte(text)))
	cr.Checked = true
	if !json.Valid([]byte(text)) {
		cr.Code, cr.Detail = "MALFORMED_JSON", "the correction is not JSON"
		return cr
	}
	subject, ok := checkSubject(d.State.SourceSubject)
	if !ok {
		cr.Code, cr.Detail = api.ErrBadRequest, "the event's subject names no event type to check against"
		return cr
	}
	body, err := callRaw(r.Context(), p.rq, s, subject, []byte(text))
	if err != nil {
		if e := api.AsError(err); e != nil {
			cr.Code, cr.Detail = e.Code, e.Message
		} else {
			cr.Code, cr.Detail = api.ErrUnavailable, "the validator did not answer"
		}
		return cr
	}
	var rep struct {
		OK       bool               `json:"ok"`
		Envelope *envelope.Envelope `json:"envelope"`
	}
	if err := json.Unmarshal(body, &rep); err != nil || !rep.OK {
		cr.Code, cr.Detail = api.ErrUnavailable, "the validator's answer is unreadable"
		return cr
	}
	cr.OK = true
	if e := rep.Envelope; e != nil {
		cr.EventType = e.EventType
		st := d.State
		for _, f := range []struct {
			name, before, after string
		}{{"idempotency_key", st.IdempotencyKey, e.IdempotencyKey}, {"ordering_key", st.OrderingKey, e.OrderingKey}} {
			if f.before != "" && f.before != f.after {
				cr.IdentityChanges = append(cr.IdentityChanges, f.name)
			}
		}
	}
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
