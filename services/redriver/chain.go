package redriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/deadletter/deadletter/services/redriver/chainio"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/chain"
	"github.com/deadletter/deadletter/shared/record"
	"github.com/deadletter/deadletter/shared/telemetry"
)

// Errors of chain access.
var (
	// ErrNoChain: no quarantine chain has the dlq id.
	ErrNoChain = chain.ErrNotFound
	// ErrBadDLQID: the dlq id is not "<domain>_<token>" with safe characters.
	ErrBadDLQID = chainio.ErrBadDLQID
	// ErrUnreadableChain: a stored record fails its seal or does not parse.
	ErrUnreadableChain = chain.ErrUnreadable
)

// chains reads quarantine chains (chain.Reader) and asks for appends. The
// quarantiner is the only writer: every change the redriver makes is a
// request to quarantiner.append.
type chains struct {
	reader *chain.Reader
	nc     *nats.Conn
	tr     telemetry.Tracer
}

// last returns the last record of a chain, seal verified.
func (c *chains) last(ctx context.Context, domain, id string) (record.Record, error) {
	r, _, err := c.reader.LastRecord(ctx, domain, id)
	return r, chainErr(err)
}

// read returns a chain, seals verified, folded.
func (c *chains) read(ctx context.Context, domain, id string) (chain.Chain, error) {
	ch, err := c.reader.Read(ctx, domain, id)
	return ch, chainErr(err)
}

// chainErr wraps an error of chain.Reader other than its sentinels.
func chainErr(err error) error {
	if err == nil || errors.Is(err, chain.ErrNotFound) || errors.Is(err, chain.ErrUnreadable) {
		return err
	}
	return fmt.Errorf("redriver: read chain: %w", err)
}

// appendError is a refused quarantiner.append, with its reply code.
type appendError struct {
	code, msg string
}

func (e *appendError) Error() string { return "quarantiner.append: " + e.code + ": " + e.msg }

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
