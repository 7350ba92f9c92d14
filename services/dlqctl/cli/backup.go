package cli

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/services/auditor"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/backup"
	"github.com/deadletter/deadletter/shared/embedded"
)

// backupCommand is `dlqctl backup DIR`: a backup of every stream and
// bucket through JetStream's snapshot API (package backup), as the
// backup user.
func (a *app) backupCommand() *cobra.Command {
	var keyFile, credsFile string
	cmd := &cobra.Command{
		Use:   "backup DIR",
		Short: "Write a signed backup of every stream and bucket into DIR (JetStream snapshots, while the system runs; the manifest is written last)",
		Long: `Write a backup of every stream and bucket holding evidence or state
(QUARANTINE, AUDIT, LEGALHOLD, LEDGER, EVENTS, the intake streams and every
KV bucket, with their configurations) into DIR, which must be new or empty,
through JetStream's snapshot API while the system keeps running. The
manifest (each part's stream, first and last sequence, message count,
SHA-256) is tied to the newest signed checkpoint, signed with the audit key
(--signing-key) and written last: a backup without it is refused by
restore. Every snapshot is delivered under the connection's own inbox
prefix. Connect as the break-glass admin: a right to snapshot cannot be
contained within the services' account (docs/adr/0001-backup-identity.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return usageErrorf("--signing-key is required (the auditor's audit signing key, e.g. anchors/audit-signing.nk)")
			}
			kp, err := auditor.LoadSigningKey(keyFile)
			if err != nil {
				return err
			}
			defer kp.Wipe()
			if err := a.asAdmin(credsFile); err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			prefix := a.conn.InboxPrefix
			if prefix == "" && a.conn.User != "" {
				prefix = access.InboxPrefix(a.conn.User)
			}
			man, err := backup.Take(cmd.Context(), c.Conn(), args[0], kp, backup.Options{InboxPrefix: prefix})
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(man)
			}
			a.printParts(man)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "signing-key", "", "the audit signing key file (nkeys seed, mode 0600) the manifest is signed with")
	cmd.Flags().StringVar(&credsFile, "credentials", "", "connect as the break-glass admin of this credentials file (make run: data/credentials.json)")
	return cmd
}

// restoreCommand is `dlqctl restore DIR`: a checked backup restored into
// an empty server, as the break-glass admin.
func (a *app) restoreCommand() *cobra.Command {
	var pubKey, keyFile, credsFile, dataDir string
	cmd := &cobra.Command{
		Use:   "restore DIR",
		Short: "Restore the backup in DIR into an empty server (break-glass admin), after checking its manifest's signature and every part's SHA-256",
		Long: `Restore the backup in DIR into a server that holds none of its streams
(or, with --data-dir, into a new store directory, offline)
(a restore never overwrites). The manifest must verify with --pubkey (the
audit key's public key, never the backup's own) and every part must match
its size and SHA-256; a partial backup (no manifest) is refused. Connect as
the break-glass admin. Then start the services and prove the restore:
dlqctl verify (checks the store against the newest checkpoint the auditor
exported: records written after the backup are reported missing) and
dlqctl verify --anchor DIR/checkpoint.jsonl --pubkey KEY (the backup's own
checkpoint).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pubKey == "" && keyFile != "" {
				k, err := auditor.SigningPublicKey(keyFile)
				if err != nil {
					return err
				}
				pubKey = k
			}
			if pubKey == "" {
				return usageErrorf("--pubkey (or --signing-key) is required: the audit key's public key")
			}
			if err := a.asAdmin(credsFile); err != nil {
				return err
			}
			if dataDir != "" {
				stop, err := a.offlineServer(credsFile, dataDir)
				if err != nil {
					return err
				}
				defer stop()
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			man, err := backup.Restore(cmd.Context(), c.Conn(), args[0], pubKey, nil)
			if err != nil {
				return err
			}
			if a.json() {
				return a.printJSON(man)
			}
			a.printParts(man)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&pubKey, "pubkey", "", "the audit key's nkeys public key the manifest must be signed with")
	fl.StringVar(&keyFile, "signing-key", "", "take the public key from this audit signing key file instead of --pubkey")
	fl.StringVar(&credsFile, "credentials", "", "connect as the break-glass admin of this credentials file (make run: data/credentials.json)")
	fl.StringVar(&dataDir, "data-dir", "", "restore offline into this new store directory: a server with the accounts of --credentials is started on it for the restore, then stopped (then: deadletter --data-dir DIR)")
	return cmd
}

// printParts prints a manifest's checkpoint and parts.
func (a *app) printParts(man backup.Manifest) {
	t := newTable(a.io.Out)
	t.row("STREAM", "FIRST", "LAST", "MSGS", "BYTES", "SHA-256")
	for _, p := range man.Parts {
		t.row(p.Stream, strconv.FormatUint(p.FirstSeq, 10), strconv.FormatUint(p.LastSeq, 10),
			strconv.FormatUint(p.Msgs, 10), strconv.FormatInt(p.Bytes, 10), p.SHA256)
	}
	t.flush()
	if cp := man.Checkpoint; cp != nil {
		fmt.Fprintf(a.io.Out, "checkpoint: AUDIT seq %d covers QUARANTINE 1..%d (%d records), merkle root %s\n",
			cp.AuditSeq, cp.LastSeq, cp.TreeSize, cp.MerkleRoot)
	} else {
		fmt.Fprintln(a.io.Out, "checkpoint: none (AUDIT held no checkpoint)")
	}
}

// asAdmin sets the connection's user and password to the break-glass
// admin's of the credentials file (nothing when file is empty).
func (a *app) asAdmin(file string) error {
	if file == "" {
		return nil
	}
	if _, err := os.Stat(file); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	creds, err := access.LoadOrCreate(file, access.DefaultPeople())
	if err != nil {
		return err
	}
	sec, ok := creds.Users[access.Admin]
	if !ok || sec.Password == "" {
		return fmt.Errorf("credentials: %s holds no admin password", file)
	}
	a.conn.User, a.conn.Password, a.conn.Creds, a.conn.NKey, a.conn.InboxPrefix = access.Admin, sec.Password, "", "", ""
	return nil
}

// offlineServer starts a server on the new store directory dir with the
// accounts of the credentials file, on a free loopback port, and points
// the connection at it.
func (a *app) offlineServer(credsFile, dir string) (stop func(), err error) {
	if credsFile == "" {
		return nil, usageErrorf("--data-dir needs --credentials (the accounts the restored streams belong to)")
	}
	if es, err := os.ReadDir(dir); err == nil && len(es) > 0 {
		return nil, fmt.Errorf("restore: %s is not empty (a restore never overwrites a store)", dir)
	}
	creds, err := access.LoadOrCreate(credsFile, access.DefaultPeople())
	if err != nil {
		return nil, err
	}
	text, err := access.ServerConfig(creds)
	if err != nil {
		return nil, err
	}
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, Port: -1, ConfigText: text})
	if err != nil {
		return nil, err
	}
	a.conn.URL = srv.ClientURL()
	return func() { srv.Shutdown(); srv.WaitForShutdown() }, nil
}
