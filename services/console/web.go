package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
)

// web is what every part of the console shares, and all a part holds
// besides its own state: the page renderer, the log, the requester that
// calls the services as the person, and the clock.
type web struct {
	*renderer
	log *slog.Logger
	rq  requester
	now func() time.Time
}

// renderer executes the embedded page templates.
type renderer struct {
	pages *pages
	log   *slog.Logger
}

// requester calls the services on a person's connection (call, callRaw),
// each call bounded by timeout.
type requester struct {
	timeout time.Duration
}

// violations collects the permission violations a session's connection
// reports (the server refusing a publish to a subject the person's role
// does not import), so a refused request fails at once instead of waiting
// for its timeout.
type violations struct {
	mu      sync.Mutex
	waiters map[chan struct{}]string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for ch, subject := range v.waiters {
		if strings.Contains(err.Error(), `"`+subject+`"`) {
			close(ch)
			delete(v.waiters, ch)
		}
	}
}

// watch returns a channel closed when a publish to subject is refused,
// and its release.
func (v *violations) watch(subject string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	v.mu.Lock()
	if v.waiters == nil {
		v.waiters = map[chan struct{}]string{}
	}
	v.waiters[ch] = subject
	v.mu.Unlock()
	return ch, func() {
		v.mu.Lock()
		delete(v.waiters, ch)
		v.mu.Unlock()
	}
}

// errRefused is a publish the server refused (the role does not import
// the subject).
var errRefused = errors.New("console: the server refused the request for this role")

// call sends req to subject on the person's connection. A publish the
// server refuses for the person's role fails at once with an
// api.ErrForbidden error.
func call[Req, Rep any](ctx context.Context, rq requester, s *session, subject string, req Req) (Rep, error) {
	return callOn[Req, Rep](ctx, rq.timeout, s.nc, s.violations, s.role, subject, req)
}

// callOn is call on a connection whose refusals v reports.
func callOn[Req, Rep any](ctx context.Context, timeout time.Duration, nc *nats.Conn, v *violations, role, subject string, req Req) (Rep, error) {
	var rep Rep
	body, err := encodeRequest(req)
	if err != nil {
		return rep, fmt.Errorf("console: encode %s request: %w", subject, err)
	}
	data, err := callRawOn(ctx, timeout, nc, v, role, subject, body)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return rep, fmt.Errorf("%w from %s: %w", endpoint.ErrBadAnswer, subject, err)
	}
	return rep, nil
}

// encodeRequest is req as JSON without HTML escaping: a corrected
// payload (a json.RawMessage) reaches the redriver byte for byte as typed
// ("Müller & Söhne <Nord>", not "\u0026" and "\u003c", which
// json.Marshal writes into a RawMessage and the approver then reads).
func encodeRequest(req any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(req); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// replyError is a service's coded error reply with its body (an
// APPROVAL_REQUIRED reply names its approval there: approvalOf).
type replyError struct {
	err  *api.Error
	body []byte
}

// Error is the coded error's text.
func (e *replyError) Error() string { return e.err.Error() }

// Unwrap is the *api.Error, so that api.AsError and api.CodeOf see it.
func (e *replyError) Unwrap() error { return e.err }

// approvalOf returns the pending approval an APPROVAL_REQUIRED error
// reply names (its body's "approval" member), or nil.
func approvalOf(err error) *api.Approval {
	var re *replyError
	if !errors.As(err, &re) || re.err.Code != api.ErrApprovalRequired {
		return nil
	}
	var rep api.ApprovalReply
	if json.Unmarshal(re.body, &rep) != nil || rep.Approval.ID == "" {
		return nil
	}
	return &rep.Approval
}

// callRawOn is callRaw on a connection whose refusals v reports.
func callRawOn(ctx context.Context, timeout time.Duration, nc *nats.Conn, v *violations, role, subject string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	refused, release := v.watch(subject)
	defer release()
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	go func() {
		select {
		case <-refused:
			cancelCause(errRefused)
		case <-ctx.Done():
		}
	}()
	m, err := nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: body})
	if err != nil && errors.Is(context.Cause(ctx), errRefused) {
		if role == "" {
			role = "unknown"
		}
		return nil, &api.Error{Code: api.ErrForbidden, Message: "your role (" + role + ") may not call " + subject + ": the server refused it", Err: errRefused}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", subject, err)
	}
	if e := endpoint.ErrorOf(m); e != nil {
		return nil, &replyError{err: e, body: m.Data}
	}
	return m.Data, nil
}
