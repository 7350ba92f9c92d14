package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/safetext"
)

// holdPages is the legal holds part: the Holds page, placing and lifting
// holds, and the Records list's bulk actions. A hold placed or lifted from
// the record page shows its outcome there (records).
type holdPages struct {
	web
	records *recordPages
	// rp is the passkeys' relying party (passkeys.go).
	rp relyingParty
}

// holdsData is the Holds page: the holds (hold.list) with the records
// each holds, and the form placing a party hold.
type holdsData struct {
	Holds         []api.HeldHold
	IncludeLifted bool
	// Party, Filter, CaseID and Reason are the place form's values after
	// a refusal.
	Party, CaseID, Reason string
	Filter                api.HoldFilter
	// AskConfirm: the hold was refused because it matches nothing now
	// (api.ErrHoldMatchesNothing); the form asks to place it anyway.
	AskConfirm bool
}

// holdsURL is the Holds page (with the lifted holds when lifted).
func holdsURL(lifted bool) string {
	if lifted {
		return "/holds?lifted=on"
	}
	return "/holds"
}

func (p *holdPages) listHolds(r *http.Request, s *session, d *holdsData) error {
	rep, err := call[api.HoldListRequest, api.HoldListReply](r.Context(), p.rq, s, api.HoldList, api.HoldListRequest{IncludeLifted: d.IncludeLifted})
	d.Holds = rep.Holds
	return err
}

func (p *holdPages) handleHolds(w http.ResponseWriter, r *http.Request, s *session) {
	d := &holdsData{IncludeLifted: r.URL.Query().Get("lifted") == "on"}
	err := p.listHolds(r, s, d)
	v := newView(s, "Holds", "holds", d)
	v.setErr(err)
	p.render(w, r, statusOf(err), "holds", v)
}

// placeRequest is a hold.place request from a form's case id and reason.
func placeRequest(r *http.Request, target api.HoldTarget) api.HoldPlaceRequest {
	return api.HoldPlaceRequest{CaseID: strings.TrimSpace(r.PostFormValue("case_id")), Reason: strings.TrimSpace(r.PostFormValue("reason")), Target: target,
		Confirm: r.PostFormValue("confirm") != ""}
}

// handlePlacePartyHold places a hold on a party's events, or on the
// events of a lot or an item (a filter of the domain, the identifiers and
// the party, as the Records search reads them) from the Holds page.
func (p *holdPages) handlePlacePartyHold(w http.ResponseWriter, r *http.Request, s *session) {
	party := strings.TrimSpace(r.PostFormValue("party"))
	f := api.HoldFilter{Domain: strings.TrimSpace(r.PostFormValue("domain")), Lot: strings.TrimSpace(r.PostFormValue("lot")),
		NDC: strings.TrimSpace(r.PostFormValue("ndc")), GTIN: strings.TrimSpace(r.PostFormValue("gtin")),
		SSCC: strings.TrimSpace(r.PostFormValue("sscc")), TLC: strings.TrimSpace(r.PostFormValue("tlc"))}
	target := api.HoldTarget{PartyID: party}
	if f.Domain != "" || f.HasIdentifiers() {
		f.PartyID = party
		target = api.HoldTarget{Filter: &f}
	}
	req := placeRequest(r, target)
	rep, err := p.placeHold(r, s, req)
	if err == nil {
		http.Redirect(w, r, holdsURL(false)+"#hold-"+url.PathEscape(rep.Hold.ID), http.StatusSeeOther)
		return
	}
	d := &holdsData{Party: party, Filter: f, CaseID: req.CaseID, Reason: req.Reason, AskConfirm: api.CodeOf(err) == api.ErrHoldMatchesNothing}
	_ = p.listHolds(r, s, d)
	v := newView(s, "Holds", "holds", d)
	v.setErr(err)
	p.render(w, r, statusOf(err), "holds", v)
}

// placeHold sends hold.place as the person (the auditor names the person
// who placed it from the connection, never from the request).
func (p *holdPages) placeHold(r *http.Request, s *session, req api.HoldPlaceRequest) (api.HoldReply, error) {
	var (
		rep api.HoldReply
		err error
	)
	switch {
	case req.CaseID == "":
		err = api.BadField("case_id", "a hold needs its case id")
	case req.Reason == "":
		err = api.BadField("reason", "a hold needs a reason")
	default:
		rep, err = call[api.HoldPlaceRequest, api.HoldReply](r.Context(), p.rq, s, api.HoldPlace, req)
	}
	p.log.Info("hold place", "user", s.user, "hold_id", rep.Hold.ID, "dlq_id", safetext.LogID(req.Target.DLQID),
		"events", len(req.Target.DLQIDs), "code", api.CodeOf(err))
	return rep, err
}

// handlePlaceRecordHold places a hold on one record (the Record page).
func (p *holdPages) handlePlaceRecordHold(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	rep, err := p.placeHold(r, s, placeRequest(r, api.HoldTarget{DLQID: id}))
	p.records.afterAction(w, r, s, id, err, fmt.Sprintf("Hold %s placed (case %s).", rep.Hold.ID, rep.Hold.CaseID))
}

// handleLiftHold lifts a hold (from the Record page when the form names
// the record, else from the Holds page). A lift the policy sends for
// approval shows as sent for approval.
func (p *holdPages) handleLiftHold(w http.ResponseWriter, r *http.Request, s *session) {
	req := liftRequest(r)
	var err error
	if req.Reason == "" {
		err = api.BadField("reason", "lifting a hold needs a reason")
	} else {
		req.Signed, err = p.signedFor(r, s, req.Reason, holdDecision)
	}
	if err == nil {
		_, err = call[api.HoldLiftRequest, api.HoldReply](r.Context(), p.rq, s, api.HoldLift, req)
	}
	notice := "Hold " + req.ID + " lifted."
	if ap := approvalOf(err); ap != nil {
		notice, err = approvalNotice(ap), nil
	}
	p.log.Info("hold lift", "user", s.user, "hold_id", safetext.LogID(req.ID), "signed", req.Signed != nil, "code", api.CodeOf(err))
	if back := r.PostFormValue("dlq_id"); back != "" {
		p.records.afterAction(w, r, s, back, err, notice)
		return
	}
	if err == nil {
		s.setFlash(notice)
		http.Redirect(w, r, holdsURL(false), http.StatusSeeOther)
		return
	}
	d := &holdsData{}
	_ = p.listHolds(r, s, d)
	v := newView(s, "Holds", "holds", d)
	v.setErr(err)
	p.render(w, r, statusOf(err), "holds", v)
}

// liftRequest is the lift a form asks for (the hold the path names).
func liftRequest(r *http.Request) api.HoldLiftRequest {
	return api.HoldLiftRequest{ID: r.PathValue("id"), CaseID: strings.TrimSpace(r.PostFormValue("case_id")), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
}

// handleLiftChallenge answers the decision a hold's Lift form signs.
func (p *holdPages) handleLiftChallenge(w http.ResponseWriter, r *http.Request, s *session) {
	p.handleChallenge(w, r, s, p.rp, "reason", holdDecision)
}

// maxBulk is the most records one bulk action of the Records list takes.
const maxBulk = 1000

// handleBulk acts on the records selected in the Records list: "drain"
// opens the drain plan of exactly those records (drain.start's dlq_ids,
// through the wizard: dry run, controls, start); "hold" places one hold
// on all the selected records (hold.place's dlq_ids: all or none), with
// one case id and reason.
func (p *holdPages) handleBulk(w http.ResponseWriter, r *http.Request, s *session) {
	_ = r.ParseForm()
	var ids []string
	for _, id := range r.PostForm["dlq_id"] {
		if id = strings.TrimSpace(id); id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	back := r.PostFormValue("back")
	if !strings.HasPrefix(back, "/records") {
		back = "/records"
	}
	switch {
	case len(ids) == 0:
		s.setFlash("Nothing selected: tick the records first.")
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	case len(ids) > maxBulk:
		s.setFlash(fmt.Sprintf("At most %d records at once.", maxBulk))
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	switch r.PostFormValue("action") {
	case "drain":
		q := url.Values{"dlq_id": ids, "exhausted": {"on"}, "validation": {"on"}}
		http.Redirect(w, r, "/drains/plan?"+q.Encode(), http.StatusSeeOther)
	case "hold":
		// One hold for every record selected: placed for all of them or
		// for none (hold.place checks each is stored first), one case,
		// one lift, one placement of the rate limit.
		target := api.HoldTarget{DLQIDs: ids}
		if len(ids) == 1 {
			target = api.HoldTarget{DLQID: ids[0]}
		}
		rep, err := p.placeHold(r, s, placeRequest(r, target))
		msg := fmt.Sprintf("%d of %d selected records held, in one hold %s (case %s).", len(ids), len(ids), rep.Hold.ID, rep.Hold.CaseID)
		if n := max(rep.PendingCount, len(rep.Pending), len(rep.Failed)); err == nil && n > 0 {
			msg += fmt.Sprintf(" %d of them are being recorded in their chains; they are held already.", n)
		}
		if err != nil {
			msg = fmt.Sprintf("0 of %d selected records held: none is held unless all are (%s).", len(ids), errText(err))
		}
		s.setFlash(msg)
		http.Redirect(w, r, back, http.StatusSeeOther)
	default:
		s.setFlash("Choose Drain or Hold for the selected records.")
		http.Redirect(w, r, back, http.StatusSeeOther)
	}
}
