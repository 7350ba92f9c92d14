package redriver

import (
	"context"
	"strings"

	"github.com/deadletter/deadletter/services/redriver/single"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/endpoint"
)

// Single redrives, corrections, releases and dismissals are the single
// part (single.Redrives); its handlers here check the caller and call it.

// handleRedrive replays one event, after storing its correction if one is
// given. It answers with the outcome observed within RedriveWait, or
// pending; observation then continues in the background. With dry_run it
// answers the check of the redrive (api.RedriveCheck) and changes nothing.
func (s *Service) handleRedrive(ctx context.Context, m endpoint.Meta, req api.RedriveRequest) (api.RedriveReply, error) {
	id, err := s.caller(m, req.Actor)
	if err != nil {
		return api.RedriveReply{}, err
	}
	if len(req.Payload) > s.gate.MaxPayload() {
		return api.RedriveReply{}, api.BadField("payload", "exceeds %d bytes", s.gate.MaxPayload())
	}
	// The records name the caller, never the request's free-text actor.
	req.Actor = id.User
	return s.redrives.Redrive(ctx, req, &single.Asker{Who: id, Body: m.Body}, nil)
}

// handleRelease records a person's decision to move a poison event back
// to redrivable, restoring the class it had before it was poisoned (or the
// one requested).
func (s *Service) handleRelease(ctx context.Context, m endpoint.Meta, req api.ReleaseRequest) (api.AppendReply, error) {
	id, err := s.caller(m, req.Actor)
	if err != nil {
		return api.AppendReply{}, err
	}
	// The record names the caller, never the request's free-text actor.
	req.Actor = id.User
	return s.redrives.Release(ctx, req, &single.Asker{Who: id, Body: m.Body}, nil)
}

// handleDismiss records a person's decision to close a chain for good
// without committing its event: a dismissed record (record.KindDismissed),
// after a second person's approval unless the policy waives it.
func (s *Service) handleDismiss(ctx context.Context, m endpoint.Meta, req api.DismissRequest) (api.AppendReply, error) {
	id, err := s.caller(m, req.Actor)
	if err != nil {
		return api.AppendReply{}, err
	}
	if strings.TrimSpace(req.Reason) == "" {
		return api.AppendReply{}, api.Errorf(api.ErrBadRequest, "a dismissal needs a reason")
	}
	// The record names the caller, never the request's free-text actor.
	req.Actor = id.User
	return s.redrives.Dismiss(ctx, req, &single.Asker{Who: id, Body: m.Body}, nil)
}
