// Package kittest keeps the files an operator deploys from (deploy/systemd,
// deploy/compose, deploy/k8s, deploy/Dockerfile) valid: it decodes them
// strictly into their real types (go-systemd's unit parser, compose-go's
// loader, k8s.io/api objects) and checks they reference the generated
// kit's files, the pinned images and the same ports. It is a module of
// its own, outside the workspace, so these dependencies never enter the
// services' build: run it with `make kit-test`.
package kittest
