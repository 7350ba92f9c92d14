package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/rebuild"
)

// Errors of `deadletter rebuild`.
var (
	// errRebuildUsage: a flag or a bucket the command does not know.
	errRebuildUsage = errors.New("usage: deadletter rebuild [--bucket " + strings.Join(rebuild.Buckets(), "|") +
		"] [--remove-extra] [--dry-run] [--grace DURATION] [--data-dir DIR] [--server URL]")
	// errProblemsRemain: an index still disagrees with its source after
	// the command (a dry run's problems, an entry the source cannot
	// restore, an extra entry left, a bucket not read).
	errProblemsRemain = errors.New("rebuild: problems remain")
)

// defaultServer is the NATS URL of `make run` when the data directory
// names none.
const defaultServer = "nats://127.0.0.1:4222"

// rebuildTimeout bounds the whole command: a full comparison of a store
// of a million committed events takes about a minute per bucket on a busy
// 2-core machine (docs/operations/rebuild.md).
const rebuildTimeout = 30 * time.Minute

// runRebuild is `deadletter rebuild`: the administrator compares each
// index (HOLDS, APPROVALS, DRAINS, IDEMPOTENCY) with its write-once
// source and restores it (package rebuild), as the break-glass admin of
// the data directory's credentials, on the server its contexts name. It
// prints one row per problem (bucket, key, kind, fields, what was done:
// ids and field names, never a value) and a line of counts per bucket,
// and fails with errProblemsRemain while any index still disagrees.
func runRebuild(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("rebuild", flag.ContinueOnError)
	fs.SetOutput(out)
	dataDir := fs.String("data-dir", envOr("DEADLETTER_DATA_DIR", "data"), "the data directory of `make run` (its "+stack.CredentialsFile+" and "+stack.ContextsDir+"/) (env DEADLETTER_DATA_DIR)")
	server := fs.String("server", "", "the NATS URL (default: the one the data directory's contexts name, else "+defaultServer+")")
	bucket := fs.String("bucket", "", "only this index: one of "+strings.Join(rebuild.Buckets(), ", ")+" (default: all)")
	removeExtra := fs.Bool("remove-extra", false, "delete-mark the entries no source recorded (their history is kept); default: report them and leave them")
	dryRun := fs.Bool("dry-run", false, "compare only: report the problems, write nothing")
	grace := fs.Duration("grace", rebuild.DefaultGrace, "how old a difference must be to be a problem (an owner writes its bucket and the source one after the other); 0: none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected %q", errRebuildUsage, fs.Arg(0))
	}
	buckets := rebuild.Buckets()
	if *bucket != "" {
		if !slices.Contains(buckets, *bucket) {
			return fmt.Errorf("%w: %q is not a rebuildable bucket", errRebuildUsage, *bucket)
		}
		buckets = []string{*bucket}
	}
	if *dryRun && *removeExtra {
		return fmt.Errorf("%w: --dry-run writes nothing, --remove-extra writes", errRebuildUsage)
	}
	nc, err := connectAdmin(*dataDir, *server)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, rebuildTimeout)
	defer cancel()
	opts := rebuild.Options{Grace: *grace}
	if *grace <= 0 {
		opts.Grace = -1 // none (rebuild.Options: 0 is the default)
	}
	if *removeExtra {
		opts.Extra = rebuild.ExtraRemove
	}
	return rebuildBuckets(ctx, rebuild.New(js, opts), buckets, *dryRun, *removeExtra, out)
}

// rebuildBuckets compares (dryRun) or restores each bucket with rb
// (removeExtra: rb removes extra entries) and prints what it found and
// did.
func rebuildBuckets(ctx context.Context, rb *rebuild.Rebuilder, buckets []string, dryRun, removeExtra bool, out io.Writer) error {
	rows := [][]string{{"BUCKET", "KEY", "KIND", "FIELDS", "DONE", "DETAIL"}}
	var sums []string
	remain, failed := 0, 0
	for _, b := range buckets {
		var rep rebuild.Report
		var err error
		if dryRun {
			rep.Bucket = b
			rep.Problems, err = rb.Compare(ctx, b)
		} else {
			rep, err = rb.Restore(ctx, b)
		}
		if err != nil {
			// Only the bucket's name and the store's error: no value.
			failed++
			sums = append(sums, fmt.Sprintf("%s: not compared: %v", b, rebuild.APIError(err)))
			continue
		}
		left := map[string]bool{}
		for _, p := range rep.Unrestorable {
			left[p.Key] = true
		}
		n := 0
		for _, p := range rep.Problems {
			done := doneWith(p, dryRun, removeExtra, left[p.Key])
			if done != "restored" && done != "removed" {
				n++
			}
			rows = append(rows, []string{p.Bucket, printable(p.Key), string(p.Kind), printable(strings.Join(p.Fields, ", ")), done, printable(detailOf(p, rep.Unrestorable))})
		}
		remain += n
		if dryRun {
			sums = append(sums, fmt.Sprintf("%s: %d problems (dry run: nothing written)", b, len(rep.Problems)))
			continue
		}
		sums = append(sums, fmt.Sprintf("%s: %d problems, %d created, %d updated, %d removed, %d unchanged, %d unrestorable, %d retried; %d remain",
			b, len(rep.Problems), rep.Created, rep.Updated, rep.Removed, rep.Unchanged, len(rep.Unrestorable), rep.Retries, n))
	}
	if len(rows) > 1 {
		if err := writeColumns(out, rows); err != nil {
			return err
		}
	}
	for _, s := range sums {
		fmt.Fprintln(out, s)
	}
	if remain > 0 || failed > 0 {
		return fmt.Errorf("%w: %d problems in the indexes, %d indexes not compared", errProblemsRemain, remain, failed)
	}
	return nil
}

// doneWith says what the command did with problem p: "compared" (a dry
// run), "restored" (a missing or altered entry written from its source),
// "removed" (an extra entry delete-marked), "left" (an extra entry
// reported) or "unrestorable" (the source does not hold it; DETAIL says
// why).
func doneWith(p rebuild.Problem, dryRun, removeExtra, unrestorable bool) string {
	switch {
	case dryRun:
		return "compared"
	case unrestorable:
		return "unrestorable"
	case p.Kind == rebuild.Extra && removeExtra:
		return "removed"
	case p.Kind == rebuild.Extra:
		return "left"
	}
	return "restored"
}

// detailOf is p's detail, the unrestorable one (with why) when the
// restore could not fix it. A detail names ids, fields and states, never
// a value (rebuild.Problem.Detail).
func detailOf(p rebuild.Problem, unrestorable []rebuild.Problem) string {
	for _, u := range unrestorable {
		if u.Key == p.Key && u.Bucket == p.Bucket {
			return u.Detail
		}
	}
	return p.Detail
}

// connectAdmin connects as the break-glass administrator of the data
// directory's credentials (its password never leaves the file), to
// server, or else to the URL (and CA) the directory's natscli contexts
// name, or else to defaultServer.
func connectAdmin(dataDir, server string) (*nats.Conn, error) {
	path := filepath.Join(dataDir, stack.CredentialsFile)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("rebuild: no credentials in %s (start `make run` once first): %w", dataDir, err)
	}
	sec, err := access.LoadOrCreate(path, access.DefaultPeople(), secretOptions...)
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	url, ca := contextServer(filepath.Join(dataDir, stack.ContextsDir))
	if server != "" {
		url = server
	}
	if url == "" {
		url = defaultServer
	}
	opts := append([]nats.Option{nats.Name("deadletter rebuild"), nats.Timeout(10 * time.Second)}, sec.NATSOptions(access.Admin)...)
	if ca != "" {
		opts = append(opts, nats.RootCAs(ca))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("rebuild: connect to %s as %s: %w", url, access.Admin, err)
	}
	return nc, nil
}

// contextServer returns the URL and CA file the first natscli context in
// dir names (`make run` writes one per person, all naming its server);
// empty when there is none.
func contextServer(dir string) (url, ca string) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return "", ""
	}
	slices.Sort(names)
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		var c access.NATSContext
		if json.Unmarshal(b, &c) == nil && c.URL != "" {
			return c.URL, c.CA
		}
	}
	return "", ""
}
