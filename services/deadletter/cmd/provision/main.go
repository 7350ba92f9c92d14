// Command provision is the administrator's step: it creates, or checks, every
// stream and bucket deadletter needs on an existing NATS server or cluster,
// the WORM stores (QUARANTINE, AUDIT) included. Services never create or
// update the WORM stores themselves; run this once, with the break-glass
// admin's credentials, before starting them.
//
//	provision --nats-url nats://n1:4222,nats://n2:4222 --creds admin.creds --replicas 3
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/services/quarantiner"
	"github.com/deadletter/deadletter/services/validator"
	"github.com/deadletter/deadletter/shared/config"
	"github.com/deadletter/deadletter/shared/streams"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "provision:", err)
		os.Exit(1)
	}
}

func run() error {
	o := streams.DefaultOptions()
	conn := config.ConnFlags(flag.CommandLine)
	flag.IntVar(&o.Replicas, "replicas", o.Replicas, "replicas of every stream and bucket (3 in a cluster)")
	flag.DurationVar(&o.EventsMaxAge, "events-max-age", o.EventsMaxAge, "how long EVENTS keeps an event")
	flag.DurationVar(&o.QuarantineMaxAge, "quarantine-max-age", o.QuarantineMaxAge, "retention of quarantine records; 0 keeps them forever (a legal decision)")
	flag.Parse()
	nc, err := conn.Connect("deadletter-provision")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := streams.EnsureCore(ctx, js, o); err != nil {
		return err
	}
	if err := streams.EnsureWORM(ctx, js, o); err != nil {
		return err
	}
	// The services' durable consumers, from the services' own settings
	// (the same DEADLETTER_* variables the services read): no service may
	// create a consumer.
	env := config.NewEnv(os.LookupEnv)
	vcfg, qcfg := validator.DefaultConfig(), quarantiner.DefaultConfig()
	vcfg.LoadEnv(env)
	qcfg.LoadEnv(env)
	if err := env.Err(); err != nil {
		return err
	}
	if err := stack.ProvisionConsumers(ctx, js, vcfg, qcfg); err != nil {
		return err
	}
	fmt.Println("provisioned: EVENTS, LEDGER, FAILURES, ADVISORIES, QUARANTINE, AUDIT, IDEMPOTENCY, ATTEMPTS, DRAINS and the consumers of the validator and the quarantiner")
	return nil
}
