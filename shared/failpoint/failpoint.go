// Package failpoint kills a deadletter process with SIGKILL at a named
// point of its work: the chaos suite's targeted windows, the moments a
// crash is hardest to recover from (after the downstream accepted an event
// and before the LEDGER write; after a record is stored and before its
// intake is acknowledged; between a redrive's claim and its replay, and
// between the replay and its outcome). A random kill -9 rarely lands there;
// a failpoint always does.
//
// A process arms at most one point, from DEADLETTER_FAILPOINT
// ("<point>" or "<point>:<key>", the key an idempotency key or dlq id).
// Unarmed, the default and the only production setting, Hit is a nil
// check.
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Point names a place in a service's work.
type Point string

// The points.
const (
	// ValidatorAfterDownstream: the downstream accepted the event (2xx),
	// LEDGER not written yet. Key: the idempotency key.
	ValidatorAfterDownstream Point = "validator.after-downstream"
	// QuarantinerAfterWrite: the record is stored in QUARANTINE, its
	// intake message not acknowledged yet. Key: the dlq id.
	QuarantinerAfterWrite Point = "quarantiner.after-write"
	// RedriverAfterClaim: the redrive_requested record is stored, the
	// replay not published yet. Key: the dlq id.
	RedriverAfterClaim Point = "redriver.after-claim"
	// RedriverAfterReplay: the replay is published (EVENTS acknowledged
	// it), its outcome record not appended yet. Key: the dlq id.
	RedriverAfterReplay Point = "redriver.after-replay"
	// RedriverAfterApproved: an approval's signature (the approved record)
	// is in the chain, the approved action not executed yet. Key: the dlq
	// id. Not a window of the chaos suite's workload (it asks for no
	// approval): tests/approval kills the redriver there.
	RedriverAfterApproved Point = "redriver.after-approved"
)

// Points lists the points the chaos suite's workload reaches (its
// targeted windows).
func Points() []Point {
	return []Point{ValidatorAfterDownstream, QuarantinerAfterWrite, RedriverAfterClaim, RedriverAfterReplay}
}

// All lists every point: Points and those tested in their own suites.
func All() []Point { return append(Points(), RedriverAfterApproved) }

// Env is the variable that arms a point.
const Env = "DEADLETTER_FAILPOINT"

// ErrUnknown is returned for a point that does not exist.
var ErrUnknown = errors.New("failpoint: unknown point")

// Armed is one armed point (nil: none).
type Armed struct {
	point Point
	key   string
	kill  func()
}

// Parse arms the point v names ("<point>" or "<point>:<key>"); "" arms
// none (nil).
func Parse(v string) (*Armed, error) {
	if v == "" {
		return nil, nil
	}
	name, key, _ := strings.Cut(v, ":")
	for _, p := range All() {
		if string(p) == name {
			return &Armed{point: p, key: key, kill: killSelf}, nil
		}
	}
	return nil, fmt.Errorf("%w %q (one of %v)", ErrUnknown, name, All())
}

// WithKill returns a copy of a that calls kill instead of killing the
// process (for tests of the points' placement).
func (a *Armed) WithKill(kill func()) *Armed {
	if a == nil {
		return nil
	}
	b := *a
	b.kill = kill
	return &b
}

// Hit kills the process when a is armed at p and its key is empty or key.
func (a *Armed) Hit(p Point, key string) {
	if a == nil || a.point != p || (a.key != "" && a.key != key) {
		return
	}
	a.kill()
}

// String names the armed point.
func (a *Armed) String() string {
	if a == nil {
		return ""
	}
	if a.key == "" {
		return string(a.point)
	}
	return string(a.point) + ":" + a.key
}

func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // never returns: the signal is on its way
}
