// Command dlqctl is deadletter's operator CLI: publish events, see what is
// failing (ls, groups, show, tail), drain and redrive quarantined events,
// release poison ones, and prove the quarantine intact (verify) and every
// event accounted for (reconcile). Run `dlqctl --help`.
package main

import (
	"os"

	"github.com/deadletter/deadletter/services/dlqctl/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], cli.StdIO()))
}
