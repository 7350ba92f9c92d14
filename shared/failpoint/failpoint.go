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
//
// The live implementation is built only with the build tag failpoint
// (go build -tags failpoint; the chaos suite's binaries and the tests that
// arm a point). Without it, the production build, Parse refuses any point
// with ErrNotBuilt and Hit does nothing: a production binary carries no
// way to kill itself. Live, unarmed Hit is a nil check.
package failpoint

import (
	"errors"
	"fmt"
	"strings"
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
	// ValidatorLastDelivery: an event is being reported exhausted (it
	// failed transiently on its last allowed delivery, Config.MaxDeliver,
	// the attempt recorded in ATTEMPTS; or a spare delivery found that
	// decision), its report not stored yet. Key: the idempotency key.
	ValidatorLastDelivery Point = "validator.last-delivery"
	// QuarantinerDropMaxDeliveries is not a kill: an armed quarantiner
	// acknowledges every max-deliveries advisory without acting on it, as
	// if the advisory had been lost (a core message that ADVISORIES did
	// not store while it had no leader). Key: none (Drops ignores it).
	QuarantinerDropMaxDeliveries Point = "quarantiner.drop-max-deliveries"
	// RedriverAfterApproved: an approval's signature (the approved record)
	// is in the chain, the approved action not executed yet. Key: the dlq
	// id. Not a window of the chaos suite's workload (it asks for no
	// approval): tests/approval kills the redriver there.
	RedriverAfterApproved Point = "redriver.after-approved"
)

// Points lists the points the chaos suite's workload reaches (its
// targeted windows).
func Points() []Point {
	return []Point{ValidatorAfterDownstream, ValidatorLastDelivery, QuarantinerAfterWrite, RedriverAfterClaim, RedriverAfterReplay}
}

// All lists every point: Points and those tested in their own suites.
func All() []Point { return append(Points(), QuarantinerDropMaxDeliveries, RedriverAfterApproved) }

// Env is the variable that arms a point.
const Env = "DEADLETTER_FAILPOINT"

// ErrUnknown is returned for a point that does not exist.
var ErrUnknown = errors.New("failpoint: unknown point")

// ErrNotBuilt is returned by Parse, for any point, in a binary built
// without the build tag failpoint.
var ErrNotBuilt = errors.New("failpoint: this binary was built without failpoints (build it with -tags failpoint)")

// parse splits v ("<point>" or "<point>:<key>") and checks the point
// exists.
func parse(v string) (Point, string, error) {
	name, key, _ := strings.Cut(v, ":")
	for _, p := range All() {
		if string(p) == name {
			return p, key, nil
		}
	}
	return "", "", fmt.Errorf("%w %q (one of %v)", ErrUnknown, name, All())
}
