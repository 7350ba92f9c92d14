// Package audit holds the auditor's cross-service tests: the real
// validator, quarantiner, redriver and auditor on one embedded server,
// reconciling a mixed run of events.
package audit
