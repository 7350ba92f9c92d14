package validator

import "github.com/deadletter/deadletter/shared/config"

// LoadEnv overrides cfg from environment variables (see the README):
// DEADLETTER_MAX_DELIVER, DEADLETTER_ACK_WAIT, DEADLETTER_BACKOFF_BASE,
// DEADLETTER_BACKOFF_MAX, DEADLETTER_MAX_PAYLOAD, DEADLETTER_WORKERS,
// DEADLETTER_COMMIT_BATCH,
// DEADLETTER_CLAIM_LEASE, DEADLETTER_DOWNSTREAM_URL,
// DEADLETTER_DOWNSTREAM_TIMEOUT, DEADLETTER_PUBLISHERS_FILE, DEADLETTER_INSTANCE_ID (default
// <hostname>-validator-<DEADLETTER_INSTANCE_INDEX>), DEADLETTER_REPLICAS,
// DEADLETTER_SYNC_ALWAYS,
// DEADLETTER_PROVISION, DEADLETTER_CREATE_CONSUMER, DEADLETTER_FAILPOINT.
func (c *Config) LoadEnv(env *config.Env) {
	env.Int("DEADLETTER_MAX_DELIVER", &c.MaxDeliver)
	env.Duration("DEADLETTER_ACK_WAIT", &c.AckWait)
	env.Duration("DEADLETTER_BACKOFF_BASE", &c.BackoffBase)
	env.Duration("DEADLETTER_BACKOFF_MAX", &c.BackoffMax)
	env.Int("DEADLETTER_MAX_PAYLOAD", &c.MaxPayload)
	env.Int("DEADLETTER_WORKERS", &c.Workers)
	env.Int("DEADLETTER_COMMIT_BATCH", &c.CommitBatch)
	env.Duration("DEADLETTER_CLAIM_LEASE", &c.ClaimLease)
	env.String("DEADLETTER_DOWNSTREAM_URL", &c.DownstreamURL)
	env.String("DEADLETTER_PUBLISHERS_FILE", &c.PublishersFile)
	env.Duration("DEADLETTER_DOWNSTREAM_TIMEOUT", &c.DownstreamTimeout)
	env.Instance("validator", &c.InstanceID)
	env.Streams(&c.Streams)
	env.Bool("DEADLETTER_PROVISION", &c.Provision)
	env.Bool("DEADLETTER_CREATE_CONSUMER", &c.CreateConsumer)
	env.Failpoint(&c.Failpoint)
}
