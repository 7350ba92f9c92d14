package redriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/subjects"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// Errors of chain access.
var (
	// ErrNoChain: no quarantine chain has the dlq id.
	ErrNoChain = errors.New("redriver: no quarantine chain has this dlq id")
	// ErrBadDLQID: the dlq id is not "<domain>_<token>" with safe characters.
	ErrBadDLQID = errors.New("redriver: malformed dlq id")
	// ErrUnreadableChain: a stored record fails its seal or does not parse.
	ErrUnreadableChain = errors.New("redriver: unreadable quarantine record")
)

// chains reads quarantine chains. The quarantiner is the only writer: every
// change the redriver makes is a request to quarantiner.append.
type chains struct {
	stream jetstream.Stream
	nc     *nats.Conn
	tr     telemetry.Tracer
}

// chain is one chain as read, with its fold.
type chain struct {
	domain, dlqID string
	records       []record.Record
	state         record.State
	// foldErr is set when the chain breaks a link or lifecycle rule.
	foldErr error
}

// domainOfID returns the domain prefix of a dlq id ("<domain>_<hex>", as
// record.DLQIDFor builds them), checking the id is a safe subject token.
func domainOfID(id string) (string, error) {
	if id == "" || len(id) > 200 {
		return "", ErrBadDLQID
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "", ErrBadDLQID
		}
	}
	dom, rest, ok := strings.Cut(id, "_")
	if !ok || dom == "" || rest == "" {
		return "", ErrBadDLQID
	}
	return dom, nil
}

// last returns the last record of a chain and its stream sequence.
func (c *chains) last(ctx context.Context, domain, id string) (record.Record, uint64, error) {
	m, err := c.stream.GetLastMsgForSubject(ctx, subjects.Quarantine(domain, id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return record.Record{}, 0, ErrNoChain
	}
	if err != nil {
		return record.Record{}, 0, fmt.Errorf("redriver: read chain: %w", err)
	}
	r, err := record.Parse(m.Data)
	if err != nil {
		return record.Record{}, 0, fmt.Errorf("%w: seq %d: %v", ErrUnreadableChain, m.Sequence, err)
	}
	return r, m.Sequence, nil
}

// read returns a chain, seals verified, folded. It reads the last record
// first, so a one-record chain costs one request, and then forward from
// sequence 1 up to that last record (a consistent snapshot).
func (c *chains) read(ctx context.Context, domain, id string) (chain, error) {
	lastRec, lastSeq, err := c.last(ctx, domain, id)
	if err != nil {
		return chain{}, err
	}
	ch := chain{domain: domain, dlqID: id}
	if lastRec.Index == 0 {
		ch.records = []record.Record{lastRec}
	} else {
		subj := subjects.Quarantine(domain, id)
		ch.records = make([]record.Record, 0, lastRec.Index+1)
		for next := uint64(1); ; {
			m, err := c.stream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subj))
			if err != nil {
				return chain{}, fmt.Errorf("redriver: read chain: %w", err)
			}
			if m.Sequence >= lastSeq {
				ch.records = append(ch.records, lastRec)
				break
			}
			r, err := record.Parse(m.Data)
			if err != nil {
				return chain{}, fmt.Errorf("%w: seq %d: %v", ErrUnreadableChain, m.Sequence, err)
			}
			ch.records = append(ch.records, r)
			next = m.Sequence + 1
		}
	}
	ch.state, ch.foldErr = record.Fold(ch.records)
	return ch, nil
}

// appendError is a refused quarantiner.append, with its reply code.
type appendError struct {
	code, msg string
}

func (e *appendError) Error() string { return "quarantiner.append: " + e.code + ": " + e.msg }

// codeOf returns the api error code of an append error ("" for others).
func codeOf(err error) string {
	var ae *appendError
	if errors.As(err, &ae) {
		return ae.code
	}
	return ""
}

// append asks the quarantiner to append a lifecycle record.
func (c *chains) append(ctx context.Context, req api.AppendRequest) (api.AppendReply, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return api.AppendReply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	msg := nats.NewMsg(api.QuarantinerAppend)
	msg.Data = b
	// The record the quarantiner writes names the trace of this request
	// (a redrive's own trace), so the redrive is found from the dlq id.
	c.tr.Inject(ctx, msg.Header)
	m, err := c.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return api.AppendReply{}, &appendError{code: api.ErrUnavailable, msg: err.Error()}
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		return api.AppendReply{}, &appendError{code: code, msg: m.Header.Get(micro.ErrorHeader)}
	}
	var rep api.AppendReply
	if err := jsonv2.Unmarshal(m.Data, &rep); err != nil {
		return api.AppendReply{}, &appendError{code: api.ErrUnavailable, msg: "unreadable append reply"}
	}
	return rep, nil
}
