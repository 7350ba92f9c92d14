package auditor

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/auditor/internal/read"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// The auditor reads single records, batches of records and the last
// record of many chains at once with JetStream direct gets on QUARANTINE
// (streams.DirectGet).
const (
	// directMaxBytes bounds the bytes of one reply (the server stops
	// sending past it and says how many are pending).
	directMaxBytes = 8 << 20
	// directMaxSubjects is the server's limit of results of one multi_last
	// request.
	directMaxSubjects = streams.MaxMultiLast
)

// directRequest is a direct-get request.
type directRequest = streams.DirectRequest

// directMsg is one message of a direct-get reply.
type directMsg struct {
	seq     uint64
	subject string
	data    []byte
}

// errDirect is a direct get answered with an unexpected reply.
var errDirect = streams.ErrDirectGet

// direct sends req to the direct-get API of stream and hands each message
// of the reply to fn, in order. It returns how many matching messages the
// server had left unsent (max_bytes or batch reached); a reply of "no
// results" hands nothing and returns 0.
func (s *Service) direct(ctx context.Context, stream string, req directRequest, fn func(directMsg)) (pending uint64, err error) {
	return streams.DirectGet(ctx, s.js, stream, req, func(m *jetstream.RawStreamMsg) error {
		fn(directMsg{seq: m.Sequence, subject: m.Subject, data: m.Data})
		return nil
	})
}

// The scans, the time search and the token check live in package read,
// which the auditor's parts share.
var (
	scan        = read.Scan
	seqAtTime   = read.SeqAtTime
	validToken  = read.ValidToken
	lastToken   = read.LastToken
	chainFilter = read.ChainFilter
	// documentBytes reads an event's bytes from its document in DOCUMENTS.
	documentBytes = read.DocumentBytes
)

// domainOfSubject returns the domain token of a quarantine subject
// (quarantine.<domain>.<dlq_id>).
func domainOfSubject(subject string) string {
	rest, ok := strings.CutPrefix(subject, "quarantine.")
	if !ok {
		return ""
	}
	dom, _, _ := strings.Cut(rest, ".")
	return dom
}

// eachLastRecord hands fn the last QUARANTINE message at or below upTo
// (0: the whole stream) of the chain of each dlq id that has one, with the
// id; chains without one are skipped, and so are ids that are not subject
// tokens. It sends one multi_last request per directMaxSubjects ids, and
// again for the ids a reply left out (max_bytes), so at most about
// directMaxBytes of records are held at once: fn must copy what it keeps.
func (s *Service) eachLastRecord(ctx context.Context, ids []string, upTo uint64, fn func(id string, m directMsg)) error {
	todo := make([]string, 0, len(ids))
	for _, id := range ids {
		if chainFilter(id) != "" {
			todo = append(todo, id)
		}
	}
	got := make(map[string]bool, len(todo))
	for len(todo) > 0 {
		chunk := todo[:min(len(todo), directMaxSubjects)]
		filters := make([]string, len(chunk))
		for i, id := range chunk {
			filters[i] = chainFilter(id)
		}
		n := 0
		pending, err := s.direct(ctx, subjects.QuarantineStream,
			directRequest{MultiLast: filters, UpToSeq: upTo, MaxBytes: directMaxBytes}, func(m directMsg) {
				id := lastToken(m.subject)
				got[id] = true
				n++
				fn(id, m)
			})
		if err != nil {
			return err
		}
		rest := todo[len(chunk):]
		if pending > 0 {
			if n == 0 {
				return fmt.Errorf("%w: %s: a multi_last reply holds nothing but %d are pending", errDirect, subjects.QuarantineStream, pending)
			}
			// Ask again for the ids of this chunk the reply left out.
			var left []string
			for _, id := range chunk {
				if !got[id] {
					left = append(left, id)
				}
			}
			rest = append(left, rest...)
		}
		todo = rest
	}
	return nil
}

// firstRecord returns the first QUARANTINE message on subject (a single
// direct get, next_by_subj from sequence 1).
func (s *Service) firstRecord(ctx context.Context, subject string) (directMsg, bool, error) {
	var (
		first directMsg
		found bool
	)
	_, err := s.direct(ctx, subjects.QuarantineStream, directRequest{Seq: 1, NextFor: subject}, func(m directMsg) {
		first, found = m, true
	})
	return first, found, err
}
