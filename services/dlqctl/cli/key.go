package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/deadletter/deadletter/services/dlqctl/internal/client"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/decision"
)

// Environment variables of the personal signing key.
const (
	// EnvKey is the default of --key: the personal key file.
	EnvKey = "DLQCTL_KEY"
	// EnvKeyPassphrase is the key's passphrase, for scripts (otherwise it
	// is asked on the terminal).
	EnvKeyPassphrase = "DEADLETTER_KEY_PASSPHRASE"
)

// minPassphrase is the shortest passphrase key init takes.
const minPassphrase = 8

// keyCommand is `dlqctl key init|show`: the person's personal signing
// key, which signs their decisions (approve, reject, release, dismiss,
// hold lift).
func (a *app) keyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Your personal signing key: it signs your decisions (init, show)",
		Long: `A decision (approval approve|reject, release, dismiss, hold lift) is valid
only when signed by its person, with a key only that person holds: dlqctl
signs it with your personal ed25519 key, kept on your machine encrypted with
your passphrase. 'dlqctl key init' creates it and prints the line an
administrator runs to register its public key ('deadletter people key add');
the services keep only the public key.

The key file is --key (env ` + EnvKey + `), else <person>.key beside the
--context file (make run's data/contexts/), else
<config dir>/deadletter/keys/<person>.key. The passphrase is asked on the
terminal, or read from ` + EnvKeyPassphrase + ` for scripts.`,
	}
	cmd.AddCommand(a.keyInitCommand(), a.keyShowCommand())
	return group(cmd)
}

func (a *app) keyInitCommand() *cobra.Command {
	var person string
	cmd := &cobra.Command{
		Use:   "init [--person NAME]",
		Short: "Create your personal signing key, encrypted with a passphrase, and print its registration",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.keyPerson(person)
			if err != nil {
				return err
			}
			path, err := a.keyPath(p)
			if err != nil {
				return err
			}
			if _, err := os.Stat(path); err == nil {
				return failedf("%s has a key already in %s: 'dlqctl key show' prints its registration (a new key: move that file away first, and have the old one revoked)", p, path)
			}
			pass, err := a.passphrase(true)
			if err != nil {
				return err
			}
			kf, _, err := decision.NewKeyFile(p, pass)
			if err != nil {
				return err
			}
			if err := decision.WriteKeyFile(path, kf); err != nil {
				return fmt.Errorf("write the key: %w", err)
			}
			a.printKey(path, kf)
			return nil
		},
	}
	cmd.Flags().StringVar(&person, "person", "", "whose key (default: the person of --context or --user)")
	return cmd
}

func (a *app) keyShowCommand() *cobra.Command {
	var person string
	cmd := &cobra.Command{
		Use:   "show [--person NAME]",
		Short: "Print your personal key's public key and its registration line",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.keyPerson(person)
			if err != nil {
				return err
			}
			path, err := a.keyPath(p)
			if err != nil {
				return err
			}
			kf, err := a.readKey(p, path)
			if err != nil {
				return err
			}
			a.printKey(path, kf)
			return nil
		},
	}
	cmd.Flags().StringVar(&person, "person", "", "whose key (default: the person of --context or --user)")
	return cmd
}

func (a *app) printKey(path string, kf decision.KeyFile) {
	if a.json() {
		_ = a.printJSON(struct {
			Person   string `json:"person"`
			Scheme   string `json:"scheme"`
			KeyID    string `json:"key_id"`
			File     string `json:"file"`
			Register string `json:"register"`
		}{kf.Person, kf.Scheme, kf.KeyID, path, registerLine(kf)})
		return
	}
	textf(a.io.Out, "personal signing key of %s: %s\npublic key (ed25519): %s\nan administrator registers it with:\n  %s\n", kf.Person, path, kf.KeyID, registerLine(kf))
}

func registerLine(kf decision.KeyFile) string {
	return "deadletter people key add " + kf.Person + " --ed25519 " + kf.KeyID
}

// keyPerson is the person whose key is used: given, else the person of
// the connection's user (a role login's person: chen.wei+operator signs
// as chen.wei).
func (a *app) keyPerson(given string) (string, error) {
	if given != "" {
		if !access.ValidPersonName(given) {
			return "", usageErrorf("--person: %v", access.ErrPersonName)
		}
		return given, nil
	}
	o, err := a.conn.Resolved()
	if err != nil {
		return "", err
	}
	if o.User == "" {
		return "", usageErrorf("whose key? give --person, or --context / --user")
	}
	return access.PersonOf(o.User), nil
}

// keyPath is the personal key file of person (see keyCommand).
func (a *app) keyPath(person string) (string, error) {
	if a.keyFile != "" {
		return a.keyFile, nil
	}
	if dir := a.conn.ContextDir(); dir != "" {
		return filepath.Join(dir, person+".key"), nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config directory for the key (give --key): %w", err)
	}
	return filepath.Join(dir, "deadletter", "keys", person+".key"), nil
}

// readKey reads person's key file; a missing one says how to make it.
func (a *app) readKey(person, path string) (decision.KeyFile, error) {
	kf, err := decision.ReadKeyFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return kf, failedf("no personal signing key for %s (%s): create one with 'dlqctl key init' and have an administrator register it ('deadletter people key add'); decisions are signed with it", person, path)
	case err != nil:
		return kf, failedf("%v", err)
	case kf.Person != person:
		return kf, failedf("the key in %s is %s's, not %s's", path, kf.Person, person)
	}
	return kf, nil
}

// passphrase reads the key's passphrase: EnvKeyPassphrase, else the
// terminal (twice for a new key).
func (a *app) passphrase(twice bool) ([]byte, error) {
	if p, ok := os.LookupEnv(EnvKeyPassphrase); ok {
		if twice && len(p) < minPassphrase {
			return nil, usageErrorf("%s: a passphrase of at least %d characters", EnvKeyPassphrase, minPassphrase)
		}
		return []byte(p), nil
	}
	f, ok := a.io.In.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, usageErrorf("the key's passphrase is asked on a terminal; without one, set %s", EnvKeyPassphrase)
	}
	read := func(prompt string) ([]byte, error) {
		fmt.Fprint(a.io.Err, prompt)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.io.Err)
		return b, err
	}
	p, err := read("Passphrase of your signing key: ")
	if err != nil {
		return nil, fmt.Errorf("read passphrase: %w", err)
	}
	if twice {
		if len(p) < minPassphrase {
			return nil, usageErrorf("a passphrase of at least %d characters", minPassphrase)
		}
		again, err := read("The passphrase again: ")
		if err != nil {
			return nil, fmt.Errorf("read passphrase: %w", err)
		}
		if !bytes.Equal(p, again) {
			return nil, usageErrorf("the two passphrases differ")
		}
	}
	return p, nil
}

// signingKey loads and opens person's key.
func (a *app) signingKey(person string) (ed25519.PrivateKey, error) {
	path, err := a.keyPath(person)
	if err != nil {
		return nil, err
	}
	kf, err := a.readKey(person, path)
	if err != nil {
		return nil, err
	}
	var pass []byte
	if kf.KDF == decision.KDFNone {
		if a.json() {
			return kf.Open(nil)
		}
		textf(a.io.Err, "note: %s is make run's example key of %s, kept unencrypted beside the context\n", path, person)
	} else if pass, err = a.passphrase(false); err != nil {
		return nil, err
	}
	priv, err := kf.Open(pass)
	if err != nil {
		return nil, failedf("%s: %v", path, err)
	}
	return priv, nil
}

// sign builds the caller's decision with build (package decision's
// builders, from what the server showed), prints what is signed to
// stderr (not with -o json), and signs it with the caller's personal key. The person and the
// role are those the server authenticates (audit.whoami).
func (a *app) sign(ctx context.Context, c *client.Client, build func(person, role string, at time.Time) api.Decision) (*api.SignedDecision, error) {
	var who api.WhoamiReply
	if err := c.Request(ctx, api.AuditWhoami, struct{}{}, &who); err != nil {
		return nil, err
	}
	person := access.PersonOf(who.User)
	priv, err := a.signingKey(person)
	if err != nil {
		return nil, err
	}
	d := build(person, who.Role, a.now())
	sd := decision.SignEd25519(priv, d)
	if a.json() {
		// Scripts read stderr's one JSON error: what is signed is in the
		// request they built.
		return &sd, nil
	}
	t := newTable(a.io.Err)
	t.row("SIGNING", d.Action+" "+d.Target)
	t.row("AS", d.Person+" ("+d.Role+") at "+d.At.Format(time.RFC3339))
	t.row("REQUEST", d.Request)
	if d.Chain != "" {
		t.row("CHAIN", d.Chain)
	}
	t.row("MEANING", d.Meaning)
	t.row("KEY", sd.Signature.KeyID)
	t.flush()
	return &sd, nil
}

// chainHead returns the audit hash of the record of dlqID's chain at
// index (-1: the last), as audit.get shows it; "" when the chain has no
// such record.
func chainHead(ctx context.Context, c *client.Client, dlqID string, index int) (string, error) {
	var rep api.GetReply
	if err := c.Request(ctx, api.AuditGet, api.GetRequest{DLQID: dlqID}, &rep); err != nil {
		return "", err
	}
	if index < 0 {
		index = len(rep.Records) - 1
	}
	if index < 0 || index >= len(rep.Records) {
		return "", nil
	}
	var r struct {
		AuditHash string `json:"audit_hash"`
	}
	if err := json.Unmarshal(rep.Records[index].Record, &r); err != nil {
		return "", fmt.Errorf("%w: record %d of %s", client.ErrBadReply, index, dlqID)
	}
	return r.AuditHash, nil
}
