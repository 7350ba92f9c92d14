package streams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/shared/subjects"
)

// REQUESTS is the write-once source of what the redriver's indexes hold
// and AUDIT does not (ADR 0024, issue #38 E4): a pending approval's
// request as created (its request body, corrected payload, identity diff,
// requester and chain head: what its signed decisions name), a drain's
// start (its filter and controls, starter, owner and start time) and its
// end (the final status and counts). One message per subject, a second
// refused by the server (ErrCodeMaxMsgsPerSubject), no rollup, delete or
// purge: nobody, the redriver's credential included, can take back or
// replace what was written. The request body may carry a payload's values
// (PHI): only the redriver (its writer) and the auditor (audit.verify) may
// read REQUESTS; no person's account has JetStream at all.
const (
	// RequestsStream is the name of the REQUESTS stream.
	RequestsStream = "REQUESTS"
	// RequestsAll covers every subject of REQUESTS.
	RequestsAll = "requests.>"
	// ApprovalRequestsAll covers the approvals' requests.
	ApprovalRequestsAll = "requests.approval.>"
	// DrainRequestsAll covers the drains' starts and ends.
	DrainRequestsAll = "requests.drain.>"
)

// ApprovalRequestSubject is the subject of approval id's request.
func ApprovalRequestSubject(id string) string { return "requests.approval." + id }

// DrainStartSubject is the subject of drain id's start.
func DrainStartSubject(id string) string { return "requests.drain." + id + ".start" }

// DrainEndSubject is the subject of drain id's end.
func DrainEndSubject(id string) string { return "requests.drain." + id + ".end" }

// Requests is the write-once REQUESTS stream: one message per subject
// (discard new per subject, as LEDGER and DOCUMENTS), no age limit (an
// approval or a drain is evidence as long as its AUDIT actions), deny
// delete and purge, no rollup.
func Requests(o Options) jetstream.StreamConfig {
	return oncePerSubject(o, RequestsStream,
		"deadletter approval requests and drain starts and ends, write-once (the source of APPROVALS and DRAINS)", RequestsAll)
}

// ErrWrittenOther: a write-once subject already holds another message
// than the one being written (WriteOnce).
var ErrWrittenOther = errors.New("streams: the subject already holds another message")

// WriteOnce writes data on subject of a stream that keeps one message per
// subject (REQUESTS), de-duplicated by msgID within the stream's window.
// A subject that already holds a message is no error when same (given
// the stored bytes and data) says they are the same request (a retry, an
// approved drain executed again); otherwise it is ErrWrittenOther, and
// the stored message stands (the server refuses a second one).
func WriteOnce(ctx context.Context, js jetstream.JetStream, stream, subject, msgID string, data []byte, same func(stored, data []byte) bool) error {
	m := nats.NewMsg(subject)
	m.Data = data
	if msgID != "" {
		m.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	_, err := js.PublishMsg(ctx, m)
	var apiErr *jetstream.APIError
	if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != ErrCodeMaxMsgsPerSubject {
		if err != nil {
			return fmt.Errorf("streams: write %s: %w", stream, err)
		}
		return nil
	}
	var stored []byte
	found := false
	if _, gerr := DirectGet(ctx, js, stream, DirectRequest{LastFor: subject}, func(m *jetstream.RawStreamMsg) error {
		stored, found = m.Data, true
		return nil
	}); gerr != nil {
		return fmt.Errorf("streams: write %s: %w; read back: %w", stream, err, gerr)
	}
	if !found {
		return fmt.Errorf("streams: write %s: %w", stream, err)
	}
	if same == nil {
		same = bytes.Equal
	}
	if !same(stored, data) {
		return fmt.Errorf("%w: %s", ErrWrittenOther, subject)
	}
	return nil
}

// ReadOnce returns the message subject holds in stream (nil, false when
// none).
func ReadOnce(ctx context.Context, js jetstream.JetStream, stream, subject string) ([]byte, bool, error) {
	var data []byte
	found := false
	if _, err := DirectGet(ctx, js, stream, DirectRequest{LastFor: subject}, func(m *jetstream.RawStreamMsg) error {
		data, found = m.Data, true
		return nil
	}); err != nil {
		return nil, false, fmt.Errorf("streams: read %s: %w", stream, err)
	}
	return data, found, nil
}

// drainsKeys is the key prefix of the DRAINS bucket's subjects.
var drainsKeys = strings.TrimSuffix(subjects.BucketKeys(subjects.DrainsBucket), ">")

// AdoptDrains writes, for every drain DRAINS holds (its last value, not
// delete-marked), its value to REQUESTS as the drain's start, and as its
// end too when it is finished (completed, failed or cancelled): the
// drains of a store from before REQUESTS, once, when REQUESTS is created
// (EnsureCore), so that every drain has its start in REQUESTS and a
// redriver resumes only drains whose start REQUESTS holds. A drain
// adopted already (a concurrent provisioning) is left. It returns how
// many drains it adopted.
func AdoptDrains(ctx context.Context, js jetstream.JetStream) (int, error) {
	last := map[string][]byte{}
	var order []string
	err := DirectGetAll(ctx, js, subjects.BucketStream(subjects.DrainsBucket), DirectRequest{Seq: 1, Batch: 256},
		func(m *jetstream.RawStreamMsg) error {
			key, ok := strings.CutPrefix(m.Subject, drainsKeys)
			if !ok {
				return nil
			}
			if _, seen := last[key]; !seen {
				order = append(order, key)
			}
			if m.Header.Get("KV-Operation") != "" || m.Header.Get("Nats-Marker-Reason") != "" {
				last[key] = nil
				return nil
			}
			last[key] = m.Data
			return nil
		})
	if err != nil && !errors.Is(err, nats.ErrNoResponders) {
		return 0, fmt.Errorf("streams: adopt the drains: read %s: %w", subjects.DrainsBucket, err)
	}
	n := 0
	for _, key := range order {
		b := last[key]
		var st struct {
			DrainID string `json:"drain_id"`
			Status  string `json:"status"`
		}
		if b == nil || json.Unmarshal(b, &st) != nil || st.DrainID != key {
			continue
		}
		subjectsOf := []string{DrainStartSubject(key)}
		switch st.Status {
		case "completed", "failed", "cancelled":
			subjectsOf = append(subjectsOf, DrainEndSubject(key))
		}
		for _, subj := range subjectsOf {
			if err := WriteOnce(ctx, js, RequestsStream, subj, "", b, func([]byte, []byte) bool { return true }); err != nil {
				return n, fmt.Errorf("streams: adopt drain %s: %w", key, err)
			}
		}
		n++
	}
	return n, nil
}
