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
	"google.golang.org/protobuf/proto"
)

// The trace sink stands in for a collector on another machine: an OTLP/HTTP
// receiver (POST /v1/traces, protobuf) that decodes each export, counts its
// spans and discards them. It runs in a child process (this binary with
// -serve-sink), so its CPU is not the ingest process's; on a production
// deployment the collector (Jaeger) runs elsewhere, and what tracing costs
// the ingest is the SDK's work in the process: spans, batching, encoding
// and sending. GET /spans returns the count, so the run can check that no
// span was dropped.

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
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var n int64
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				n += int64(len(ss.GetSpans()))
			}
		}
		spans.Add(n)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
	mux.HandleFunc("GET /spans", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, spans.Load())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("http://%s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes stdin to stop us
	return srv.Close()
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/spans", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// close stops the sink.
func (s *sink) close() error {
	_ = s.stdin.Close()
	return s.cmd.Wait()
}
