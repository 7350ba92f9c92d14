package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/services/dlqctl/internal/client"
	"github.com/deadletter/deadletter/services/dlqctl/output"
	"github.com/deadletter/deadletter/shared/batch"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document"
	"github.com/deadletter/deadletter/shared/domain/dscsa/document/upload"
	"github.com/deadletter/deadletter/shared/domain/registry"
	"github.com/deadletter/deadletter/shared/gate"
	"github.com/deadletter/deadletter/shared/subjects"
)

// publishFlags are the options of publish.
type publishFlags struct {
	msgID     string
	subject   string
	domain    string
	eventType string
	lines     bool
	batch     int
}

// ErrUndetectable: the payload's domain or event type cannot be told.
var ErrUndetectable = errors.New("cannot tell the domain and event type")

// input is one event read from a file or stdin.
type input struct {
	source string
	data   []byte
}

func (a *app) publishCommand() *cobra.Command {
	var f publishFlags
	cmd := &cobra.Command{
		Use:   "publish [FILE|DIR|-]...",
		Short: "Publish events to events.<domain>.<type>, detected from each payload",
		Long: `Publish events to EVENTS through JetStream, each to the subject its payload
names: the domain is the one whose rules recognise the document (pharmacy:
event_type, dscsa: bizStep, fsma: cte_type) and the type is that field,
normalized. A DIR publishes every *.json file under it, in name order; '-' or
no argument reads stdin. With --lines every non-empty line is one event.

The payload is sent byte for byte: dlqctl does not validate it (the validator
does). --subject publishes to a fixed subject without detection (for instance
a malformed event, to see it quarantined).

Publishing needs a publisher's credentials (--context
data/contexts/publisher.json, any party's, or a party's own publisher such as
data/contexts/publisher-bw4829137.json): events enter EVENTS through the
publisher account's import of events.>, and the stream's acknowledgement
comes back.

Events are sent in atomic batches of --batch (100): the stream stores a
batch as one write, one fsync under sync_interval: always, where one event
per publish costs one each. A batch the stream refuses (a duplicate
--msg-id refuses all of it) is sent again one event at a time, and each
event gets its own outcome.

No Nats-Msg-Id is sent by default. Retrying a publish is safe without one:
the validator de-duplicates by the event's business (idempotency) key. The
stream's Nats-Msg-Id window is shared by every publisher, so an id that
another publisher used first makes the stream drop your event as its
duplicate. --msg-id sets one anyway (JetStream de-duplication within the
stream's window); with several events, the n-th (from 1) gets
"<msg-id>-<n>". A duplicate is reported as such, never as published.

An EPCIS document (a .xml or .jsonld file, or JSON of type EPCISDocument or
EPCISQueryDocument; a DIR's .xml and .jsonld files too) is published whole on
events.dscsa.document, byte for byte: the validator checks and commits or
quarantines each of its events on its own. A document larger than 1 MiB is
sent in parts of 1 MiB and a manifest naming them (docs/adr/0003), with a
progress bar on a terminal; its line names the manifest's sequence.

Prints one line per event: its EVENTS sequence, subject and source; exit 1 if
any event was not published.`,
		Example: `  dlqctl publish schemas/testdata/pharmacy/valid/dispense-schedule-ii.json
  dlqctl publish --msg-id order-1 event.json
  dlqctl publish schemas/testdata/fsma/valid/
  dlqctl publish shipment-2024-05-01.xml
  cat events.ndjson | dlqctl publish --lines -
  echo '{"transaction_id": "TX-1",' | dlqctl publish --subject events.pharmacy.dispense -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.publish(cmd, args, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.msgID, "msg-id", "", "send this Nats-Msg-Id (none by default: ids are stream-wide, and retries are de-duplicated by the business key); with several events a prefix (<msg-id>-<n>)")
	fl.StringVar(&f.subject, "subject", "", "publish to this subject without detection")
	fl.StringVar(&f.domain, "domain", "", "the domain, when detection is ambiguous or fails")
	fl.StringVar(&f.eventType, "type", "", "the event type (with --domain), without detection")
	fl.BoolVar(&f.lines, "lines", false, "each non-empty line of the input is one event (JSON Lines)")
	fl.IntVar(&f.batch, "batch", 100, "events per atomic batch (one stream write, one fsync under sync_interval: always, for the batch; at most 1000); 1: one event per publish")
	_ = cmd.RegisterFlagCompletionFunc("domain", fixedCompletion(registry.Names()...))
	return cmd
}

func (a *app) publish(cmd *cobra.Command, args []string, f publishFlags) error {
	if f.subject != "" && (f.domain != "" || f.eventType != "") {
		return usageErrorf("--subject excludes --domain and --type")
	}
	if f.eventType != "" && f.domain == "" {
		return usageErrorf("--type needs --domain")
	}
	if f.batch < 1 || f.batch > batch.MaxMessages {
		return usageErrorf("--batch must be in 1..%d, not %d", batch.MaxMessages, f.batch)
	}
	if f.subject != "" && !strings.HasPrefix(f.subject, "events.") {
		return usageErrorf("--subject must be under events. (the EVENTS stream), not %q", f.subject)
	}
	checkers := map[string]gate.Checker{}
	var names []string
	for _, c := range gate.Checkers() {
		checkers[c.Domain()] = c
		names = append(names, c.Domain())
	}
	if f.domain != "" && checkers[f.domain] == nil {
		return usageErrorf("--domain must be one of %s, not %q", strings.Join(names, ", "), f.domain)
	}
	if len(args) == 0 {
		args = []string{"-"}
	}
	inputs, err := a.readInputs(args, f.lines)
	if err != nil {
		return err
	}
	results := make([]output.PublishResult, len(inputs))
	var msgs []client.Message
	var index []int // msgs[i] is inputs[index[i]]
	var docs []int  // inputs that are EPCIS documents
	for i, in := range inputs {
		r := output.PublishResult{Source: in.source, Size: len(in.data)}
		if f.subject == "" && f.domain == "" && !f.lines && isDocument(in) {
			r.Subject, r.Domain, r.EventType = subjects.Event(dscsa.Name, subjects.DocumentType), dscsa.Name, subjects.DocumentType
			results[i] = r
			docs = append(docs, i)
			continue
		}
		r.Subject, r.Domain, r.EventType, err = route(in.data, f, checkers)
		if err != nil {
			r.Error = err.Error()
		} else {
			if f.msgID != "" {
				r.MsgID = f.msgID
				if len(inputs) > 1 {
					r.MsgID = f.msgID + "-" + strconv.Itoa(i+1)
				}
			}
			msgs = append(msgs, client.Message{Subject: r.Subject, Data: in.data, MsgID: r.MsgID})
			index = append(index, i)
		}
		results[i] = r
	}
	if len(msgs) > 0 || len(docs) > 0 {
		c, err := a.connect()
		if err != nil {
			return err
		}
		defer c.Close()
		for _, i := range docs {
			a.publishDocument(cmd.Context(), c, inputs[i], &results[i])
		}
		c.Publish(cmd.Context(), msgs, f.batch, func(i int, ack client.Ack) {
			r := &results[index[i]]
			if ack.Err != nil {
				r.Error = ack.Err.Error()
				return
			}
			r.Stream, r.Seq, r.Duplicate = ack.Stream, ack.Seq, ack.Duplicate
		})
	}
	failed := 0
	enc := json.NewEncoder(a.io.Out)
	for _, r := range results {
		if r.Error != "" {
			failed++
		}
		if a.json() {
			_ = enc.Encode(r)
			continue
		}
		switch {
		case r.Error != "":
			textf(a.io.Out, "%-8s %s: %s\n", "error", r.Source, r.Error)
		case r.Duplicate:
			textf(a.io.Out, "%-8d %s %s (duplicate of msg id %s, not stored: the stream already holds an event with this id)\n", r.Seq, r.Subject, r.Source, r.MsgID)
		case r.Document != nil && r.Document.Parts > 0:
			textf(a.io.Out, "%-8d %s %s (document sha256 %s, %d bytes in %d parts; this is its manifest)\n", r.Seq, r.Subject, r.Source, r.Document.SHA256, r.Size, r.Document.Parts)
		case r.Document != nil:
			textf(a.io.Out, "%-8d %s %s (document sha256 %s, %d bytes)\n", r.Seq, r.Subject, r.Source, r.Document.SHA256, r.Size)
		default:
			textf(a.io.Out, "%-8d %s %s\n", r.Seq, r.Subject, r.Source)
		}
	}
	if failed > 0 {
		return failedf("%d of %d events not published", failed, len(results))
	}
	return nil
}

// documentFile reports whether a file name is one of an EPCIS document
// by its extension alone (.xml, .jsonld); a .json file is one when its
// content says so (isDocument).
func documentFile(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return ext == ".xml" || ext == ".jsonld"
}

// isDocument reports whether an input is an EPCIS document: a .xml or
// .jsonld file, or content that begins with '<' or is a JSON object of
// type EPCISDocument or EPCISQueryDocument (its first members read, not
// the whole document).
func isDocument(in input) bool {
	if documentFile(in.source) {
		return true
	}
	t := bytes.TrimLeft(bytes.TrimPrefix(in.data, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(t) > 0 && t[0] == '<' {
		return true
	}
	dec := jsontext.NewDecoder(bytes.NewReader(t))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if name.String() != "type" {
			if dec.SkipValue() != nil {
				return false
			}
			continue
		}
		v, err := dec.ReadToken()
		return err == nil && (v.String() == "EPCISDocument" || v.String() == "EPCISQueryDocument")
	}
	return false
}

// publishDocument publishes an EPCIS document on events.dscsa.document:
// one message, or parts and a manifest when it is larger than one part
// (upload.Publish), with a progress bar on a terminal.
func (a *app) publishDocument(ctx context.Context, c *client.Client, in input, r *output.PublishResult) {
	js, err := jetstream.New(c.Conn())
	if err != nil {
		r.Error = err.Error()
		return
	}
	var progress func(int64)
	if a.io.ErrIsTTY && len(in.data) > document.PartSize {
		bar := progressbar.DefaultBytes(int64(len(in.data)), "publishing "+in.source)
		progressbar.OptionSetWriter(a.io.Err)(bar)
		progress = func(sent int64) { _ = bar.Set64(sent) }
		defer func() { _ = bar.Finish() }()
	}
	res, err := upload.Publish(ctx, js, r.Subject, bytes.NewReader(in.data), progress)
	if err != nil {
		r.Error = err.Error()
		return
	}
	r.Stream, r.Seq = subjects.EventsStream, res.Seq
	r.Document = &output.PublishedDocument{SHA256: res.SHA256, Parts: res.Parts}
}

// route returns the subject, domain and type of a payload.
func route(data []byte, f publishFlags, checkers map[string]gate.Checker) (subject, dom, typ string, err error) {
	if f.subject != "" {
		dom, typ, _ := subjects.ParseEvent(f.subject)
		return f.subject, dom, typ, nil
	}
	if f.domain != "" && f.eventType != "" {
		return subjects.Event(f.domain, f.eventType), f.domain, f.eventType, nil
	}
	doc, err := gate.Decode(data)
	if err != nil {
		return "", "", "", fmt.Errorf("%w: %v (use --subject to publish it anyway)", ErrUndetectable, err)
	}
	if f.domain != "" {
		t, err := checkers[f.domain].EventType(doc)
		if err != nil {
			return "", "", "", fmt.Errorf("%w: %s: %v (use --type)", ErrUndetectable, f.domain, err)
		}
		return subjects.Event(f.domain, t), f.domain, t, nil
	}
	var found []string
	for _, c := range gate.Checkers() {
		if t, err := c.EventType(doc); err == nil {
			found = append(found, c.Domain())
			dom, typ = c.Domain(), t
		}
	}
	switch len(found) {
	case 1:
		return subjects.Event(dom, typ), dom, typ, nil
	case 0:
		return "", "", "", fmt.Errorf("%w: no domain recognises it (no valid event_type, bizStep or cte_type; use --domain and --type, or --subject)", ErrUndetectable)
	}
	return "", "", "", fmt.Errorf("%w: several domains recognise it (%s; use --domain)", ErrUndetectable, strings.Join(found, ", "))
}

// readInputs reads the events named by args.
func (a *app) readInputs(args []string, lines bool) ([]input, error) {
	var out []input
	add := func(source string, data []byte) {
		if !lines {
			out = append(out, input{source: source, data: data})
			return
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
		n := 0
		for sc.Scan() {
			n++
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			out = append(out, input{source: source + ":" + strconv.Itoa(n), data: bytes.Clone(sc.Bytes())})
		}
	}
	stdinUsed := false
	for _, arg := range args {
		if arg == "-" {
			if stdinUsed {
				return nil, usageErrorf("stdin ('-') named twice")
			}
			stdinUsed = true
			b, err := io.ReadAll(a.io.In)
			if err != nil {
				return nil, fmt.Errorf("read stdin: %w", err)
			}
			add("-", b)
			continue
		}
		fi, err := os.Stat(arg)
		if err != nil {
			return nil, usageErrorf("%v", err)
		}
		if !fi.IsDir() {
			b, err := os.ReadFile(arg)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", arg, err)
			}
			add(arg, b)
			continue
		}
		var files []string
		err = filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() && (strings.HasSuffix(d.Name(), ".json") || documentFile(d.Name())) {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", arg, err)
		}
		sort.Strings(files)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			add(p, b)
		}
	}
	if len(out) == 0 {
		return nil, usageErrorf("no event to publish")
	}
	return out, nil
}
