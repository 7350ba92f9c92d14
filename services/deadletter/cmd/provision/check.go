package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/access/kit"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/streams"
	"github.com/deadletter/deadletter/shared/subjects"
)

// errDrift is returned when the cluster differs from its source.
var errDrift = errors.New("the cluster differs from its source")

// runCheck is `provision --check`: it compares the cluster with the kit in
// dir and with the streams of o and the services' consumers (from the
// same DEADLETTER_* settings the services read), prints every
// difference, and returns errDrift when there is one.
func runCheck(dir, url string, o streams.Options, out io.Writer) error {
	env := config.NewEnv(os.LookupEnv)
	vcfg, qcfg := validator.DefaultConfig(), quarantiner.DefaultConfig()
	vcfg.LoadEnv(env)
	qcfg.LoadEnv(env)
	if err := env.Err(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	w := kit.WantStreams(o)
	w.Consumers = []kit.Consumer{
		{Stream: subjects.EventsStream, Config: vcfg.ConsumerConfig()},
		{Stream: subjects.FailuresStream, Config: qcfg.FailuresConsumerConfig()},
		{Stream: subjects.AdvisoriesStream, Config: qcfg.AdvisoriesConsumerConfig()},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	drift, err := kit.Check(ctx, dir, url, w)
	if err != nil {
		return err
	}
	for _, d := range drift {
		fmt.Fprintln(out, "drift:", d)
	}
	if len(drift) > 0 {
		return fmt.Errorf("%w: %d differences", errDrift, len(drift))
	}
	fmt.Fprintln(out, "no drift: every server runs its generated configuration; streams, buckets and consumers match their definitions")
	return nil
}
