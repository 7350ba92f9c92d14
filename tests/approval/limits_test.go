package approvals

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
	"github.com/deadletter/deadletter/shared/endpoint"
)

// TestLimitsUnderConcurrentRequests (issue #38, E8): an operator on 8
// connections sends 24 identity-changing corrections at once to the real
// redriver: of 24 corrections of one chain exactly 3 become pending
// approvals (the per-chain cap), of 24 corrections of 24 chains exactly
// 20 (the per-requester cap); every other answer is APPROVAL_LIMIT, and
// the approvals stored are exactly those answered.
func TestLimitsUnderConcurrentRequests(t *testing.T) {
	const conns, requests = 8, 24
	e := newEnv(t)
	cfg := e.redriverConfig()
	cfg.MaxPendingPerChain, cfg.MaxPendingPerRequester = 3, 20
	e.startRedriver(t, nil, cfg)
	ncs := make([]*nats.Conn, conns)
	for i := range ncs {
		ncs[i] = e.srv.ConnectAs(t, operator)
	}
	one := e.quarantineInvalid(t, "TX-LIM-ONE")
	txs := make([]string, requests)
	for i := range txs {
		txs[i] = fmt.Sprintf("TX-LIM-%02d", i)
	}
	many, _ := e.seed(t, txs)

	tests := []struct {
		name    string
		request func(i int) api.RedriveRequest
		want    int
	}{
		{"24 corrections of one chain", func(i int) api.RedriveRequest {
			p, _ := e.receive500(t, "TX-LIM-ONE")
			// Each one different: the same correction asked again
			// answers the pending approval.
			return api.RedriveRequest{DLQID: one, Payload: p, Reason: fmt.Sprintf("Lieferschein %d <Großhandel & Söhne>", i)}
		}, 1}, // one open correction per record (issue #40): the others CORRECTION_PENDING
		{"24 corrections of 24 chains", func(i int) api.RedriveRequest {
			p, _ := e.receive500(t, txs[i])
			return api.RedriveRequest{DLQID: many[i], Payload: p, Reason: "陈伟: the invoice says a receive of 500"}
		}, 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := e.pendingCount(t)
			reqs := make([][]byte, requests)
			for i := range reqs {
				reqs[i] = mustJSON(t, tc.request(i))
			}
			errs := make([]error, requests)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range requests {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					<-start
					_, errs[i] = endpoint.CallRaw(ctx, ncs[i%conns], api.Redrive, reqs[i])
				}()
			}
			close(start)
			wg.Wait()
			ids := map[string]bool{}
			for i, err := range errs {
				ae := api.AsError(err)
				switch {
				case ae != nil && ae.Code == api.ErrApprovalRequired && ae.Approval != nil:
					ids[ae.Approval.ID] = true
				case ae != nil && ae.Code == api.ErrApprovalLimit:
				case ae != nil && ae.Code == approval.CodeCorrectionPending && ae.Approval != nil:
				default:
					t.Errorf("request %d: %v, want %s or %s", i, err, api.ErrApprovalRequired, api.ErrApprovalLimit)
				}
			}
			if len(ids) != tc.want {
				t.Errorf("%d pending approvals answered, want %d", len(ids), tc.want)
			}
			if got := e.pendingCount(t) - before; got != tc.want {
				t.Errorf("%d pending approvals stored, want %d", got, tc.want)
			}
			// Clear them for the next row: an approver rejects each.
			var list api.ApprovalListReply
			e.ok(t, approver, api.ApprovalList, api.ApprovalListRequest{Status: api.ApprovalPending}, &list)
			for _, a := range list.Approvals {
				e.ok(t, approver, api.ApprovalReject, e.rejectReq(t, approver, a.ID, "test: cleared"), nil)
			}
		})
	}
}

// pendingCount is the number of pending approvals, as an approver lists
// them.
func (e *env) pendingCount(tb testing.TB) int {
	tb.Helper()
	var list api.ApprovalListReply
	e.ok(tb, approver, api.ApprovalList, api.ApprovalListRequest{Status: api.ApprovalPending}, &list)
	return len(list.Approvals)
}
