// Package cli is dlqctl's command tree (spf13/cobra), importable so that a
// demo can run dlqctl commands in-process (ExecuteContext). Every command is a
// thin layer over one deadletter endpoint or a JetStream publish to
// events.> (the only JetStream a person's account reaches), printing a
// table (default) or stable JSON (--output json, the types of shared/api
// and services/dlqctl/output).
//
// Exit status: 0 ok, 1 the operation failed (a service error, a connection
// error, verify found problems, reconcile found unaccounted events, a drain
// did not complete, a redrive failed again), 2 usage error (unknown command
// or flag, a missing or invalid argument).
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/deadletter/deadletter/services/dlqctl/internal/client"
	"github.com/deadletter/deadletter/services/dlqctl/output"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/safetext"
)

// Exit statuses.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitFailed: the operation failed.
	ExitFailed = 1
	// ExitUsage: the command line is wrong.
	ExitUsage = 2
)

// Output formats.
const (
	outTable = "table"
	outJSON  = "json"
)

// Environment variables dlqctl reads besides the nats CLI's (NATS_URL,
// NATS_CREDS, NATS_USER, NATS_PASSWORD, NATS_NKEY, NATS_INBOX_PREFIX,
// NATS_CONTEXT).
const (
	// EnvActor is deprecated and ignored: the services record the
	// authenticated user as the actor of every decision.
	EnvActor = "DLQCTL_ACTOR"
	// EnvTraceURL is the trace view base of `show` (default Jaeger's on
	// 127.0.0.1:16686).
	EnvTraceURL = "DLQCTL_TRACE_URL"
	// EnvOutput is the default of --output.
	EnvOutput = "DLQCTL_OUTPUT"
)

// IO is where a command reads and writes, and whether they are terminals
// (a terminal gets the drain progress bar, anything else plain lines).
// Nil readers and writers are empty and discarding.
type IO struct {
	In        io.Reader
	Out, Err  io.Writer
	OutIsTTY  bool
	ErrIsTTY  bool
	TermWidth int
}

// StdIO returns the process's standard streams.
func StdIO() IO {
	s := IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
	s.OutIsTTY = term.IsTerminal(int(os.Stdout.Fd()))
	s.ErrIsTTY = term.IsTerminal(int(os.Stderr.Fd()))
	if s.OutIsTTY {
		if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil {
			s.TermWidth = w
		}
	}
	return s
}

// exitError carries an exit status and the error's code.
type exitError struct {
	status int
	code   string
	err    error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is a usage error (exit 2).
func usageErrorf(format string, a ...any) error {
	return &exitError{status: ExitUsage, code: "USAGE", err: fmt.Errorf(format, a...)}
}

// failedf is an operation that ran and did not succeed (exit 1); its
// result was printed.
func failedf(format string, a ...any) error {
	return &exitError{status: ExitFailed, code: "FAILED", err: fmt.Errorf(format, a...)}
}

// app is the state shared by the commands of one invocation.
type app struct {
	io IO
	// raw is io before its writers escape (the progress bar's).
	raw    IO
	conn   client.Options
	output string
	// keyFile is --key: the personal signing key file.
	keyFile string
	started bool
	now     func() time.Time
}

// Execute runs dlqctl with args (without the program name) and returns the
// exit status. SIGINT and SIGTERM cancel the command (a followed drain is
// left running).
func Execute(args []string, s IO) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return ExecuteContext(ctx, args, s)
}

// ExecuteContext runs dlqctl in-process, e.g. from a demo or a test: args
// as on the command line (without the program name), output to s, ctx
// cancelling the command. It installs no signal handler and never exits.
func ExecuteContext(ctx context.Context, args []string, s IO) int {
	if s.In == nil {
		s.In = strings.NewReader("")
	}
	if s.Out == nil {
		s.Out = io.Discard
	}
	if s.Err == nil {
		s.Err = io.Discard
	}
	// Everything printed goes through one escape (package safetext):
	// text from a payload cannot act on the terminal. The progress bar
	// alone writes its own control sequences, to the raw streams.
	raw := s
	s.Out, s.Err = safetext.NewWriter(s.Out), safetext.NewWriter(s.Err)
	a := &app{io: s, raw: raw, now: time.Now}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	_, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	return a.report(err)
}

// report prints err and returns its exit status.
func (a *app) report(err error) int {
	status, code := ExitFailed, "ERROR"
	var ee *exitError
	var se *client.ServiceError
	switch {
	case errors.As(err, &ee):
		status, code = ee.status, ee.code
	case errors.As(err, &se):
		code = se.Err.Code
	case !a.started:
		// cobra refused the command line before any command ran.
		status, code = ExitUsage, "USAGE"
	case errors.Is(err, client.ErrConnect):
		code = "CONNECT"
	case errors.Is(err, client.ErrTimeout):
		code = "TIMEOUT"
	case errors.Is(err, client.ErrNoResponders):
		code = "NO_RESPONDERS"
	case errors.Is(err, access.ErrDisabled):
		code = "PERSON_DISABLED"
	case errors.Is(err, client.ErrPermission):
		code = "PERMISSION"
	}
	msg := err.Error()
	if se != nil {
		msg = se.Err.Message
		if se.Err.Field != "" {
			msg = se.Err.Field + ": " + msg
		}
	}
	// An action that waits for a second person: not done, and not a
	// refusal either; it names the approval to ask for.
	var pending *api.Approval
	if se != nil && se.Err.Code == api.ErrApprovalRequired {
		pending = se.Err.Approval
	}
	if a.output == outJSON {
		b, _ := json.Marshal(output.Error{Error: output.ErrorBody{Code: code, Message: msg, Approval: pending}})
		fmt.Fprintln(a.io.Err, string(b))
		return status
	}
	switch {
	case pending != nil:
		textf(a.io.Err, "dlqctl: %s: pending approval %s: %s\nAn approver signs it with: dlqctl approval approve %s --meaning TEXT\n",
			se.Subject, pending.ID, strings.Join(pending.Reasons, "; "), pending.ID)
	case se != nil:
		textf(a.io.Err, "dlqctl: %s refused: %s: %s\n", se.Subject, se.Err.Code, msg)
	case status == ExitUsage:
		textf(a.io.Err, "dlqctl: %s\nRun 'dlqctl --help' for usage.\n", msg)
	default:
		textf(a.io.Err, "dlqctl: %s\n", msg)
	}
	return status
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "dlqctl",
		Short: "Operate deadletter: publish events, triage the quarantine, drain, redrive, audit",
		Long: `dlqctl is deadletter's operator CLI. Every command is one request to a
deadletter service (or a JetStream publish to events.>), the same a 'nats req'
or 'nats pub' would make, printed as a table or, with --output json, as
stable JSON.

Every connection authenticates as a person: --context
data/contexts/<person>.json (make run writes one natscli context per person:
amara.okafor.json is Amara Okafor, an operator; priya.raman.json a viewer;
elif.yilmaz.json an inspector; chen.wei.json an approver; soren.dahl.json
may change the policy; publisher.json and publisher-<party>.json publish),
or --user/--password. 'deadletter people ls' lists the people and their
roles. People have no JetStream API; dlqctl reaches the services through
their role's imports, and the services record the authenticated person as
the actor of every decision.

Exit status: 0 ok, 1 the operation failed, 2 usage error. A connection
refused for its credentials (none, or wrong ones) is a failure: exit 1,
code CONNECT.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.started = true
			a.contextDefaults(cmd)
			if a.output != outTable && a.output != outJSON {
				out := a.output
				a.output = outTable
				return usageErrorf("--output must be table or json, not %q", out)
			}
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageErrorf("%v", err)
	})
	pf := root.PersistentFlags()
	url := envOr("NATS_URL", nats.DefaultURL)
	pf.StringVarP(&a.conn.URL, "server", "s", url, "NATS server URL(s), comma separated (env NATS_URL)")
	pf.StringVar(&a.conn.URL, "nats-url", url, "alias of --server")
	pf.StringVar(&a.conn.Creds, "creds", os.Getenv("NATS_CREDS"), "NATS user credentials file (env NATS_CREDS)")
	pf.StringVar(&a.conn.User, "user", os.Getenv("NATS_USER"), "NATS user name (env NATS_USER)")
	pf.StringVar(&a.conn.Password, "password", os.Getenv("NATS_PASSWORD"), "NATS password (env NATS_PASSWORD)")
	pf.StringVar(&a.conn.NKey, "nkey", os.Getenv("NATS_NKEY"), "NATS nkey seed file (env NATS_NKEY)")
	pf.StringVar(&a.conn.InboxPrefix, "inbox-prefix", os.Getenv("NATS_INBOX_PREFIX"), "prefix of the reply inboxes (env NATS_INBOX_PREFIX; default _INBOX.<user>, the only inboxes a person may subscribe to)")
	pf.StringVar(&a.conn.TLSCert, "tlscert", "", "TLS client certificate file")
	pf.StringVar(&a.conn.TLSKey, "tlskey", "", "TLS client private key file")
	pf.StringVar(&a.conn.TLSCA, "tlsca", "", "TLS certificate authority file (server verification)")
	pf.StringVar(&a.conn.Context, "context", os.Getenv("NATS_CONTEXT"), "nats CLI context: a name or a context file such as data/contexts/amara.okafor.json (written by make run); its url, user, password, creds, nkey, inbox_prefix and TLS files replace the NATS_* variables; flags still win (env NATS_CONTEXT)")
	pf.StringVar(&a.keyFile, "key", os.Getenv(EnvKey), "your personal signing key file (env "+EnvKey+"; default <person>.key beside --context, else in your config directory; see dlqctl key)")
	pf.DurationVar(&a.conn.Timeout, "timeout", time.Minute, "timeout of connecting and of each request")
	pf.StringVarP(&a.output, "output", "o", envOr(EnvOutput, outTable), "output format: table or json (env "+EnvOutput+")")
	_ = root.RegisterFlagCompletionFunc("output", fixedCompletion(outTable, outJSON))
	a.conn.Name = "dlqctl"

	root.AddCommand(
		a.publishCommand(),
		a.lsCommand(),
		a.findCommand(),
		a.groupsCommand(),
		a.showCommand(),
		a.drainCommand(),
		a.redriveCommand(),
		a.releaseCommand(),
		a.dismissCommand(),
		a.verifyCommand(),
		a.reconcileCommand(),
		a.checkpointCommand(),
		a.exportCommand(),
		a.verifyExportCommand(),
		a.accessCommand(),
		a.holdCommand(),
		a.tailCommand(),
		a.approvalCommand(),
		a.policyCommand(),
		a.backupCommand(),
		a.restoreCommand(),
		a.replicaCommand(),
		a.keyCommand(),
	)
	root.SetHelpCommand(helpCommand())
	// cobra's completion command (bash, zsh, fish, powershell) is a
	// group too: made now, not when the command line runs, so that it
	// answers only its own words.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			group(c)
		}
	}
	return group(root)
}

// contextDefaults gives a --context precedence over the NATS_* variables:
// the connection options not given as flags are cleared, for the context
// to fill (a URL still empty then falls back to NATS_URL or the default).
func (a *app) contextDefaults(cmd *cobra.Command) {
	if a.conn.Context == "" {
		return
	}
	fl := cmd.Flags()
	for _, o := range []struct {
		flags []string
		dst   *string
	}{
		{[]string{"server", "nats-url"}, &a.conn.URL},
		{[]string{"creds"}, &a.conn.Creds},
		{[]string{"user"}, &a.conn.User},
		{[]string{"password"}, &a.conn.Password},
		{[]string{"nkey"}, &a.conn.NKey},
		{[]string{"inbox-prefix"}, &a.conn.InboxPrefix},
		{[]string{"tlscert"}, &a.conn.TLSCert},
		{[]string{"tlskey"}, &a.conn.TLSKey},
		{[]string{"tlsca"}, &a.conn.TLSCA},
	} {
		changed := false
		for _, f := range o.flags {
			changed = changed || fl.Changed(f)
		}
		if !changed {
			*o.dst = ""
		}
	}
}

// connect opens the connection of a command; the caller closes it.
func (a *app) connect() (*client.Client, error) {
	return client.Connect(a.conn)
}

// call connects, sends one request and decodes the reply.
func (a *app) call(ctx context.Context, subject string, req, out any) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Request(ctx, subject, req, out)
}

// printJSON writes v as indented JSON to stdout.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.io.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// json reports whether the output is JSON.
func (a *app) json() bool { return a.output == outJSON }

// fixedCompletion completes a flag from a fixed list.
func fixedCompletion(values ...string) func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// actorHelp is the help of the deprecated --actor flags.
const actorHelp = "deprecated, ignored: the service records the authenticated user (your --context or --user) as the actor"

// addActorFlag registers the deprecated --actor flag: accepted and sent as
// the request's actor field, which the redriver ignores (it records the
// caller the server authenticated).
func addActorFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "actor", "", actorHelp)
}

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
