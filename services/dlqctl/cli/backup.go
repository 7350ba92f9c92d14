package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/backup"
	"github.com/deadletter/deadletter/shared/embedded"
	"github.com/deadletter/deadletter/shared/export"
)

// backupCommand is `dlqctl backup DIR`: a backup of every stream and
// bucket through JetStream's snapshot API (package backup), by default as
// the backup account's backup user, of its mirrors.
func (a *app) backupCommand() *cobra.Command {
	var keyFile, credsFile string
	var servicesAccount bool
	var catchUp time.Duration
	cmd := &cobra.Command{
		Use:   "backup DIR",
		Short: "Write a signed backup of every stream and bucket into DIR (JetStream snapshots of the backup account's mirrors, while the system runs; the manifest is written last)",
		Long: `Write a backup of every stream and bucket holding evidence or state
(QUARANTINE, AUDIT, LEGALHOLD, LEDGER, EVENTS, REPLAYS and every KV
bucket, with their configurations) into DIR, which must be new or empty,
through JetStream's snapshot API while the system keeps running. The
manifest (each part's stream, first and last sequence, message count,
SHA-256) is tied to the newest signed checkpoint, signed with the audit key
(--signing-key) and written last: a backup without it is refused by
restore.

By default it runs as the backup user (account ` + access.BackupAccount + `, an
nkey: --nkey backup.nk from the kit, or --credentials), which snapshots
that account's mirrors of the services' streams and can do nothing else
(docs/adr/0001-backup-identity.md): each part is taken once its mirror
has caught up, and carries its origin's configuration, so restore gives
the services' streams back. With --credentials holding the backup
account's admin (make run's file), the mirrors are created first when
missing. --services-account takes the snapshots of the services' streams
themselves, as the break-glass admin (before the mirrors exist).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return usageErrorf("--signing-key is required (the auditor's audit signing key, e.g. anchors/audit-signing.nk)")
			}
			kp, err := export.LoadSigningKey(keyFile)
			if err != nil {
				return err
			}
			defer kp.Wipe()
			var nc *nats.Conn
			o := backup.Options{Mirrors: !servicesAccount, CatchUp: catchUp}
			switch {
			case servicesAccount:
				if err := a.asAdmin(credsFile); err != nil {
					return err
				}
				c, err := a.connect()
				if err != nil {
					return err
				}
				defer c.Close()
				nc = c.Conn()
				o.InboxPrefix = a.conn.InboxPrefix
				if o.InboxPrefix == "" && a.conn.User != "" {
					o.InboxPrefix = access.InboxPrefix(a.conn.User)
				}
			case credsFile != "":
				if nc, err = a.backupConn(cmd.Context(), credsFile); err != nil {
					return err
				}
				defer nc.Close()
			default:
				c, err := a.connect()
				if err != nil {
					return err
				}
				defer c.Close()
				nc = c.Conn()
				if o.InboxPrefix = a.conn.InboxPrefix; o.InboxPrefix == "" {
					o.InboxPrefix = access.InboxPrefix(access.BackupUser)
				}
			}
			man, err := backup.Take(cmd.Context(), nc, args[0], kp, o)
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
	fl.StringVar(&keyFile, "signing-key", "", "the audit signing key file (nkeys seed, mode 0600) the manifest is signed with")
	fl.StringVar(&credsFile, "credentials", "", "connect as the backup user of this credentials file, creating the backup account's mirrors first as its admin when the file holds it (make run: data/credentials.json); with --services-account, as the break-glass admin")
	fl.BoolVar(&servicesAccount, "services-account", false, "snapshot the services' streams themselves as the break-glass admin, not the backup account's mirrors")
	fl.DurationVar(&catchUp, "catch-up", 30*time.Second, "how long to wait for each mirror to catch up before its snapshot (its lag then is in the manifest)")
	return cmd
}

// backupConn connects as the backup user of the credentials file, after
// creating the backup account's mirrors as its admin when the file holds
// the admin's password.
func (a *app) backupConn(ctx context.Context, file string) (*nats.Conn, error) {
	if _, err := os.Stat(file); err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	creds, err := access.LoadOrCreate(file, access.DefaultPeople())
	if err != nil {
		return nil, err
	}
	url := a.conn.URL
	if url == "" {
		url = os.Getenv("NATS_URL")
	}
	if url == "" {
		url = nats.DefaultURL
	}
	if creds.Users[access.BackupAdmin].Password != "" {
		adm, err := nats.Connect(url, append(creds.NATSOptions(access.BackupAdmin), nats.Name("dlqctl-backup-admin"))...)
		if err != nil {
			return nil, fmt.Errorf("connect as %s: %w", access.BackupAdmin, err)
		}
		err = backup.EnsureMirrors(ctx, adm)
		adm.Close()
		if err != nil {
			return nil, err
		}
	}
	nc, err := nats.Connect(url, append(creds.NATSOptions(access.BackupUser), nats.Name("dlqctl-backup"))...)
	if err != nil {
		return nil, fmt.Errorf("connect as %s: %w", access.BackupUser, err)
	}
	return nc, nil
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
				k, err := export.SigningPublicKey(keyFile)
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
	fl.StringVar(&dataDir, "data-dir", "", "restore offline into this new store directory: a server with the accounts of --credentials is started on it for the restore, then stopped (then: deadletter run --data-dir DIR)")
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
