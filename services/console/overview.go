package console

import (
	"cmp"
	"net/http"
	"slices"
	"sync"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
)

// overviewPage is the Overview: counts from the services and the last
// verify and reconcile the console ran (results, shared with the Audit
// page).
type overviewPage struct {
	web
	results *results
}

// overviewData is the Overview page.
type overviewData struct {
	// Cells are the open records per domain and class.
	Cells                      []overviewCell
	Open, Poison               int
	OldestOpenSeconds          float64
	OldestDomain, OldestClass  string
	DrainsRunning, DrainsTotal int
	Drains                     []api.DrainState
	LastVerify                 *verifyResult
	LastReconcile              *reconcileResult
	GroupsErr, DrainsErr       string
	// PendingApprovals counts the approvals waiting for a second person
	// (ApprovalsErr when approval.list did not answer).
	PendingApprovals []api.Approval
	ApprovalsErr     string
	// Held counts the records under an active legal hold, in Holds
	// active holds (-1 when hold.list did not answer).
	Held, Holds int
}

type overviewCell struct {
	Domain, Class string
	Open          int
	OldestSeconds float64
}

func (p *overviewPage) handleOverview(w http.ResponseWriter, r *http.Request, s *session) {
	d := &overviewData{}
	var wg sync.WaitGroup
	var groups api.GroupsReply
	var drains api.DrainListReply
	var gerr, derr, aerr error
	wg.Go(func() {
		groups, gerr = call[api.GroupsRequest, api.GroupsReply](r.Context(), p.rq, s, api.AuditGroups, api.GroupsRequest{Samples: 1})
	})
	wg.Go(func() {
		drains, derr = call[struct{}, api.DrainListReply](r.Context(), p.rq, s, api.DrainList, struct{}{})
	})
	wg.Go(func() { d.PendingApprovals, aerr = pendingApprovals(r.Context(), p.rq, s) })
	wg.Go(func() {
		holds, err := call[api.HoldListRequest, api.HoldListReply](r.Context(), p.rq, s, api.HoldList, api.HoldListRequest{})
		if err != nil {
			d.Held, d.Holds = -1, -1
			return
		}
		held := map[string]bool{}
		for _, h := range holds.Holds {
			if h.Hold.Status != "" && h.Hold.Status != api.HoldActive {
				continue
			}
			d.Holds++
			for _, id := range slices.Concat(h.DLQIDs, h.Pending) {
				held[id] = true
			}
		}
		d.Held = len(held)
	})
	wg.Wait()
	if gerr != nil {
		d.GroupsErr = errText(gerr)
	}
	if aerr != nil {
		d.ApprovalsErr = errText(aerr)
	}
	if derr != nil {
		d.DrainsErr = errText(derr)
	}
	cells := map[[2]string]*overviewCell{}
	for _, g := range groups.Groups {
		if g.Open == 0 {
			continue
		}
		k := [2]string{g.Domain, g.Class}
		cell := cells[k]
		if cell == nil {
			cell = &overviewCell{Domain: g.Domain, Class: g.Class}
			cells[k] = cell
		}
		cell.Open += g.Open
		cell.OldestSeconds = max(cell.OldestSeconds, g.OldestOpenSeconds)
		d.Open += g.Open
		if g.Class == string(record.ClassPoison) {
			d.Poison += g.Open
		}
		if g.OldestOpenSeconds > d.OldestOpenSeconds {
			d.OldestOpenSeconds, d.OldestDomain, d.OldestClass = g.OldestOpenSeconds, g.Domain, g.Class
		}
	}
	for _, cell := range cells {
		d.Cells = append(d.Cells, *cell)
	}
	slices.SortFunc(d.Cells, func(a, b overviewCell) int {
		return cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(a.Class, b.Class))
	})
	for _, dr := range drains.Drains {
		d.DrainsTotal++
		if dr.Status == api.DrainRunning || dr.Status == api.DrainSelecting {
			d.DrainsRunning++
			d.Drains = append(d.Drains, dr)
		}
	}
	d.LastVerify, d.LastReconcile = p.results.get()
	p.render(w, r, http.StatusOK, "overview", newView(s, "Overview", "overview", d))
}
