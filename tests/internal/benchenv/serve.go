package benchenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"

	"github.com/deadletter/deadletter/shared/embedded"
)

// ServeStore is the child side of ChildServer: it runs an embedded server
// (no fsync, a random port) on the store dir, prints its client URL on a
// line of its own, and runs until its standard input closes.
func ServeStore(dir string) error {
	s, err := embedded.Start(embedded.Config{StoreDir: dir, Port: -1})
	if err != nil {
		return err
	}
	fmt.Println(s.ClientURL())
	signal.Ignore(os.Interrupt)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

// ChildServer runs this executable again with args, which must make it
// call ServeStore, so that the server's CPU is not the bench's: it returns
// the server's URL and the func that stops the child and waits for it.
// The child dies with its parent.
func ChildServer(args ...string) (url string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	child := exec.Command(self, args...)
	DieWithParent(child)
	stdin, err := child.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	out, err := child.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return "", nil, err
	}
	stop = func() {
		_ = stdin.Close()
		_ = child.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("server did not start: %w", err)
	}
	return strings.TrimSpace(line), stop, nil
}
