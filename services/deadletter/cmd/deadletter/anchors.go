package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/deadletter/deadletter/services/auditor/anchor"
	"github.com/deadletter/deadletter/services/deadletter/stack"
)

// Errors of `deadletter anchors`.
var (
	// errAnchorsUsage: no known action.
	errAnchorsUsage = errors.New("usage: deadletter anchors rotate [--anchor-dir DIR]")
	// errNoAnchors: the anchor directory holds no checkpoint to move aside.
	errNoAnchors = errors.New("anchors: no checkpoints to rotate")
)

// runAnchors is `deadletter anchors rotate`: the way to begin a new store
// on purpose beside the anchors of an earlier one (the banner's NEW STORE
// block). It moves the export file of the anchor directory aside, under a
// name with the time (kept: the earlier store's backup is still verified
// against it), so that the next start writes the new store's anchors.
// The signing key stays: the earlier checkpoints verify with it.
func runAnchors(args []string, out io.Writer, now func() time.Time) error {
	if len(args) == 0 || args[0] != "rotate" {
		return errAnchorsUsage
	}
	fs := flag.NewFlagSet("anchors rotate", flag.ContinueOnError)
	fs.SetOutput(out)
	dir := fs.String("anchor-dir", envOr("DEADLETTER_ANCHOR_DIR", "anchors"), "the anchor directory of `deadletter run` (env DEADLETTER_ANCHOR_DIR)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected %q", errAnchorsUsage, fs.Arg(0))
	}
	from := filepath.Join(*dir, stack.ExportFile)
	st, err := os.Stat(from)
	if errors.Is(err, os.ErrNotExist) || (err == nil && st.Size() == 0) {
		return fmt.Errorf("%w: %s holds none", errNoAnchors, from)
	}
	if err != nil {
		return fmt.Errorf("anchors: %w", err)
	}
	to := anchor.RotatedName(from, now())
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("anchors: %s exists already: try again in a second", to)
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("anchors: %w", err)
	}
	fmt.Fprintf(out, "moved the earlier store's checkpoints aside: %s -> %s (kept: verify that store's backup against it with dlqctl verify --anchor %s)\nthe next `deadletter run` begins the anchors of a new store, and its auditor names this file in AUDIT\n", from, to, to)
	return nil
}
