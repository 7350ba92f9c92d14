package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/deadletter/deadletter/tests/internal/benchenv"
)

// The trace sink stands in for a collector on another machine: an OTLP/HTTP
// receiver (POST /v1/traces, protobuf) that counts the spans of each
// export and discards them. It runs in a child process (this binary with
// -serve-sink), so its CPU is not the ingest process's, and it does as
// little as it can: it walks the protobuf wire format down to the spans
// and counts them without decoding them. On a production deployment the
// collector (Jaeger) runs elsewhere, and what tracing costs the ingest is
// the SDK's work in the process: spans, batching, encoding and sending.
// GET /spans returns the count, so the run can check that no span was
// dropped; GET /cpu the sink's own CPU time.

// serveSink runs the sink on a free loopback port until stdin closes,
// printing its base URL on the first line of stdout.
func serveSink() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var spans atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n, err := countSpans(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		spans.Add(n)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
	mux.HandleFunc("GET /spans", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, spans.Load())
	})
	mux.HandleFunc("GET /cpu", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, benchenv.CPUTime().Seconds())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("http://%s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes stdin to stop us
	return srv.Close()
}

// countSpans counts the spans of an OTLP ExportTraceServiceRequest
// (resource_spans = 1 → scope_spans = 2 → spans = 2) from its wire format.
func countSpans(b []byte) (int64, error) {
	var n int64
	err := eachField(b, 1, func(rs []byte) error {
		return eachField(rs, 2, func(ss []byte) error {
			return eachField(ss, 2, func([]byte) error {
				n++
				return nil
			})
		})
	})
	return n, err
}

// eachField calls fn with the bytes of every length-delimited field num of
// the message b, skipping the other fields.
func eachField(b []byte, num protowire.Number, fn func([]byte) error) error {
	for len(b) > 0 {
		f, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if f == num && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			if err := fn(v); err != nil {
				return err
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(f, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		b = b[m:]
	}
	return nil
}

// sink is a running trace sink child process.
type sink struct {
	url   string
	cmd   *exec.Cmd
	stdin io.Closer
}

// startSink starts the trace sink in a child process.
func startSink() (*sink, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-serve-sink")
	benchenv.DieWithParent(cmd)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("trace sink did not start: %w", err)
	}
	return &sink{url: strings.TrimSpace(line), cmd: cmd, stdin: stdin}, nil
}

// spans returns how many spans the sink has received.
func (s *sink) spans(ctx context.Context) (int64, error) {
	v, err := s.get(ctx, "/spans")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// cpu returns the sink's CPU time so far.
func (s *sink) cpu(ctx context.Context) (time.Duration, error) {
	v, err := s.get(ctx, "/cpu")
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(v, 64)
	return time.Duration(f * float64(time.Second)), err
}

// get returns the body of GET path on the sink.
func (s *sink) get(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// close stops the sink.
func (s *sink) close() error {
	_ = s.stdin.Close()
	return s.cmd.Wait()
}
